"""Labels of the ScanRefer track: one JSON list, one item per description.

``{"scene_id": str, "object_id": str|int, "ann_id": str|int, "bbox": [[x, y, z] x 8],
"unique_multiple": 0|1, "others": 0|1}``; other keys (``description``,
``object_name``, ``token``, ...) are ignored. A description is the triple
``(scene_id, object_id, ann_id)``, compared as strings. How maintainers build
the file from ScanRefer's release: format.md, "Labels".
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from evaluation_workers.plugin import DERIVED_NAMES, LabelsError, Manifest
from scanrefer_track import values
from scanrefer_track.iou import corners_to_bounds

Key = tuple[str, str, str]
FLAGS = ("unique_multiple", "others")


@dataclass(frozen=True)
class ScanReferLabels:
    """One split's descriptions, in the labels file's order.

    Attributes:
        keys: (N,) the (scene_id, object_id, ann_id) of each description, as strings.
        gt_lo, gt_hi: (N, 3) float64 the min and max of the target box's corners.
        multiple: (N,) bool ``unique_multiple`` (the target's class is not unique in its scene).
        others: (N,) bool ``others`` (the target's class is among ScanNet's "others").
    """

    keys: list[Key]
    gt_lo: np.ndarray
    gt_hi: np.ndarray
    multiple: np.ndarray
    others: np.ndarray

    @property
    def scene_ids(self) -> list[str]:
        return [k[0] for k in self.keys]


def labels_file(path: Path) -> Path:
    """The labels JSON: ``path`` itself, or the one ``.json`` in the folder ``prepare_labels`` wrote."""
    path = Path(path)
    if path.is_file():
        return path
    if not path.is_dir():
        raise LabelsError(f"Expected ScanRefer labels to be a JSON file or a folder holding one, but got {path}")
    found = [p for p in sorted(path.iterdir()) if p.suffix == ".json" and p.is_file() and p.name not in DERIVED_NAMES]
    if len(found) != 1:
        raise LabelsError(f"{path}: Expected exactly one labels .json file, but got {len(found)}: "
                          f"{[p.name for p in found]}")
    return found[0]


def _flag(path: Path, index: int, entry: dict[str, Any], name: str) -> bool:
    value = entry.get(name)
    if value in (0, 1) and type(value) in (int, bool):
        return bool(value)
    raise LabelsError(f"{path}: entry {index}: Expected `{name}` to be 0 or 1, but got {values.show(value)}")


def _field(path: Path, index: int, name: str, read: Any, value: Any) -> Any:
    try:
        return read(value)
    except ValueError as exc:
        raise LabelsError(f"{path}: entry {index}: Expected `{name}` to be {exc}") from None


def load_labels(source: Path) -> ScanReferLabels:
    """Read and check one split's labels; ``LabelsError`` on anything unusable (entries count from 0)."""
    path = labels_file(source)
    try:
        data = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError) as exc:
        raise LabelsError(f"{path}: cannot read JSON: {exc}") from exc
    if not isinstance(data, list) or not data:
        raise LabelsError(f"{path}: Expected a non-empty JSON list of descriptions, but got {values.show(data)}")
    keys: list[Key] = []
    rows: list[list[float]] = []
    flags: list[tuple[bool, bool]] = []
    seen: dict[Key, int] = {}
    for i, entry in enumerate(data):
        if not isinstance(entry, dict):
            raise LabelsError(f"{path}: entry {i}: Expected an object, but got {values.show(entry)}")
        key = (_field(path, i, "scene_id", values.scene, entry.get("scene_id")),
               _field(path, i, "object_id", values.identifier, entry.get("object_id")),
               _field(path, i, "ann_id", values.identifier, entry.get("ann_id")))
        if key in seen:
            raise LabelsError(f"{path}: entry {i}: description {key} is also entry {seen[key]}")
        seen[key] = i
        rows.append(_field(path, i, "bbox", values.corners, entry.get("bbox")))
        flags.append((_flag(path, i, entry, "unique_multiple"), _flag(path, i, entry, "others")))
        keys.append(key)
    gt_lo, gt_hi = corners_to_bounds(np.asarray(rows, dtype=np.float64).reshape(-1, 8, 3))
    flag_array = np.asarray(flags, dtype=bool).reshape(-1, 2)
    return ScanReferLabels(keys=keys, gt_lo=gt_lo, gt_hi=gt_hi, multiple=flag_array[:, 0], others=flag_array[:, 1])


def manifest_of(truth: ScanReferLabels) -> Manifest:
    """The public manifest of loaded labels: the description triples and the scenes, nothing else."""
    return {"track": "scanrefer", "descriptions": [list(k) for k in truth.keys], "count": len(truth.keys),
            "scenes": sorted(set(truth.scene_ids))}


def manifest(labels: Path) -> Manifest:
    """The public manifest of a labels file or folder (public ids only: never boxes or flags).

    ``scenes`` is what a public/private partition is drawn from (``evaluation_workers.partitions``).
    """
    return manifest_of(load_labels(labels))


def prepare_labels(source: Path, dest: Path) -> Manifest:
    """Copy the labels JSON (``source``: the file, or a folder holding one) into the folder ``dest``."""
    public = manifest(source)  # checks the file before anything is written
    path = labels_file(source)
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    # Another labels file left in dest would make the folder ambiguous.
    stale = [p.name for p in dest.iterdir() if p.suffix == ".json" and p.name != path.name
             and p.name not in DERIVED_NAMES]
    if stale:
        raise LabelsError(f"{dest}: Expected no other labels file, but got {stale}")
    shutil.copyfile(path, dest / path.name)
    return public
