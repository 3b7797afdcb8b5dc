"""Plain text of track descriptions and of sizes, for templates."""

from __future__ import annotations

import re

from django import template
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

from evaluation_workers.tracks.base import size_text

register = template.Library()
_CODE = re.compile(r"`([^`\n]+)`")
# The end of the first sentence: a full stop, then a space and a capital (not "e.g. x", not "0.25").
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z])")


@register.filter
def inline_code(text: str) -> SafeString:
    """Escape ``text`` and show `backticked` words as <code> (the descriptions' only markup)."""
    return mark_safe(_CODE.sub(lambda m: f"<code>{m.group(1)}</code>", escape(text or "")))


@register.filter
def first_sentence(text: str) -> str:
    """The first sentence of ``text`` (the one-line task description)."""
    return _SENTENCE_END.split((text or "").strip(), maxsplit=1)[0]


@register.filter
def size(n: int | None) -> str:
    """A size in bytes as every page and refusal writes it: ``4,096 MiB``, ``29,612 bytes`` (never Django's
    ``filesizeformat``, whose "4.0 GB" is the same limit in another unit)."""
    return "—" if n is None else size_text(int(n))
