"""Semantic segmentation confusion, IoU and accuracy (ScanNet's formula).

K classes with ids 1..K. Vertices whose ground truth is not a valid class are
skipped; a prediction outside 1..K is a miss for the true class and nobody's
false positive.
"""

from __future__ import annotations

from typing import Any

from evaluation_workers._xp import array_namespace, bincount


def confusion(gt: Any, pred: Any, n_classes: int) -> Any:
    """Confusion of ground truth against prediction, from one bincount.

    Args:
        gt: (V,) int, true class per vertex (anything outside 1..K is ignored).
        pred: (V,) int, predicted class per vertex (outside 1..K: unknown).
        n_classes: K.

    Returns:
        (K, K + 1) int64: row k-1 is true class k; column 0 counts unknown
        predictions, column c >= 1 predicted class c.
    """
    xp = array_namespace(gt, pred)
    gt = xp.astype(gt, xp.int64)
    pred = xp.astype(pred, xp.int64)
    scored = (gt >= 1) & (gt <= n_classes)
    gt, pred = gt[scored], pred[scored]
    pred = xp.where((pred >= 1) & (pred <= n_classes), pred, 0)
    counts = bincount((gt - 1) * (n_classes + 1) + pred, minlength=n_classes * (n_classes + 1))
    return xp.reshape(xp.astype(counts, xp.int64), (n_classes, n_classes + 1))


def iou_and_accuracy(conf: Any) -> tuple[Any, Any]:
    """Per-class IoU = TP/(TP+FP+FN) and accuracy = TP/(TP+FN).

    Args:
        conf: (K, K + 1) int64 from ``confusion`` (may be summed over scenes).

    Returns:
        iou, acc: (K,) float64 each, NaN where the denominator is 0.
    """
    xp = array_namespace(conf)
    n_classes = conf.shape[0]
    known = conf[:, 1:]
    tp = xp.astype(xp.linalg.diagonal(known), xp.float64)
    fn = xp.astype(xp.sum(conf, axis=1), xp.float64) - tp
    fp = xp.astype(xp.sum(known, axis=0), xp.float64) - tp
    union = tp + fp + fn
    positives = tp + fn
    iou = xp.where(union > 0, tp / xp.where(union > 0, union, 1.0), xp.nan)
    acc = xp.where(positives > 0, tp / xp.where(positives > 0, positives, 1.0), xp.nan)
    assert iou.shape == (n_classes,)
    return iou, acc
