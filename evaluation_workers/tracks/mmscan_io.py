"""Label and prediction files of the MMScan visual-grounding track (METRICS.md).

Labels: a JSON list (optionally gzip-compressed) of
``{"sample_id", "scan_id", "text", "sub_class", "gt_bboxes": [[9 floats], ...]}``.
Predictions: a JSON list of ``{"sample_id", "pred_bboxes", "pred_scores"}`` or
an object ``{"<sample_id>": {"pred_bboxes", "pred_scores"}}``, optionally
gzip-compressed (recognised by its first bytes, whatever the file name).

A box is ``[cx, cy, cz, sx, sy, sz, a, b, c]`` ('ZXY' Euler angles, radians).
Every number must be finite and every size positive. A prompt may carry at
most ``MAX_BOXES_PER_PROMPT`` boxes: published models output 100-256 queries.
"""

from __future__ import annotations

import gzip
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from evaluation_workers.errors import LabelsError, PredictionFormatError, where

MAX_BOXES_PER_PROMPT = 1000
BOX_ARITY = 9

# sub_class -> breakdown group (METRICS.md), groups in display order.
SUB_CLASS_GROUP = {
    "VG_Single_Attribute_Unique": "ST-attr",
    "VG_Single_Attribute_Common": "ST-attr",
    "VG_Single_EQ": "ST-attr",
    "VG_Single_Space": "ST-space",
    "VG_Inter_Attribute_OO": "OO-attr",
    "VG_Inter_Space_OO": "OO-space",
    "VG_Inter_OR": "OR",
}
GROUPS = ("ST-attr", "ST-space", "OO-attr", "OO-space", "OR")


@dataclass(frozen=True)
class Labels:
    """Hidden labels, in label-file order.

    Attributes:
        sample_ids: (S_all,) every sample id of the file.
        group: (S_all,) int index into GROUPS of each sample.
        gt_count: (S_all,) ground-truth boxes per sample (0: not scored).
        gt_boxes: (M, 9) float64, grouped by sample in file order.
    """

    sample_ids: list[str]
    group: np.ndarray
    gt_count: np.ndarray
    gt_boxes: np.ndarray

    @property
    def index(self) -> dict[str, int]:
        return {sid: i for i, sid in enumerate(self.sample_ids)}


@dataclass(frozen=True)
class Predictions:
    """Predictions as flat arrays, in file order.

    Attributes:
        sample: (N,) int label index of each box's sample.
        boxes: (N, 9) float64.
        scores: (N,) float64.
        missing: label sample ids with no entry in the file.
        entries: how many samples the file has.
    """

    sample: np.ndarray
    boxes: np.ndarray
    scores: np.ndarray
    missing: list[str]
    entries: int


def read_json(path: Path) -> Any:
    """Parse a JSON file, gunzipping it first when it starts with the gzip magic bytes.

    Raises ``_DuplicateKey`` (a ValueError) when an object repeats a key.
    """
    data = Path(path).read_bytes()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    parsed = json.loads(data)
    if isinstance(parsed, dict):
        # Only the object form can repeat a sample id; check it on a second,
        # slower parse (a duplicate-key hook slows the common list form by 30%).
        json.loads(data, object_pairs_hook=_no_duplicate_keys)
    return parsed


class _DuplicateKey(ValueError):
    pass


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _DuplicateKey(key)
            seen.add(key)
    return out


def labels_file(path: Path) -> Path:
    """The labels JSON: ``path`` itself, or the one .json/.json.gz file in a folder."""
    path = Path(path)
    if path.is_file():
        return path
    if not path.is_dir():
        raise LabelsError(f"Expected a labels file or folder, but {path} does not exist")
    found = [
        p
        for p in sorted(path.iterdir())
        if p.is_file() and p.name != "manifest.json" and p.name.endswith((".json", ".json.gz"))
    ]
    if len(found) != 1:
        raise LabelsError(f"Expected one labels .json file in {path}, but found {len(found)}")
    return found[0]


