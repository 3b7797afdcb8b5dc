"""What a split's numbers are scored on (``disclosure``), as one line any page includes."""

from __future__ import annotations

from typing import Any

from django import template

from leaderboard.benchmarks.disclosure import SYNTHETIC_NOTE, counts_text

register = template.Library()


@register.inclusion_tag("benchmarks/_labels_note.html")
def labels_note(split: Any, short: bool = False) -> dict[str, Any]:
    """"synthetic labels · 600 questions in 67 scenes" (a badge) on a split with synthetic labels;
    "3,519 questions in 67 scenes" otherwise. ``short``: the badge and the counts only (cards)."""
    return {"split": split, "synthetic": bool(getattr(split, "labels_synthetic", False)),
            "counts": counts_text(split), "note": SYNTHETIC_NOTE, "short": short}
