"""Checks both prediction forms share: finite numbers, positive sizes, known ids, once each.

Values are checked in blocks of rows, so a memory-mapped (B, 9) float32 array
of the full test split is never widened or copied whole.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from evaluation_workers.plugin import PredictionFormatError, where

_ROWS = 1 << 20
_SHOWN_KEYS = 10


def check_values(
    boxes: np.ndarray, scores: np.ndarray, ends: np.ndarray, sample_of: Callable[[int], str], name: str
) -> None:
    """Refuse the first box that is not finite or has a size <= 0, and the first non-finite score.

    Args:
        boxes: (N, 9) float; scores: (N,) float.
        ends: (P,) int64 end row of each entry (cumulative box counts).
        sample_of: entry index -> sample id, for the message.
    """
    for start in range(0, int(boxes.shape[0]), _ROWS):
        block = np.asarray(boxes[start : start + _ROWS])
        block_scores = np.asarray(scores[start : start + _ROWS])
        bad = ~np.isfinite(block).all(axis=1)
        if bad.any():
            row = start + int(np.argmax(bad))
            raise PredictionFormatError(
                where(name, f"sample {_entry(row, ends, sample_of)}", "pred_bboxes",
                      f"Expected finite numbers, but got {_numbers(boxes[row])}"))
        bad = ~np.isfinite(block_scores)
        if bad.any():
            row = start + int(np.argmax(bad))
            raise PredictionFormatError(
                where(name, f"sample {_entry(row, ends, sample_of)}", "pred_scores",
                      f"Expected finite numbers, but got {_numbers(scores[row : row + 1])}"))
        small = (block[:, 3:6] <= 0).any(axis=1)
        if small.any():
            row = start + int(np.argmax(small))
            raise PredictionFormatError(
                where(name, f"sample {_entry(row, ends, sample_of)}", "pred_bboxes",
                      f"Expected sizes (items 4-6 of a box) > 0, but got {_numbers(boxes[row, 3:6])}"))


def check_ids(ids: Iterable[Any], known: dict[str, int], name: str, location: Callable[[int], str]) -> list[int]:
    """Label index of each submitted id, refusing non-strings, unknown ids and repeats."""
    order: list[int] = []
    seen: set[str] = set()
    for i, sid in enumerate(ids):
        if not isinstance(sid, str):
            raise PredictionFormatError(
                where(name, location(i), f"Expected `sample_id` to be a string, but got {short(sid)}"))
        index = known.get(sid)
        if index is None:
            raise PredictionFormatError(
                where(name, f"sample {clip(sid)}", "Expected a sample_id of the labels, but this one is unknown"))
        if sid in seen:
            raise PredictionFormatError(
                where(name, f"sample {clip(sid)}", "Expected each sample_id once, but it appears twice"))
        seen.add(sid)
        order.append(index)
    return order


def ignored_keys_warning(name: str, items: int, keys: set[str]) -> list[str]:
    """The one warning listing the unknown keys that were ignored (none: no warning)."""
    if not items:
        return []
    shown = sorted(clip(k, 40) for k in keys)
    text = ", ".join(shown[:_SHOWN_KEYS]) + (", ..." if len(shown) > _SHOWN_KEYS else "")
    return [f"{name}: ignored unknown keys in {items:,} items: {text}"]


def short(value: Any, limit: int = 80) -> str:
    """A submitted value as JSON, shortened for messages."""
    return clip(json.dumps(value, default=repr), limit)


def clip(text: str, limit: int = 80) -> str:
    """A submitted name (sample id, key), shortened for messages."""
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _entry(row: int, ends: np.ndarray, sample_of: Callable[[int], str]) -> str:
    return clip(sample_of(int(np.searchsorted(ends, row, side="right"))))


def _numbers(values: np.ndarray) -> str:
    return str(np.asarray(values, dtype=np.float64).tolist())
