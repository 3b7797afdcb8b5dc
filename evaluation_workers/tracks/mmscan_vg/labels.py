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
import orjson

from evaluation_workers.plugin import (
    LabelsError,
    PredictionFormatError,
    parsed_cache,
    read_maybe_gzip,
    sha256_tree,
    unlimited,
)

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
        scans: the file's scans (scenes), sorted: the bootstrap's resampling unit.
        scan_index: (S_all,) int64 each sample's scan, an index into ``scans``.
    """

    sample_ids: list[str]
    group: np.ndarray
    gt_count: np.ndarray
    gt_boxes: np.ndarray
    sub_class: np.ndarray | None = None
    scans: list[str] = field(default_factory=list)
    scan_index: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))

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


CACHE_FILE = Path(".cache") / "mmscan_vg_labels.npz"
# 2: the sub-classes (the drill-down) are kept too; a version-1 copy lacks them and is parsed again.
# 3: the scans (the bootstrap resamples them).
CACHE_VERSION = 3


def load_labels(path: Path) -> Labels:
    """The labels of a folder or file, parsed once per checksum (``parsed_cache``)."""
    file = labels_file(path)
    folder = file.parent
    own = folder / CACHE_FILE if Path(path).is_dir() else None
    arrays, _ = parsed_cache.cached(file, "mmscan-vg-labels", CACHE_VERSION, _stats(file), own,
                                    lambda: _to_arrays(parse_labels(file)))
    return _from_arrays(arrays)


def build_cache(folder: Path) -> None:
    """Write ``.cache/mmscan_vg_labels.npz`` inside a prepared labels folder."""
    file = labels_file(folder)
    parsed_cache.write(Path(folder) / CACHE_FILE, _to_arrays(parse_labels(file)), sha256_tree(file),
                       _stats(file), CACHE_VERSION)


def _stats(file: Path) -> list[list[Any]]:
    return parsed_cache.file_stats([file], file.parent)


def _to_arrays(labels: Labels) -> dict[str, np.ndarray]:
    arrays = {"sample_ids": np.array(labels.sample_ids, dtype=str), "group": labels.group,
              "gt_count": labels.gt_count, "gt_boxes": labels.gt_boxes,
              "scans": np.array(labels.scans, dtype=str), "scan_index": labels.scan_index}
    if labels.sub_class is not None:
        arrays["sub_class"] = labels.sub_class
    return arrays


def _from_arrays(arrays: dict[str, np.ndarray]) -> Labels:
    return Labels(sample_ids=arrays["sample_ids"].tolist(), group=arrays["group"], gt_count=arrays["gt_count"],
                  gt_boxes=arrays["gt_boxes"], sub_class=arrays.get("sub_class"),
                  scans=arrays["scans"].tolist(), scan_index=arrays["scan_index"])


def _loads(data: bytes) -> Any:
    """Trusted JSON (no depth scan): orjson, the standard parser for what it refuses (NaN) and its message."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return json.loads(data)


def parse_labels(file: Path) -> Labels:
    """Read and check the official labels file (``LabelsError`` on a bad file)."""
    try:
        raw = _loads(read_maybe_gzip(file, unlimited(file.name)))
    except (ValueError, OSError, EOFError) as exc:
        raise LabelsError(f"{file}: not valid JSON: {exc}") from exc
    except PredictionFormatError as exc:  # from the gzip reader: still the maintainer's file
        raise LabelsError(f"{file}: {exc.message}") from exc
    if not isinstance(raw, list):
        raise LabelsError(f"{file}: expected a JSON list of samples, but got {type(raw).__name__}")
    ids: list[str] = []
    scans: list[str] = []
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
        scan = item.get("scan_id")
        if not isinstance(scan, str) or not scan:
            raise LabelsError(f"{file}: sample {sid}: expected `scan_id` to be a scan id (the confidence "
                              f"intervals resample scans), but got {scan!r:.60}")
        ids.append(sid)
        scans.append(scan)
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
    # Sorted and numbered once per labels checksum (the parsed cache keeps them): sorting 200,000 ids
    # took 0.1 s of every scoring of the full test split.
    names, index = np.unique(np.asarray(scans, dtype=str), return_inverse=True)
    return Labels(sample_ids=ids, group=group, gt_count=counts, gt_boxes=gt_boxes, sub_class=sub_class,
                  scans=names.tolist(), scan_index=index.astype(np.int64).reshape(-1))
