"""CSV cells that a spreadsheet would not run (the exports, the participants' list)."""

from __future__ import annotations

from typing import Any

# A spreadsheet runs a cell starting with one of these as a formula (OWASP "CSV injection").
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def safe_cell(value: Any) -> Any:
    """Text that a spreadsheet would run, quoted with a leading apostrophe; numbers stay numbers."""
    if isinstance(value, str) and value.startswith(FORMULA_START):
        return "'" + value
    return value
