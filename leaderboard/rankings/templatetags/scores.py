from typing import Any

from django import template

register = template.Library()


@register.filter
def pct(value: Any) -> str:
    """A fraction as a percentage with one decimal; an en dash where undefined."""
    if value is None or value == "":
        return "–"
    try:
        return f"{float(value) * 100:.1f}"
    except (TypeError, ValueError):
        return "–"


@register.filter
def get_item(mapping: Any, key: str) -> Any:
    return mapping.get(key) if hasattr(mapping, "get") else None
