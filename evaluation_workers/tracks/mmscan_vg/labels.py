"""Labels of the MMScan visual-grounding track, and the facts every form shares.

Labels: a JSON list (optionally gzip-compressed) of
``{"sample_id", "scan_id", "text", "sub_class", "gt_bboxes": [[9 floats], ...]}``.
A box is ``[cx, cy, cz, sx, sy, sz, a, b, c]`` ('ZXY' Euler angles, radians).
Labels are trusted (a maintainer loads them), so they are read without budgets.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from evaluation_workers.errors import LabelsError, PredictionFormatError
from evaluation_workers.limits import read_maybe_gzip, unlimited

# Published models output 100-256 queries per prompt.
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
# The devkit's seven sub-classes, in the order above (the drill-down under the five groups).
SUB_CLASSES = tuple(SUB_CLASS_GROUP)


@dataclass(frozen=True)
class Labels:
    """Hidden labels, in label-file order.

    Attributes:
        sample_ids: (S_all,) every sample id of the file.
        group: (S_all,) int index into GROUPS of each sample.
        gt_count: (S_all,) ground-truth boxes per sample (0: not scored).
        gt_boxes: (M, 9) float64, grouped by sample in file order.
        sub_class: (S_all,) int index into SUB_CLASSES, or None (labels built
            without it: no per-sub-class results).
    """

    sample_ids: list[str]
    group: np.ndarray
    gt_count: np.ndarray
    gt_boxes: np.ndarray
    sub_class: np.ndarray | None = None

    @property
    def index(self) -> dict[str, int]:
        return {sid: i for i, sid in enumerate(self.sample_ids)}


@dataclass(frozen=True)
class Predictions:
    """Predictions as flat arrays, in file order (both forms give the same arrays).

    Attributes:
        sample: (N,) int64 label index of each box's sample.
        boxes: (N, 9) float32 or float64 (the binary form keeps the file's
            dtype, possibly memory-mapped; scoring widens blocks to float64).
        scores: (N,) float64.
        missing: label sample ids with no entry in the file.
        entries: how many samples the file has.
        warnings: notes for the result (ignored keys, ...).
    """

    sample: np.ndarray
    boxes: np.ndarray
    scores: np.ndarray
    missing: list[str]
    entries: int
    warnings: list[str] = field(default_factory=list)


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
        raw = json.loads(read_maybe_gzip(file, unlimited(file.name)))
    except (ValueError, OSError, EOFError) as exc:
        raise LabelsError(f"{file}: not valid JSON: {exc}") from exc
    except PredictionFormatError as exc:  # from the gzip reader: still the maintainer's file
        raise LabelsError(f"{file}: {exc.message}") from exc
    if not isinstance(raw, list):
        raise LabelsError(f"{file}: expected a JSON list of samples, but got {type(raw).__name__}")
    ids: list[str] = []
    group = np.zeros(len(raw), dtype=np.int64)
    sub_class = np.zeros(len(raw), dtype=np.int64)
    counts = np.zeros(len(raw), dtype=np.int64)
    boxes: list[Any] = []
    seen: set[str] = set()
    group_index = {g: i for i, g in enumerate(GROUPS)}
    for i, item in enumerate(raw):
        if not isinstance(item, dict) or not isinstance(item.get("sample_id"), str):
            raise LabelsError(f"{file}: item {i + 1}: expected an object with a string `sample_id`")
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
        sub_class[i] = SUB_CLASSES.index(sub)
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
    return Labels(sample_ids=ids, group=group, gt_count=counts, gt_boxes=gt_boxes, sub_class=sub_class)
