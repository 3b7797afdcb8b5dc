"""Scores as pages and charts write them: a percentage with one decimal (METRICS.md).

One rule for values, differences and interval bounds alike:

- undefined (None, not a number): an em dash;
- zero, or closer to it than ``NOISE``: ``0.0``, never ``-0.0`` (two results of one file
  differ by float round-off, and a paired difference turned round is ``-0.0``);
- not zero, but rounding to 0.0: its bound, ``<0.1`` (PLA's mIoU of 0.03 %), with a minus
  in front when negative (``-<0.1``): the sign, then the magnitude, as for any number;
- otherwise the percentage rounded to one decimal.

A difference (``signed``) also writes ``+`` before a positive value (``+1.2``, ``+<0.1``),
so that its direction reads without colour; zero has no sign.
"""

from __future__ import annotations

from typing import Any

# Fractions closer to zero than this are float noise, not a score: a billionth of a point.
NOISE = 1e-9
DASH = "—"


def as_fraction(value: Any) -> float | None:
    """``value`` as a float, or None where it is undefined (None, "", text that is no number, NaN)."""
    if value is None or value == "" or isinstance(value, bool):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return None if number != number else number  # NaN


def percent(value: Any, *, signed: bool = False) -> str:
    """A fraction as a percentage with one decimal, by the module's rule."""
    number = as_fraction(value)
    if number is None:
        return DASH
    if abs(number) < NOISE:
        return "0.0"
    magnitude = f"{abs(number) * 100:.1f}"
    if magnitude == "0.0":
        magnitude = "<0.1"
    sign = "-" if number < 0 else ("+" if signed else "")
    return sign + magnitude


def cleaned(value: float | None) -> float | None:
    """``value`` with float noise around zero made zero (a difference's direction reads from it)."""
    return 0.0 if value is not None and abs(value) < NOISE else value
