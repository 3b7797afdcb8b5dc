"""Small downloadable files of both prediction forms, built from a split's public manifest (the
format page's samples, ``Track.samples``): each names the split's first descriptions, so it passes
``validate`` there; its boxes are arbitrary (it scores near zero)."""

from __future__ import annotations

import json
from typing import Any

from evaluation_workers.plugin import Manifest, Sample

SAMPLE_ITEMS = 8  # descriptions in a sample


def _items(manifest: Manifest) -> list[dict[str, Any]]:
    return [{"scene_id": scene, "object_id": obj, "ann_id": ann}
            for scene, obj, ann in manifest["descriptions"][:SAMPLE_ITEMS]]


def _corners(cx: float, cy: float, cz: float, dx: float, dy: float, dz: float) -> list[list[float]]:
    return [[cx + sx * dx / 2, cy + sy * dy / 2, cz + sz * dz / 2]
            for sx in (-1, 1) for sy in (-1, 1) for sz in (-1, 1)]


def _bbox(manifest: Manifest) -> bytes:
    items = [{**item, "bbox": _corners(0.5 * i, 1.0, 0.5, 0.6, 0.4, 0.8)} for i, item in enumerate(_items(manifest))]
    return json.dumps(items, indent=1).encode()


def _box(manifest: Manifest) -> bytes:
    items = [{**item, "box": [0.5 * i, 1.0, 0.5, 0.6, 0.4, 0.8]} for i, item in enumerate(_items(manifest))]
    return json.dumps(items, indent=1).encode()


SAMPLES = {
    "bbox": Sample("sample_bbox.json", "JSON list of {scene_id, object_id, ann_id, bbox}: 8 corners per box "
                                       "(the benchmark's own form)", _bbox),
    "box": Sample("sample_box.json", "JSON list of {scene_id, object_id, ann_id, box}: centre and full sizes", _box),
}