def load_labels(path: Path) -> Labels:
    """Read and check the official labels (``LabelsError`` on a bad file)."""
    file = labels_file(path)
    try:
        raw = read_json(file)
    except (ValueError, OSError) as exc:
        raise LabelsError(f"{file}: not valid JSON: {exc}") from exc
    if not isinstance(raw, list):
        raise LabelsError(f"{file}: expected a JSON list of samples, but got {type(raw).__name__}")
    ids: list[str] = []
    group = np.zeros(len(raw), dtype=np.int64)
    counts = np.zeros(len(raw), dtype=np.int64)
    boxes: list[Any] = []
    seen: set[str] = set()
    group_index = {g: i for i, g in enumerate(GROUPS)}
    for i, item in enumerate(raw):
        if not isinstance(item, dict) or not isinstance(item.get("sample_id"), str):
            raise LabelsError(f"{file}: item {i}: expected an object with a string `sample_id`")
        sid = item["sample_id"]
        if sid in seen:
            raise LabelsError(f"{file}: sample {sid}: duplicate sample_id")
        seen.add(sid)
        sub = item.get("sub_class")
        if sub not in SUB_CLASS_GROUP:
            raise LabelsError(f"{file}: sample {sid}: unknown sub_class {sub!r}")
        gt = item.get("gt_bboxes")
        if not isinstance(gt, list):
            raise LabelsError(f"{file}: sample {sid}: expected `gt_bboxes` to be a list")
        ids.append(sid)
        group[i] = group_index[SUB_CLASS_GROUP[sub]]
        counts[i] = len(gt)
        boxes.extend(gt)
    try:
        gt_boxes = np.asarray(boxes, dtype=np.float64).reshape(-1, BOX_ARITY)
    except (ValueError, TypeError) as exc:
        raise LabelsError(f"{file}: expected every box in `gt_bboxes` to be {BOX_ARITY} numbers") from exc
    if gt_boxes.shape[0] != len(boxes):
        raise LabelsError(f"{file}: expected every box in `gt_bboxes` to be {BOX_ARITY} numbers")
    bad = ~np.isfinite(gt_boxes).all(axis=1) | (gt_boxes[:, 3:6] <= 0).any(axis=1)
    if bad.any():
        row = int(np.argmax(bad))
        sample = int(np.searchsorted(np.cumsum(counts), row, side="right"))
        raise LabelsError(
            f"{file}: sample {ids[sample]}: a box in `gt_bboxes` is not finite "
            f"or has a size <= 0: {gt_boxes[row].tolist()}"
        )
    return Labels(sample_ids=ids, group=group, gt_count=counts, gt_boxes=gt_boxes)


