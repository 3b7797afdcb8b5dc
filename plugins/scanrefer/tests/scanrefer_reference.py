"""A slow, obvious re-statement of ScanRefer's ``benchmark/eval.py`` (daveredrum/ScanRefer), for the tests.

Plain Python floats and loops, one description at a time, as the script does
it: each box reduced to the min and max of its corners (``get_box3d_min_max``),
``box3d_iou`` of ``utils/box_util.py``, then accuracies through the script's
masks (unique_multiple x others, an empty cell giving 0). A ``box`` prediction
becomes corners as the script's ``get_3d_box`` builds them with heading 0.

Told our two rules where the script has none: the flags come from the labels
(the script reads them from the predictions), and, with ``missing_as_miss``,
a description without a prediction is appended with IoU 0 (the script leaves
it out). Python floats are IEEE doubles, so the numbers equal NumPy's float64.
"""

from __future__ import annotations

from typing import Any


def box_corners(box: list[float]) -> list[list[float]]:
    """The 8 corners of an axis-aligned box (cx, cy, cz, dx, dy, dz), as get_3d_box(size, 0, centre)."""
    cx, cy, cz, dx, dy, dz = box
    corners = []
    xs = [dx / 2, dx / 2, -dx / 2, -dx / 2, dx / 2, dx / 2, -dx / 2, -dx / 2]
    ys = [dy / 2, -dy / 2, -dy / 2, dy / 2, dy / 2, -dy / 2, -dy / 2, dy / 2]
    zs = [dz / 2, dz / 2, dz / 2, dz / 2, -dz / 2, -dz / 2, -dz / 2, -dz / 2]
    for x, y, z in zip(xs, ys, zs):
        corners.append([x + cx, y + cy, z + cz])
    return corners


def min_max(corners: list[list[float]]) -> tuple[float, float, float, float, float, float]:
    xs = [float(c[0]) for c in corners]
    ys = [float(c[1]) for c in corners]
    zs = [float(c[2]) for c in corners]
    return min(xs), max(xs), min(ys), max(ys), min(zs), max(zs)


def box3d_iou(corners1: list[list[float]], corners2: list[list[float]]) -> float:
    x_min_1, x_max_1, y_min_1, y_max_1, z_min_1, z_max_1 = min_max(corners1)
    x_min_2, x_max_2, y_min_2, y_max_2, z_min_2, z_max_2 = min_max(corners2)
    x_a = max(x_min_1, x_min_2)
    y_a = max(y_min_1, y_min_2)
    z_a = max(z_min_1, z_min_2)
    x_b = min(x_max_1, x_max_2)
    y_b = min(y_max_1, y_max_2)
    z_b = min(z_max_1, z_max_2)
    inter_vol = max(x_b - x_a, 0.0) * max(y_b - y_a, 0.0) * max(z_b - z_a, 0.0)
    box_vol_1 = (x_max_1 - x_min_1) * (y_max_1 - y_min_1) * (z_max_1 - z_min_1)
    box_vol_2 = (x_max_2 - x_min_2) * (y_max_2 - y_min_2) * (z_max_2 - z_min_2)
    return inter_vol / (box_vol_1 + box_vol_2 - inter_vol + 1e-8)


def evaluate(labels: list[dict[str, Any]], predictions: list[dict[str, Any]],
             missing_as_miss: bool = True) -> dict[str, Any]:
    """{"scores": {subset: {others_cell: {"acc@0.25iou", "acc@0.5iou"}}}, "stats": {subset: {cell: n}}},
    subset in unique / multiple / overall, cell in not_in_others / in_others / overall."""
    gt = {}
    for data in labels:
        gt[(str(data["scene_id"]), str(data["object_id"]), str(data["ann_id"]))] = data
    ious, masks, others = [], [], []
    seen = set()
    for data in predictions:
        key = (str(data["scene_id"]), str(data["object_id"]), str(data["ann_id"]))
        seen.add(key)
        pred_bbox = data["bbox"] if "bbox" in data else box_corners(data["box"])
        ious.append(box3d_iou(pred_bbox, gt[key]["bbox"]))
        masks.append(gt[key]["unique_multiple"])
        others.append(gt[key]["others"])
    if missing_as_miss:
        for key, data in gt.items():
            if key not in seen:
                ious.append(0.0)
                masks.append(data["unique_multiple"])
                others.append(data["others"])

    subsets = {"unique": [0], "multiple": [1], "overall": [0, 1]}
    cells = {"not_in_others": [0], "in_others": [1], "overall": [0, 1]}
    scores: dict[str, dict[str, dict[str, float]]] = {}
    stats: dict[str, dict[str, int]] = {}
    for subset, mask_values in subsets.items():
        scores[subset], stats[subset] = {}, {}
        for cell, other_values in cells.items():
            count = hits25 = hits50 = 0
            for iou, mask, other in zip(ious, masks, others):
                if mask in mask_values and other in other_values:
                    count += 1
                    hits25 += iou >= 0.25
                    hits50 += iou >= 0.5
            stats[subset][cell] = count
            scores[subset][cell] = {"acc@0.25iou": hits25 / count if count > 0 else 0,
                                    "acc@0.5iou": hits50 / count if count > 0 else 0}
    return {"scores": scores, "stats": stats, "ious": ious}
