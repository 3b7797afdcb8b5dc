from typing import Any

from django import template

from leaderboard.rankings.numbers import as_fraction, percent

register = template.Library()

# Every number below follows one rule (rankings/numbers.py): one decimal of a percentage;
# a value that rounds to 0.0 but is not zero is "<0.1" ("-<0.1" below zero); zero, or float
# noise around it, is "0.0", never "-0.0"; a difference also writes "+" before a positive value.


@register.filter
def pct(value: Any) -> str:
    """A fraction as a percentage with one decimal (``<0.1`` when it rounds to 0.0 but is not zero);
    an em dash where undefined."""
    return percent(value)


@register.filter
def signed_pct(value: Any) -> str:
    """A difference of fractions in percentage points: ``+1.2``, ``+<0.1``, ``0.0``, ``-<0.1``, ``-1.2``."""
    return percent(value, signed=True)


@register.filter
def get_item(mapping: Any, key: str) -> Any:
    return mapping.get(key) if hasattr(mapping, "get") else None


@register.simple_tag
def score(scores: Any, metric: str, group: str = "") -> str:
    """A flat score (``metric`` overall, or ``group/metric``) as a percentage."""
    key = f"{group}/{metric}" if group else metric
    return pct(scores.get(key) if hasattr(scores, "get") else None)


def _bounds(bounds: Any) -> tuple[float, float] | None:
    if not bounds or len(bounds) != 2:
        return None
    lo, hi = (as_fraction(b) for b in bounds)
    return None if lo is None or hi is None else (lo, hi)


@register.filter
def pm(bounds: Any) -> str:
    """An interval [lo, hi] as "±" half its width in percentage points; "" where there is none."""
    found = _bounds(bounds)
    return "" if found is None else f"±{percent((found[1] - found[0]) / 2)}"


@register.filter
def span(bounds: Any) -> str:
    """An interval as "[lo, hi]" in percent (a tooltip: the interval need not be symmetric)."""
    found = _bounds(bounds)
    return "" if found is None else f"95 % interval [{percent(found[0])}, {percent(found[1])}]"


@register.simple_tag
def interval(intervals: Any, metric: str, group: str = "") -> str:
    """The ± of a flat interval key (``metric``, or ``group/metric``)."""
    key = f"{group}/{metric}" if group else metric
    return pm(intervals.get(key) if hasattr(intervals, "get") else None)

