"""ScanRefer prediction files: one box per description, in a JSON list.

Each item is ``{"scene_id", "object_id", "ann_id", "bbox": [[x, y, z] x 8]}`` (the
benchmark's own ``pred.json``) or the same with ``"box": [cx, cy, cz, dx, dy, dz]``
instead of ``bbox``; the forms may be mixed. Other keys (``unique_multiple``,
``others``: the flags come from the labels) are ignored and listed once in the
warnings. Items count from 1 in messages. Limits: at most ``MAX_UPLOAD_BYTES``
(gzip allowed, inflating to at most ``MAX_INFLATED_BYTES``), UTF-8 (a BOM is
allowed), nested at most ``limits.MAX_JSON_DEPTH`` deep, and, given the split's
description count, at most ``limits.entry_cap`` items (counted before the file is
parsed whole).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from evaluation_workers.plugin import (
    Budget,
    PredictionFormatError,
    entries_past,
    entry_cap,
    inflated_budget,
    loads_json,
    read_maybe_gzip,
    where,
)
from scanrefer_track import values
from scanrefer_track.iou import centre_size_to_bounds, corners_to_bounds

Key = tuple[str, str, str]
# ~1.1 kB an item as the script writes it (json.dump, indent=4, 24 floats): about 11 MB for
# 10,000 descriptions (val has fewer); 64 MiB leaves room for longer numbers.
MAX_UPLOAD_BYTES = 64 * 2**20
MAX_INFLATED_BYTES = 256 * 2**20
KEYS = ("scene_id", "object_id", "ann_id")
BOX_KEYS = ("bbox", "box")
_SHOWN = 5
_KEYS_SHOWN = 10


@dataclass
class Submission:
    """What a predictions file holds, in file order.

    Attributes:
        form: "bbox", "box" or "mixed".
        keys: (K,) the description triples, as strings.
        pred_lo, pred_hi: (K, 3) float64 per-axis min and max of each predicted box.
        warnings: what was ignored.
    """

    form: str
    keys: list[Key]
    pred_lo: np.ndarray
    pred_hi: np.ndarray
    warnings: list[str] = field(default_factory=list)


def _text(path: Path, name: str) -> str:
    size = path.stat().st_size
    if size == 0:
        raise PredictionFormatError(f"{name}: Expected a JSON list of predictions, but got an empty file (0 bytes)")
    if size > MAX_UPLOAD_BYTES:
        raise PredictionFormatError(f"{name}: Expected at most {MAX_UPLOAD_BYTES // 2**20} MiB, "
                                    f"but got {size / 2**20:.1f} MiB")
    data = read_maybe_gzip(path, Budget(inflated_budget("scanrefer", MAX_INFLATED_BYTES), name))
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise PredictionFormatError(f"{name}: Expected UTF-8 text, but got the byte "
                                    f"0x{exc.object[exc.start]:02x} at offset {exc.start}") from None


def _items(text: str, name: str, descriptions: int | None) -> list[Any]:
    if descriptions is not None:
        past = entries_past(text, entry_cap(descriptions))
        if past is not None:
            raise PredictionFormatError(f"{name}: Expected at most {descriptions:,} predictions (one per description "
                                        f"of this split), but got more than {entry_cap(descriptions):,} {past}")
    try:
        data = loads_json(text, name)
    except json.JSONDecodeError as exc:
        raise PredictionFormatError(f"{name}: Expected valid JSON, but got a syntax error at line {exc.lineno}, "
                                    f"column {exc.colno}: {exc.msg}") from None
    if not isinstance(data, list):
        raise PredictionFormatError(f"{name}: Expected a JSON list of {{\"scene_id\", \"object_id\", \"ann_id\", "
                                    f"\"bbox\"}} objects, but got {values.show(data)}")
    items: list[Any] = data
    return items


def _read(location: str, name: str, read: Any, value: Any) -> Any:
    try:
        return read(value)
    except ValueError as exc:
        raise PredictionFormatError(f"{location}: Expected `{name}` to be {exc}") from None


def read_submission(path: Path, descriptions: int | None = None) -> Submission:
    """The boxes of a predictions file; ``PredictionFormatError`` naming item and field otherwise.

    ``descriptions``: the split's number of descriptions; a file with far more items is refused early.
    A triple given twice is refused here; one unknown to the split, by ``check_known``.
    """
    path = Path(path)
    name = path.name
    items = _items(_text(path, name), name, descriptions)
    keys: list[Key] = []
    corner_rows: list[list[float]] = []
    corner_at: list[int] = []
    box_rows: list[list[float]] = []
    box_at: list[int] = []
    first: dict[Key, int] = {}
    ignored: set[str] = set()
    with_ignored = 0
    for i, item in enumerate(items, 1):
        location = where(name, f"item {i}")
        if not isinstance(item, dict):
            raise PredictionFormatError(f"{location}: Expected an object {{\"scene_id\", \"object_id\", \"ann_id\", "
                                        f"\"bbox\"}}, but got {values.show(item)}")
        missing = [k for k in KEYS if k not in item]
        if missing:
            raise PredictionFormatError(f"{location}: Expected keys `scene_id`, `object_id`, `ann_id` and `bbox` "
                                        f"(or `box`), but `{missing[0]}` is missing")
        given = [k for k in BOX_KEYS if k in item]
        if len(given) != 1:
            raise PredictionFormatError(f"{location}: Expected either `bbox` (8 corners) or `box` "
                                        f"([cx, cy, cz, dx, dy, dz]), but got "
                                        f"{'both' if given else 'neither'}")
        key = (_read(location, "scene_id", values.scene, item["scene_id"]),
               _read(location, "object_id", values.identifier, item["object_id"]),
               _read(location, "ann_id", values.identifier, item["ann_id"]))
        if key in first:
            raise PredictionFormatError(f"{location}: Expected each description once, but "
                                        f"({', '.join(key)}) was already given at item {first[key]}")
        first[key] = i
        if given[0] == "bbox":
            corner_rows.append(_read(location, "bbox", values.corners, item["bbox"]))
            corner_at.append(len(keys))
        else:
            box_rows.append(_read(location, "box", values.centre_size, item["box"]))
            box_at.append(len(keys))
        keys.append(key)
        if len(item) > len(KEYS) + 1:
            ignored.update(k for k in item if k not in KEYS and k not in BOX_KEYS)
            with_ignored += 1
    pred_lo = np.zeros((len(keys), 3), dtype=np.float64)
    pred_hi = np.zeros((len(keys), 3), dtype=np.float64)
    if corner_rows:
        lo, hi = corners_to_bounds(np.asarray(corner_rows, dtype=np.float64).reshape(-1, 8, 3))
        pred_lo[corner_at], pred_hi[corner_at] = lo, hi
    if box_rows:
        lo, hi = centre_size_to_bounds(np.asarray(box_rows, dtype=np.float64))
        pred_lo[box_at], pred_hi[box_at] = lo, hi
    form = "mixed" if corner_rows and box_rows else ("box" if box_rows else "bbox")
    warnings = []
    if with_ignored:
        shown = sorted(k if len(k) <= 40 else k[:37] + "..." for k in ignored)
        listed = ", ".join(shown[:_KEYS_SHOWN]) + (", ..." if len(shown) > _KEYS_SHOWN else "")
        warnings.append(f"{name}: ignored keys in {with_ignored:,} items: {listed} (the unique/multiple and "
                        "others flags come from the labels)")
    return Submission(form=form, keys=keys, pred_lo=pred_lo, pred_hi=pred_hi, warnings=warnings)


def check_known(name: str, keys: list[Key], known: dict[Key, int] | set[Key]) -> None:
    """Refuse descriptions the split does not have, naming the first few."""
    unknown = [k for k in keys if k not in known]
    if unknown:
        shown = ", ".join(f"({', '.join(k)})" for k in unknown[:_SHOWN]) + (", ..." if len(unknown) > _SHOWN else "")
        raise PredictionFormatError(f"{name}: Expected descriptions (scene_id, object_id, ann_id) of this split only, "
                                    f"but got {len(unknown)} unknown: {shown}")
