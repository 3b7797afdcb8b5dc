"""Reading one box or one id out of parsed JSON, with the words a message needs when it is wrong.

Shared by the labels (where a fault is the maintainer's, ``LabelsError``) and the
predictions (the submitter's, ``PredictionFormatError``): each function returns the
value, or raises ``ValueError`` whose text completes "Expected `<field>` to be ...".
"""

from __future__ import annotations

import math
from typing import Any

CORNERS_RULE = "8 corners [[x, y, z], ...] of finite numbers"
BOX_RULE = "[cx, cy, cz, dx, dy, dz] of finite numbers"


def show(value: Any, limit: int = 60) -> str:
    """A short description of a JSON value for messages (never a whole list)."""
    if isinstance(value, list):
        return f"a list of {len(value)}"
    if isinstance(value, dict):
        return "an object"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _number(value: Any) -> float:
    # bool is an int in Python but not a number in JSON; strings are not numbers either.
    if type(value) not in (int, float):
        raise ValueError(f"numbers, but got {show(value)}")
    try:
        number = float(value)
    except OverflowError:
        raise ValueError("finite numbers, but got an integer too large for a float") from None
    if not math.isfinite(number):
        raise ValueError(f"finite numbers, but got {show(value)}")
    return number


def corners(value: Any) -> list[float]:
    """A ``bbox`` of 8 corners as 24 floats (corner by corner), or ``ValueError``."""
    if not isinstance(value, list) or len(value) != 8:
        raise ValueError(f"{CORNERS_RULE}, but got {show(value)}")
    out: list[float] = []
    for k, corner in enumerate(value):
        if not isinstance(corner, list) or len(corner) != 3:
            raise ValueError(f"{CORNERS_RULE}, but corner {k} is {show(corner)}")
        try:
            out.extend(_number(v) for v in corner)
        except ValueError as exc:
            raise ValueError(f"{CORNERS_RULE}, but corner {k} holds {str(exc).split('but got ', 1)[-1]}") from None
    return out


def centre_size(value: Any) -> list[float]:
    """A ``box`` [cx, cy, cz, dx, dy, dz] as 6 floats (sizes not negative), or ``ValueError``."""
    if not isinstance(value, list) or len(value) != 6:
        raise ValueError(f"{BOX_RULE}, but got {show(value)}")
    try:
        numbers = [_number(v) for v in value]
    except ValueError as exc:
        raise ValueError(f"{BOX_RULE}, but got {str(exc).split('but got ', 1)[-1]}") from None
    negative = [n for n in numbers[3:] if n < 0]
    if negative:
        raise ValueError(f"{BOX_RULE} with sizes dx, dy, dz >= 0, but got a size of {negative[0]!r}")
    return numbers


def identifier(value: Any) -> str:
    """An ``object_id`` or ``ann_id``: a string or an integer, compared as text; or ``ValueError``."""
    if isinstance(value, str) and value:
        return value
    if type(value) is int:
        return str(value)
    raise ValueError(f"a string or an integer, but got {show(value)}")


def scene(value: Any) -> str:
    """A ``scene_id``: a non-empty string; or ``ValueError``."""
    if isinstance(value, str) and value:
        return value
    raise ValueError(f"a scene id (a non-empty string), but got {show(value)}")
