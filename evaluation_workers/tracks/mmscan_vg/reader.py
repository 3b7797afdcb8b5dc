"""Which form a predictions file is in (by its first bytes, whatever its name), and one budget for it."""

from __future__ import annotations

from pathlib import Path

from evaluation_workers.plugin import Budget, inflated_budget
from evaluation_workers.tracks.mmscan_vg import binary_form, json_form
from evaluation_workers.tracks.mmscan_vg.labels import Predictions

TRACK_NAME = "mmscan-vg"
# The most a submission may inflate to (zip members, gzip), with room to spare:
# 209,717 prompts x 256 boxes as JSON text, about 16 GB.
MAX_INFLATED_BYTES = 24 * 2**30


def load_predictions(path: Path, known: dict[str, int], budget: Budget | None = None) -> Predictions:
    """Read and check a predictions file, JSON (optionally gzip) or binary ``.npz``.

    Args:
        path: the predictions file.
        known: sample id -> label index.
        budget: inflated bytes the submission may still produce; by default
            ``limits.inflated_budget("mmscan-vg", MAX_INFLATED_BYTES)``.

    Raises:
        PredictionFormatError: naming the file, the sample or array, and the rule.
    """
    path = Path(path)
    if budget is None:
        budget = Budget(inflated_budget(TRACK_NAME, MAX_INFLATED_BYTES), path.name)
    if binary_form.is_npz(path):
        return binary_form.load(path, known, budget)
    return json_form.load(path, known, budget)
