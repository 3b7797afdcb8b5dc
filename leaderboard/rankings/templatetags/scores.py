from typing import Any

from django import template

register = template.Library()


@register.filter
def pct(value: Any) -> str:
    """A fraction as a percentage with one decimal; an em dash where undefined."""
    if value is None or value == "":
        return "—"
    try:
        return f"{float(value) * 100:.1f}"
    except (TypeError, ValueError):
        return "—"


@register.filter
def get_item(mapping: Any, key: str) -> Any:
    return mapping.get(key) if hasattr(mapping, "get") else None


@register.simple_tag
def score(scores: Any, metric: str, group: str = "") -> str:
    """A flat score (``metric`` overall, or ``group/metric``) as a percentage."""
    key = f"{group}/{metric}" if group else metric
    return pct(scores.get(key) if hasattr(scores, "get") else None)


@register.filter
def pm(bounds: Any) -> str:
    """An interval [lo, hi] as "±" half its width in percentage points; "" where there is none."""
    if not bounds or len(bounds) != 2 or None in bounds:
        return ""
    return f"±{(float(bounds[1]) - float(bounds[0])) * 50:.1f}"


@register.filter
def span(bounds: Any) -> str:
    """An interval as "[lo, hi]" in percent (a tooltip: the interval need not be symmetric)."""
    if not bounds or len(bounds) != 2 or None in bounds:
        return ""
    return f"95 % interval [{float(bounds[0]) * 100:.1f}, {float(bounds[1]) * 100:.1f}]"


@register.simple_tag
def interval(intervals: Any, metric: str, group: str = "") -> str:
    """The ± of a flat interval key (``metric``, or ``group/metric``)."""
    key = f"{group}/{metric}" if group else metric
    return pm(intervals.get(key) if hasattr(intervals, "get") else None)
