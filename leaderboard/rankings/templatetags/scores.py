from typing import Any

from django import template

from evaluation_workers.tracks.base import FRACTION, MetricSpec
from leaderboard.rankings.numbers import as_fraction, number, percent

register = template.Library()

# Every number below follows one rule (rankings/numbers.py), by the metric's spec (``spec``:
# a ``MetricSpec``; absent, a fraction shown as a percentage with one decimal): a value that rounds
# to zero but is not zero is "<0.1" ("-<0.1" below zero); zero, or float noise around it, is "0.0",
# never "-0.0"; a difference also writes "+" before a positive value.


def _spec(spec: Any) -> MetricSpec:
    return spec if isinstance(spec, MetricSpec) else FRACTION


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
def num(value: Any, spec: Any = None) -> str:
    """A score as its metric's spec writes it (a percentage, or a value in its unit, with its decimals)."""
    return number(value, _spec(spec))


@register.filter
def signed_num(value: Any, spec: Any = None) -> str:
    """A difference as its metric's spec writes it, with its sign."""
    return number(value, _spec(spec), signed=True)


@register.filter
def get_item(mapping: Any, key: str) -> Any:
    return mapping.get(key) if hasattr(mapping, "get") else None


@register.simple_tag
def score(scores: Any, metric: str, group: str = "", spec: Any = None) -> str:
    """A flat score (``metric`` overall, or ``group/metric``) as its spec writes it."""
    key = f"{group}/{metric}" if group else metric
    return number(scores.get(key) if hasattr(scores, "get") else None, _spec(spec))


def _bounds(bounds: Any) -> tuple[float, float] | None:
    if not bounds or len(bounds) != 2:
        return None
    lo, hi = (as_fraction(b) for b in bounds)
    return None if lo is None or hi is None else (lo, hi)


@register.filter
def pm(bounds: Any, spec: Any = None) -> str:
    """An interval [lo, hi] as "±" half its width (in points for a fraction); "" where there is none."""
    found = _bounds(bounds)
    return "" if found is None else f"±{number((found[1] - found[0]) / 2, _spec(spec))}"


@register.filter
def span(bounds: Any, spec: Any = None) -> str:
    """An interval as "[lo, hi]" (a tooltip: the interval need not be symmetric)."""
    found = _bounds(bounds)
    spec = _spec(spec)
    return "" if found is None else f"95 % interval [{number(found[0], spec)}, {number(found[1], spec)}]"


@register.simple_tag
def interval(intervals: Any, metric: str, group: str = "", spec: Any = None) -> str:
    """The ± of a flat interval key (``metric``, or ``group/metric``)."""
    key = f"{group}/{metric}" if group else metric
    return pm(intervals.get(key) if hasattr(intervals, "get") else None, spec)


@register.simple_tag
def cell(values: Any, key: str, specs: Any = None) -> str:
    """``values[key]`` written by the spec of ``key`` in ``specs`` (metric -> ``MetricSpec``; absent: a fraction)."""
    value = values.get(key) if hasattr(values, "get") else None
    return number(value, _spec(specs.get(key) if hasattr(specs, "get") else None))


@register.simple_tag
def bounds_of(intervals: Any, key: str, specs: Any = None) -> str:
    """``lo–hi`` of the interval ``intervals[key]``, written by the spec of ``key``; "" where there is none."""
    found = _bounds(intervals.get(key) if hasattr(intervals, "get") else None)
    spec = _spec(specs.get(key) if hasattr(specs, "get") else None)
    return "" if found is None else f"{number(found[0], spec)}–{number(found[1], spec)}"
