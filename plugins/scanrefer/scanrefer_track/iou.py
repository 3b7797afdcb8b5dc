"""Axis-aligned 3D IoU of paired boxes, as ScanRefer's benchmark script computes it.

The script (daveredrum/ScanRefer ``benchmark/eval.py``) calls ``box3d_iou`` of
``utils/box_util.py`` once per description: each box is reduced to the min and
max of its corners per axis, and

    inter = max(0, min(max1, max2) - max(min1, min2)) over x, then y, then z, multiplied
    iou = inter / (vol1 + vol2 - inter + 1e-8)

Here the same arithmetic runs on all N descriptions at once, in float64 and
in the same order of operations, so every IoU equals the script's bit for
bit. The ``1e-8`` makes two boxes whose exact IoU is 0.25 or 0.5 fall just
below that threshold, as they do in the script.
"""

from __future__ import annotations

from typing import Any

from evaluation_workers.plugin import array_namespace

# Added to the union by the script's box3d_iou; part of the metric's definition.
UNION_EPS = 1e-8


def corners_to_bounds(corners: Any) -> tuple[Any, Any]:
    """Boxes given as corners -> their per-axis min and max.

    Args:
        corners: (N, 8, 3) float64, any order of the corners (only min and max count).

    Returns:
        lo, hi: (N, 3) float64 each.
    """
    xp = array_namespace(corners)
    return xp.min(corners, axis=1), xp.max(corners, axis=1)


def centre_size_to_bounds(boxes: Any) -> tuple[Any, Any]:
    """Boxes given as (cx, cy, cz, dx, dy, dz), full sizes -> per-axis min and max.

    ``c - d/2`` and ``c + d/2``: the same numbers as the min and max of the
    corners ScanRefer's ``get_3d_box`` builds for heading 0 (``c + (-d/2)`` is ``c - d/2``
    exactly in floating point).

    Args:
        boxes: (N, 6) float64.

    Returns:
        lo, hi: (N, 3) float64 each.
    """
    half = boxes[:, 3:] / 2
    return boxes[:, :3] - half, boxes[:, :3] + half


def _volume(lo: Any, hi: Any) -> Any:
    size = hi - lo
    return size[:, 0] * size[:, 1] * size[:, 2]


def paired_iou(pred_lo: Any, pred_hi: Any, gt_lo: Any, gt_hi: Any) -> Any:
    """IoU of each predicted box with its own ground-truth box (not a pairwise matrix).

    Args:
        pred_lo, pred_hi: (N, 3) float64 per-axis min and max of the predictions.
        gt_lo, gt_hi: (N, 3) float64 the same of the ground truth, row for row.

    Returns:
        iou: (N,) float64; boxes that only touch, or have no volume, give 0.
    """
    xp = array_namespace(pred_lo, pred_hi, gt_lo, gt_hi)
    overlap = xp.minimum(pred_hi, gt_hi) - xp.maximum(pred_lo, gt_lo)
    overlap = xp.maximum(overlap, xp.zeros_like(overlap))
    inter = overlap[:, 0] * overlap[:, 1] * overlap[:, 2]
    # Left to right as the script writes it: ((vol1 + vol2) - inter) + eps.
    return inter / (_volume(pred_lo, pred_hi) + _volume(gt_lo, gt_hi) - inter + UNION_EPS)
