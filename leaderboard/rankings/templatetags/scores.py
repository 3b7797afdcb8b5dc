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