def load_predictions(path: Path, known: dict[str, int]) -> Predictions:
    """Read and check a predictions file against the label sample ids.

    Args:
        path: the predictions file.
        known: sample id -> label index.

    Raises:
        PredictionFormatError: naming the file, the sample and the field.
    """
    name = Path(path).name
    try:
        raw = read_json(path)
    except _DuplicateKey as exc:
        raise PredictionFormatError(
            where(name, f"Expected each sample_id once, but {exc} appears twice")
        ) from None
    except (ValueError, OSError, EOFError) as exc:
        raise PredictionFormatError(
            where(name, f"Expected a JSON file (optionally gzip), but it does not parse: {exc}")
        ) from None
    if isinstance(raw, dict):
        entries = [(sid, value) for sid, value in raw.items()]
    elif isinstance(raw, list):
        entries = []
        for i, item in enumerate(raw):
            if not isinstance(item, dict):
                raise PredictionFormatError(
                    where(name, f"item {i}", f"Expected an object, but got {type(item).__name__}")
                )
            entries.append((item.get("sample_id"), item))
    else:
        raise PredictionFormatError(
            where(name, f"Expected a JSON list or object, but got {type(raw).__name__}")
        )

    order = np.zeros(len(entries), dtype=np.int64)
    counts = np.zeros(len(entries), dtype=np.int64)
    flat_boxes: list[Any] = []
    flat_scores: list[Any] = []
    seen: set[str] = set()
    for i, (sid, item) in enumerate(entries):
        if not isinstance(sid, str):
            raise PredictionFormatError(
                where(name, f"item {i}", f"Expected `sample_id` to be a string, but got {sid!r}")
            )
        if sid not in known:
            raise PredictionFormatError(
                where(name, f"sample {sid}", "Expected a sample_id of the labels, but this one is unknown")
            )
        if sid in seen:
            raise PredictionFormatError(
                where(name, f"sample {sid}", "Expected each sample_id once, but it appears twice")
            )
        seen.add(sid)
        if not isinstance(item, dict):
            raise PredictionFormatError(
                where(name, f"sample {sid}", f"Expected an object, but got {type(item).__name__}")
            )
        boxes, scores = item.get("pred_bboxes"), item.get("pred_scores")
        if not isinstance(boxes, list):
            raise PredictionFormatError(
                where(
                    name,
                    f"sample {sid}",
                    "pred_bboxes",
                    f"Expected a list of boxes, but got {type(boxes).__name__}",
                )
            )
        if not isinstance(scores, list):
            raise PredictionFormatError(
                where(
                    name,
                    f"sample {sid}",
                    "pred_scores",
                    f"Expected a list of numbers, but got {type(scores).__name__}",
                )
            )
        if len(boxes) != len(scores):
            raise PredictionFormatError(
                where(
                    name,
                    f"sample {sid}",
                    "Expected `pred_scores` to have one "
                    f"score per box, but got {len(scores)} scores for "
                    f"{len(boxes)} boxes",
                )
            )
        if len(boxes) > MAX_BOXES_PER_PROMPT:
            raise PredictionFormatError(
                where(
                    name,
                    f"sample {sid}",
                    "pred_bboxes",
                    f"Expected at most {MAX_BOXES_PER_PROMPT} boxes per prompt, but got {len(boxes)}",
                )
            )
        order[i] = known[sid]
        counts[i] = len(boxes)
        flat_boxes.extend(boxes)
        flat_scores.extend(scores)

    box_array = _numbers(flat_boxes, (len(flat_boxes), BOX_ARITY), entries, counts, name, "pred_bboxes")
    score_array = _numbers(flat_scores, (len(flat_scores),), entries, counts, name, "pred_scores")
    _check_finite(box_array, entries, counts, name, "pred_bboxes")
    _check_finite(score_array[:, None], entries, counts, name, "pred_scores")
    small = (box_array[:, 3:6] <= 0).any(axis=1)
    if small.any():
        row = int(np.argmax(small))
        sid = entries[_entry_of(row, counts)][0]
        raise PredictionFormatError(
            where(
                name,
                f"sample {sid}",
                "pred_bboxes",
                f"Expected sizes (items 4-6 of a box) > 0, but got {box_array[row, 3:6].tolist()}",
            )
        )
    missing = [sid for sid in known if sid not in seen]
    return Predictions(
        sample=np.repeat(order, counts),
        boxes=box_array,
        scores=score_array,
        missing=missing,
        entries=len(entries),
    )


def _numbers(
    flat: list[Any],
    shape: tuple[int, ...],
    entries: list[tuple[Any, Any]],
    counts: np.ndarray,
    name: str,
    field: str,
) -> np.ndarray:
    """``flat`` as a float64 array of ``shape``; on failure, name the first bad value."""
    try:
        array = np.asarray(flat, dtype=np.float64)
        if array.size == 0:
            return array.reshape(shape)
        if array.shape == shape:
            return array
    except (ValueError, TypeError):
        pass
    for row, value in enumerate(flat):
        sid = entries[_entry_of(row, counts)][0]
        if len(shape) == 2:
            if not isinstance(value, list) or len(value) != shape[1]:
                raise PredictionFormatError(
                    where(
                        name,
                        f"sample {sid}",
                        field,
                        f"Expected each box to be a list of {shape[1]} numbers, but got {_short(value)}",
                    )
                )
            items = value
        else:
            items = [value]
        for item in items:
            if isinstance(item, bool) or not isinstance(item, (int, float)):
                raise PredictionFormatError(
                    where(name, f"sample {sid}", field, f"Expected numbers, but got {_short(item)}")
                )
    raise PredictionFormatError(where(name, field, "Expected numbers"))  # unreachable in practice


def _check_finite(
    array: np.ndarray, entries: list[tuple[Any, Any]], counts: np.ndarray, name: str, field: str
) -> None:
    bad = ~np.isfinite(array).all(axis=1)
    if bad.any():
        row = int(np.argmax(bad))
        sid = entries[_entry_of(row, counts)][0]
        raise PredictionFormatError(
            where(name, f"sample {sid}", field, f"Expected finite numbers, but got {array[row].tolist()}")
        )


def _entry_of(row: int, counts: np.ndarray) -> int:
    return int(np.searchsorted(np.cumsum(counts), row, side="right"))


def _short(value: Any) -> str:
    text = json.dumps(value)
    return text if len(text) <= 80 else text[:77] + "..."
