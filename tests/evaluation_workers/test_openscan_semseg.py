"""Semantic confusion, IoU and accuracy equal a per-vertex loop of ScanNet's formula."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from evaluation_workers.metrics.semseg import confusion, iou_and_accuracy


def reference(gt: np.ndarray, pred: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    tp, fp, fn = np.zeros(k + 1), np.zeros(k + 1), np.zeros(k + 1)
    for g, p in zip(gt.tolist(), pred.tolist()):
        if not 1 <= g <= k:
            continue
        if p == g:
            tp[g] += 1
        else:
            fn[g] += 1
            if 1 <= p <= k:
                fp[p] += 1
    with np.errstate(invalid="ignore", divide="ignore"):
        return (tp / (tp + fp + fn))[1:], (tp / (tp + fn))[1:]


@pytest.mark.parametrize("seed", range(10))
def test_it_equals_the_per_vertex_loop(xp: Any, seed: int) -> None:
    rng = np.random.default_rng(seed)
    k = int(rng.integers(1, 8))
    gt = rng.integers(-1, k + 2, size=500)
    pred = rng.integers(-2, k + 3, size=500)
    iou, acc = iou_and_accuracy(confusion(xp.asarray(gt), xp.asarray(pred), k))
    ref_iou, ref_acc = reference(gt, pred, k)
    np.testing.assert_allclose(np.asarray(iou), ref_iou, equal_nan=True, atol=1e-15)
    np.testing.assert_allclose(np.asarray(acc), ref_acc, equal_nan=True, atol=1e-15)


def test_it_scores_a_hand_worked_case(xp: Any) -> None:
    # class 1: 3 vertices, 2 right, 1 predicted 99 (a miss, nobody's false positive)
    # class 2: 1 vertex predicted 1 -> FP for 1, FN for 2; void vertex predicted 2 is ignored
    gt = xp.asarray([1, 1, 1, 2, 0])
    pred = xp.asarray([1, 1, 99, 1, 2])
    iou, acc = iou_and_accuracy(confusion(gt, pred, 2))
    assert np.asarray(iou).tolist() == [2 / 4, 0.0] and np.asarray(acc).tolist() == [2 / 3, 0.0]
