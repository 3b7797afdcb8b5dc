"""Visual-grounding metrics of MMScan (METRICS.md): AP/AR per sample, gTop-k, AP_box/AR_box.

Layout shared by the kernels (N predictions, M ground-truth boxes, S samples,
G = the most ground-truth boxes of any sample):

- predictions are grouped by sample, samples in label-file order; within a
  sample they are sorted by score, descending, stable (``sort_predictions``).
- ``pred_sample`` (N,) sample of each prediction; ``pred_start`` (S,) index of
  each sample's first prediction; ``pred_count`` (S,) its number of predictions.
- ``gt_count`` (S,) ground-truth boxes per sample (>= 1: samples without any
  are dropped before scoring, as the devkit skips them).
- ``iou`` (N, G): IoU of each prediction with its sample's ground-truth boxes
  in label order; columns past the sample's count hold -1.

Matching (the devkit's, without fallback): each prediction takes its best
ground truth, the first on ties; it is a true positive at threshold t when that
IoU is >= t and no earlier prediction of the sample already took that box.
A later prediction on a taken box is a false positive even if its second-best
box is free. With this rule a box is taken by the first qualifying prediction
that picks it, whatever the order of the others, so true positives need no
sequential loop: they are the first occurrences of (sample, best box).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from evaluation_workers._xp import (
    argsort_descending,
    array_namespace,
    bincount,
    cummax_reverse,
    cumsum64,
    descending_key32,
    scatter_set,
)

__all__ = [
    "Ranking", "best_match", "pooled_order", "rank", "ranked_ap", "sample_metrics", "sort_predictions",
    "true_positives",
]


def sort_predictions(pred_sample: Any, pred_score: Any) -> Any:
    """Order predictions by sample, then by score descending; ties keep file order.

    When the file lists its samples in label order (``pred_sample`` non-
    decreasing, as every codebase writes it), a prediction's place within its
    sample (its slot) breaks ties. Float32 scores (the binary form's) then pack
    with the sample and the slot into one unique uint64 key, sorted at once by
    NumPy's unstable SIMD sort (21 M predictions: 3.8 s -> under 1 s); other
    scores go into a (samples, most predictions) matrix whose rows are sorted at
    once, when no sample has many more predictions than the average. Either way
    the order is that of two stable sorts of all N predictions.

    Args:
        pred_sample: (N,) int sample index of each prediction.
        pred_score: (N,) float scores (finite).

    Returns:
        order: (N,) int permutation.
    """
    xp = array_namespace(pred_sample, pred_score)
    n = pred_sample.shape[0]
    if n > 1 and bool(xp.all(pred_sample[1:] >= pred_sample[:-1])):
        n_samples = int(pred_sample[-1]) + 1
        counts = xp.astype(bincount(pred_sample, minlength=n_samples), xp.int64)
        width = int(xp.max(counts))
        start = xp.cumulative_sum(counts) - counts
        slot = xp.arange(n) - xp.take(start, pred_sample)
        slot_bits = max(1, (width - 1).bit_length())
        if (n_samples - 1).bit_length() + 32 + slot_bits <= 64:
            key = descending_key32(pred_score)
            if key is not None:
                key |= xp.astype(pred_sample, xp.uint64) << 32
                key <<= slot_bits
                key |= xp.astype(slot, xp.uint64)
                key = xp.sort(key, stable=False)  # unique (sample, slot): the unstable sort is exact
                order = xp.astype(key & ((1 << slot_bits) - 1), xp.int64)
                key >>= 32 + slot_bits
                return order + xp.take(start, xp.astype(key, xp.int64))
        if n_samples * width <= 2 * n + 1024:
            flat = pred_sample * width + slot
            scores = scatter_set(xp.full((n_samples * width,), -xp.inf, dtype=xp.float64), flat,
                                 xp.astype(pred_score, xp.float64))
            index = scatter_set(xp.full((n_samples * width,), n, dtype=xp.int64), flat, xp.arange(n, dtype=xp.int64))
            rows = xp.argsort(xp.reshape(scores, (n_samples, width)), axis=1, descending=True, stable=True)
            order = xp.reshape(xp.take_along_axis(xp.reshape(index, (n_samples, width)), rows, axis=1), (-1,))
            return order[order < n]  # padding sorts last in its row (scores are finite)
    by_score = xp.argsort(pred_score, descending=True, stable=True)
    by_sample = xp.argsort(xp.take(pred_sample, by_score), stable=True)
    return xp.take(by_score, by_sample)


def best_match(iou: Any) -> tuple[Any, Any]:
    """Best ground truth of each prediction, the first on ties.

    Args:
        iou: (N, G) float, -1 in padding columns.

    Returns:
        best_iou: (N,) float; best_col: (N,) int column of the best box.
    """
    xp = array_namespace(iou)
    if iou.shape[0] == 0:
        return xp.zeros((0,), dtype=iou.dtype), xp.zeros((0,), dtype=xp.int64)
    return xp.max(iou, axis=1), xp.argmax(iou, axis=1)


def true_positives(best_iou: Any, best_col: Any, pred_sample: Any, n_cols: int, threshold: float) -> Any:
    """Which predictions are true positives at ``threshold``.

    Args:
        best_iou, best_col, pred_sample: (N,) from ``best_match``; samples sorted, each sample's
            predictions in rank order.
        n_cols: G, the width of the IoU matrix.

    Returns:
        tp: (N,) bool; the first prediction of each sample whose best box is
        that box with IoU >= threshold.

    The hits are ranked by (sample, box) with a stable sort, which keeps their
    rank order within each pair: the first of each run is the true positive
    (14 times faster than running sums over an (N, G) matrix).
    """
    xp = array_namespace(best_iou, best_col)
    n = int(best_iou.shape[0])
    tp = xp.zeros((n,), dtype=xp.bool)
    if n == 0:
        return tp
    hit = xp.nonzero(best_iou >= threshold)[0]
    if int(hit.shape[0]) == 0:
        return tp
    key = xp.take(pred_sample, hit) * n_cols + xp.astype(xp.take(best_col, hit), xp.int64)
    order = xp.argsort(key, stable=True)
    ranked = xp.take(key, order)
    first = xp.concat([xp.ones((1,), dtype=xp.bool), ranked[1:] != ranked[:-1]])
    winners = xp.take(hit, order[first])
    return scatter_set(tp, winners, xp.ones(winners.shape, dtype=xp.bool))


def sample_metrics(
    tp: Any, pred_sample: Any, pred_start: Any, pred_count: Any, gt_count: Any, ks: tuple[int, ...]
) -> dict[str, Any]:
    """AP, AR and gTop-k of every sample at one threshold.

    Args:
        tp: (N,) bool from ``true_positives``.
        pred_sample: (N,) sorted sample index; pred_start, pred_count, gt_count: (S,).
        ks: the k of gTop-k.

    Returns:
        {"AP": (S,), "AR": (S,), "gTop-<k>": (S,)} float64. AP is the VOC
        all-point area: sum over true positives of the precision envelope
        (max precision at this rank or later in the sample) / gt_count.
        A sample without predictions scores 0 everywhere.
    """
    xp = array_namespace(tp, pred_sample, gt_count)
    n_samples = gt_count.shape[0]
    n_gt = xp.astype(gt_count, xp.float64)
    hits = cumsum64(tp)  # over all samples
    before = _exclusive_at(hits, pred_start, xp)
    found = hits - xp.take(before, pred_sample)  # H: distinct boxes found so far in the sample
    rank = xp.astype(xp.arange(tp.shape[0]) - xp.take(pred_start, pred_sample) + 1, xp.float64)
    precision = found / rank if tp.shape[0] else found
    envelope = _segment_cummax_reverse(precision, pred_sample, n_samples, xp, pred_start, pred_count)
    tp64 = xp.astype(tp, xp.float64)
    ap = bincount(pred_sample, minlength=n_samples, weights=tp64 * envelope) / n_gt
    ar = bincount(pred_sample, minlength=n_samples, weights=tp64) / n_gt
    out = {"AP": ap, "AR": ar}

    # gTop-k: box n (1-based) of a sample counts when H[min(n*k, P) - 1] >= n.
    # Sample of each box; searchsorted, not repeat: CuPy's repeat wants host counts.
    ends = xp.astype(cumsum64(gt_count), xp.int64)
    n_boxes = int(ends[-1]) if n_samples else 0
    gt_sample = xp.searchsorted(ends, xp.arange(n_boxes, dtype=xp.int64), side="right")
    first_gt = xp.take(cumsum64(gt_count) - n_gt, gt_sample)
    nth = xp.astype(xp.arange(gt_sample.shape[0]), xp.float64) - first_gt + 1  # n = 1..G_s
    count = xp.astype(xp.take(pred_count, gt_sample), xp.float64)
    start = xp.take(pred_start, gt_sample)
    has_pred = count > 0
    for k in ks:
        offset = xp.astype(xp.minimum(nth * k, count) - 1, xp.int64)
        where = xp.where(has_pred, start + offset, xp.zeros_like(start))
        value = xp.take(found, where) if found.shape[0] else xp.zeros_like(nth)
        ok = xp.astype(has_pred & (value >= nth), xp.float64)
        out[f"gTop-{k}"] = bincount(gt_sample, minlength=n_samples, weights=ok) / n_gt
    return out


def pooled_order(pred_score: Any) -> Any:
    """The ranking of a pooled set: score descending, ties in the given order (``rank``)."""
    return argsort_descending(pred_score)


@dataclass(frozen=True)
class Ranking:
    """Every prediction in the pooled order (``pooled_order``: score descending, ties in label order then
    rank, the devkit's), with its sample and its true-positive flags at each threshold.

    A stable sort of all predictions restricted to one set is that set's own
    stable sort, so every pooled set (the groups, the sub-classes, the
    bootstrap's outcomes) is its members in this order: one sort and one
    gather serve them all (``rank``), and a set's members are read off in
    order (``members``), without gathering along the ranking again.
    """

    sample: Any  # (N,) int64 sample of each ranked prediction
    tp: tuple[Any, ...]  # per threshold, (N,) bool
    score: Any = None  # (N,) float64 score of each ranked prediction, when asked for (``rank``)

    def members(self, set_of_sample: Any, n_sets: int) -> list[Any]:
        """Each set's positions in the ranking, ascending; ``set_of_sample`` (S,) is each sample's set
        (a value outside 0..n_sets-1: none)."""
        xp = array_namespace(self.sample)
        ranked_set = xp.take(set_of_sample, self.sample)
        return [xp.nonzero(ranked_set == s)[0] for s in range(n_sets)]


def rank(pred_score: Any, pred_sample: Any, tps: Sequence[Any], with_score: bool = False) -> Ranking:
    """The pooled ``Ranking`` of all predictions: ``tps`` (N,) bool true positives per threshold;
    ``with_score``: keep the ranked scores too (what another ranking is merged with by)."""
    xp = array_namespace(pred_score, pred_sample)
    order = pooled_order(pred_score)
    # The sample and the flags packed in one integer: one gather along the ranking, not one per array.
    packed = xp.astype(pred_sample, xp.int64) << len(tps)
    for i, tp in enumerate(tps):
        packed |= xp.astype(tp, xp.int64) << i
    packed = xp.take(packed, order)
    flags = tuple(((packed >> i) & 1) == 1 for i in range(len(tps)))
    packed >>= len(tps)
    return Ranking(sample=packed, tp=flags, score=xp.take(pred_score, order) if with_score else None)


def ranked_ap(hit: Any, n_gt: int) -> tuple[float, float]:
    """AP and final recall of one pooled set (the devkit's AP_C, AR_C) from its predictions' true-positive
    flags in ranked order (``Ranking``); ``n_gt`` its ground-truth boxes (of prompts with or without
    predictions). (0, 0) when it has no predictions."""
    xp = array_namespace(hit)
    if hit.shape[0] == 0 or n_gt == 0:
        return 0.0, 0.0
    found = cumsum64(hit)
    precision = found / xp.astype(xp.arange(1, hit.shape[0] + 1), xp.float64)
    envelope = cummax_reverse(precision)
    ap = float(xp.sum(xp.where(hit, envelope, xp.zeros_like(envelope)))) / n_gt
    return ap, float(found[-1]) / n_gt


def _exclusive_at(running: Any, start: Any, xp: Any) -> Any:
    """Value of an inclusive running sum just before each ``start`` (0 at start 0)."""
    if running.shape[0] == 0:
        return xp.zeros((start.shape[0], *running.shape[1:]), dtype=running.dtype)
    prev = xp.take(running, xp.maximum(start - 1, xp.zeros_like(start)), axis=0)
    first = start == 0
    if running.ndim == 2:
        first = first[:, None]
    return xp.where(first, xp.zeros_like(prev), prev)


def _segment_cummax_reverse(
    x: Any, segment: Any, n_segments: int, xp: Any, start: Any = None, count: Any = None
) -> Any:
    """Running max from the right within each segment, exactly.

    With the segments' ``start`` and ``count`` (S,), and no segment much
    longer than the average, the values go into a (segments, longest) matrix
    padded with -inf, whose rows take one running max at once. Otherwise
    values are replaced by their dense rank, and segment s is lifted by
    ``(n_segments - 1 - s) * n_ranks`` so a later segment never exceeds an
    earlier one; one cumulative max over the whole array then stays inside
    each segment. Integers below 2**53 keep it exact in float64.

    Args:
        x: (N,) float; segment: (N,) int, non-decreasing.

    Returns:
        (N,) float.
    """
    if x.shape[0] == 0:
        return x
    n = int(x.shape[0])
    if start is not None and count is not None:
        width = int(xp.max(count))
        if n_segments * width <= 2 * n + 1024:
            flat = segment * width + (xp.arange(n) - xp.take(start, segment))
            padded = scatter_set(xp.full((n_segments * width,), -xp.inf, dtype=x.dtype), flat, x)
            rows = cummax_reverse(xp.reshape(padded, (n_segments, width)))
            return xp.take(xp.reshape(rows, (-1,)), flat)
    order = xp.argsort(x, stable=True)
    ordered = xp.take(x, order)
    new = xp.concat([xp.ones((1,), dtype=xp.bool), ordered[1:] != ordered[:-1]])
    dense = cumsum64(new) - 1
    rank = xp.take(dense, xp.argsort(order))
    n_ranks = float(dense[-1]) + 1
    lift = xp.astype(n_segments - 1 - segment, xp.float64) * n_ranks
    top = cummax_reverse(rank + lift) - lift
    return xp.take(ordered[new], xp.astype(top, xp.int64))
