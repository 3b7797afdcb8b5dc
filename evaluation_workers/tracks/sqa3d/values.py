"""How submitted values are shown in messages, and what counts as an integer id."""

from __future__ import annotations

import json
from typing import Any


def is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def show(value: Any) -> str:
    """A short rendering of a submitted value for messages."""
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "a list"
    if is_int(value) and value.bit_length() > 128:
        return f"an integer of {len(str(value))} digits"
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 40 else text[:37] + "..."
