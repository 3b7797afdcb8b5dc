"""Synthetic ScanRefer labels and predictions: for the tests, the demo site and the sample.

Labels follow the real file's layout (corners in a shuffled order, ids as
strings, the two flags) with boxes of indoor sizes. Predictions are the target
box moved a little (usually right), a box elsewhere in the scene (wrong), or
one of the edge cases the metric must get exactly as the script does
(``EDGE_CASES``: boxes that only touch, have no volume, or whose exact IoU is
0.25 or 0.5, which the script's ``+ 1e-8`` puts just below the threshold).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

# The signs of the 8 corners of a box around its centre.
_SIGNS = np.array([[sx, sy, sz] for sx in (-1, 1) for sy in (-1, 1) for sz in (-1, 1)], dtype=np.float64)
EDGE_CASES = ("same", "touching", "flat", "half_height", "quarter_height", "point", "outside")


def corners_of(lo: np.ndarray, hi: np.ndarray, rng: np.random.Generator | None = None) -> list[list[float]]:
    """The 8 corners of the box [lo, hi], in a shuffled order when ``rng`` is given."""
    corners = np.where(_SIGNS > 0, hi[None, :], lo[None, :])
    if rng is not None:
        corners = corners[rng.permutation(8)]
    return corners.tolist()  # type: ignore[no-any-return]


def random_labels(seed: int, scenes: int = 25, objects: tuple[int, int] = (2, 6),
                  descriptions: tuple[int, int] = (1, 5), integer_boxes: bool = False) -> list[dict[str, Any]]:
    """Labels of ``scenes`` scenes, each with a few objects described 1-4 times.

    ``integer_boxes``: corners on a grid of whole numbers (IoUs hit 0.25 and 0.5 exactly more often).
    """
    rng = np.random.default_rng(seed)
    out = []
    for s in range(scenes):
        scene_id = f"scene{s:04d}_00"
        for o in rng.choice(60, size=int(rng.integers(*objects)), replace=False):
            if integer_boxes:
                lo = rng.integers(0, 6, size=3).astype(np.float64)
                hi = lo + rng.integers(1, 4, size=3)
            else:
                centre, size = rng.uniform(0, 6, 3), rng.uniform(0.1, 2.0, 3)
                lo, hi = centre - size / 2, centre + size / 2
            multiple, others = int(rng.random() < 0.7), int(rng.random() < 0.2)
            for a in range(int(rng.integers(*descriptions))):
                out.append({"scene_id": scene_id, "object_id": str(int(o)), "ann_id": str(a),
                            "bbox": corners_of(lo, hi, rng), "unique_multiple": multiple, "others": others,
                            "object_name": "chair", "description": "the chair next to the table."})
    return out


def edge_box(kind: str, lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A predicted box [lo', hi'] in a chosen relation to the target [lo, hi] (``EDGE_CASES``)."""
    size = hi - lo
    if kind == "same":
        return lo.copy(), hi.copy()
    if kind == "touching":  # shares the face x = hi[0]
        return np.array([hi[0], lo[1], lo[2]]), np.array([hi[0] + size[0], hi[1], hi[2]])
    if kind == "flat":  # no volume, inside the target
        return lo.copy(), np.array([hi[0], hi[1], lo[2]])
    if kind == "half_height":  # exact IoU 0.5 (the lower half of the target)
        return lo.copy(), np.array([hi[0], hi[1], lo[2] + size[2] / 2])
    if kind == "quarter_height":  # exact IoU 0.25
        return lo.copy(), np.array([hi[0], hi[1], lo[2] + size[2] / 4])
    if kind == "point":
        return lo.copy(), lo.copy()
    if kind == "outside":
        return lo + 100.0, hi + 100.0
    raise ValueError(f"Expected one of {EDGE_CASES}, but got {kind!r}")


def bounds_of(corners: list[list[float]]) -> tuple[np.ndarray, np.ndarray]:
    array = np.asarray(corners, dtype=np.float64)
    return array.min(axis=0), array.max(axis=0)


def random_predictions(labels: list[dict[str, Any]], seed: int, form: str = "bbox", right: float = 0.5,
                       drop: float = 0.0, edges: float = 0.1, extra_keys: bool = False,
                       jitter: float = 0.08) -> list[dict[str, Any]]:
    """One prediction per description (less the ``drop`` fraction, left out).

    ``form``: "bbox", "box" or "mixed". ``right``: the fraction moved only a little
    from the target; ``edges``: the fraction that are edge cases; the rest are
    boxes of the target's size somewhere else. ``extra_keys``: copy the flags in,
    as the script's ``predict.py`` does. ``jitter``: the spread of a right box's
    shift, as a fraction of the target's size.
    """
    rng = np.random.default_rng(seed)
    out = []
    for label in labels:
        if rng.random() < drop:
            continue
        lo, hi = bounds_of(label["bbox"])
        size = hi - lo
        pick = rng.random()
        if pick < edges:
            lo, hi = edge_box(EDGE_CASES[int(rng.integers(len(EDGE_CASES)))], lo, hi)
        elif pick < edges + right:
            shift = rng.normal(0, jitter, 3) * size
            lo, hi = lo + shift, hi + shift * rng.uniform(0.8, 1.2, 3)
        else:
            shift = rng.uniform(-3, 3, 3)
            lo, hi = lo + shift, hi + shift
        item: dict[str, Any] = {"scene_id": label["scene_id"], "object_id": label["object_id"],
                                "ann_id": label["ann_id"]}
        as_box = form == "box" or (form == "mixed" and rng.random() < 0.5)
        if as_box:
            item["box"] = [*((lo + hi) / 2).tolist(), *(hi - lo).tolist()]
        else:
            item["bbox"] = corners_of(lo, hi, rng)
        if extra_keys:
            item["unique_multiple"], item["others"] = label["unique_multiple"], label["others"]
        out.append(item)
    return out


def write_json(path: Path, data: Any) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))
    return path


def write_demo(dest: Path, split: str) -> tuple[Path, Path]:
    """Labels of 30 scenes (about 300 descriptions) and a predictions file of the script's form,
    right about 45 % of the time: enough scenes for an interval (``manage.py load_demo``)."""
    labels = random_labels(seed=20200823, scenes=30)
    predictions = random_predictions(labels, seed=20200824, right=0.5, drop=0.02, edges=0.05, extra_keys=True,
                                     jitter=0.25)
    return (write_json(Path(dest) / f"ScanRefer_synthetic_{split}.json", labels),
            write_json(Path(dest) / "predictions" / f"scanrefer_{split}_pred.json", predictions))
