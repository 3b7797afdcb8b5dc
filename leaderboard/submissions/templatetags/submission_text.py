"""Messages of submissions (validator errors, refusals) as pages show them.

A message is plain text whose only markup is `backticks` around a field or a
command, the same words ``lb`` prints. Pages escape it and show those as
<code>, as the format pages render their docs' Markdown: no raw backtick
reaches a reader, and nothing in a message can become HTML.
"""

from __future__ import annotations

import re

from django import template
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

from leaderboard.benchmarks.templatetags.text import inline_code

register = template.Library()


def shorten(text: str, limit: int) -> str:
    """``text`` cut to about ``limit`` characters at a word, with "…"; a code span cut open is closed."""
    if limit <= 0 or len(text) <= limit:
        return text
    cut = text[:limit].rsplit(" ", 1)[0] if " " in text[:limit] else text[:limit]
    cut = cut.rstrip(" ,;:")
    # An odd backtick opened a span the cut ended: close it so the rest still reads as text, not code.
    return cut + ("…`" if cut.count("`") % 2 else "…")


@register.filter
def message(text: str | None, limit: int = 0) -> SafeString:
    """``text`` escaped, its `backticked` words as <code>; at most ``limit`` characters when given."""
    return inline_code(shorten(text or "", int(limit or 0)))


@register.filter
def breakable(text: str | None) -> SafeString:
    """``text`` escaped, with a line break allowed after each ``_ . - /`` (long file and method names)."""
    return mark_safe(re.sub(r"([_.\-/])(?=.)", r"\1<wbr>", escape(text or "")))  # noqa: S308 -- escaped first
