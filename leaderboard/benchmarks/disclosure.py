"""What a split's numbers are scored on, as every page and answer that shows them says it.

METRICS.md ("A split's labels say what they are"): synthetic labels (a demo's) or a subset
standing in for the real split are disclosed as "synthetic labels" wherever their numbers
appear, with the counts of the labels loaded (units, scenes), never the real split's. The
facts are the split's (``Split.labels_*``, written by ``services.do_note_active_labels``
whenever labels are activated), so reading them costs no query. A split with real labels
shows its counts and never the word "synthetic" on a page.
"""

from __future__ import annotations

from typing import Any

from leaderboard.benchmarks.models import Split

SYNTHETIC_NOTE = ("Scored on synthetic labels (generated for a demonstration, or a subset standing in for the "
                  "real split), not the benchmark's real labels: these numbers say nothing about a method's "
                  "accuracy on the real split, and rows reported in papers (on the real split) are not ranked "
                  "with them.")


def _plural(n: int, word: str) -> str:
    return f"{n:,} {word}{'' if n == 1 else 's'}"


def counts_text(split: Split) -> str:
    """The loaded labels' counts in words: "600 questions in 67 scenes", "4 scenes" (where the unit
    is the scene); empty when no labels are loaded."""
    unit = split.benchmark.spec.unit or "item"
    units, scenes = split.labels_units, split.labels_scenes
    if units is None:
        return _plural(scenes, "scene") if scenes is not None else ""
    if unit == "scene" or scenes is None:
        return _plural(units, unit)
    return f"{_plural(units, unit)} in {_plural(scenes, 'scene')}"


def labels_json(split: Split) -> dict[str, Any]:
    """The API's and the JSON export's ``labels`` object: what the split's numbers are scored on."""
    return {"loaded": bool(split.labels_sha256), "synthetic": split.labels_synthetic,
            "unit": split.benchmark.spec.unit or "item", "units": split.labels_units,
            "scenes": split.labels_scenes, "checksum": split.labels_sha256 or None}


def labels_cell(split: Split) -> str:
    """The CSV's ``labels`` cell of a scored row: ``synthetic`` or ``real`` (what it was scored on)."""
    return "synthetic" if split.labels_synthetic else "real"
