"""ScanNet instance-segmentation AP, vectorized (METRICS.md, OpenScan section).

Dimension letters: N predicted masks (all scenes of one aspect, file order
within a scene), M ground-truth instances (all scenes, ascending instance id
within a scene), W columns of an intersection row (void + the most instances
any scene has), T IoU thresholds, K classes (attribute ids 1..K).

The official evaluator walks scene -> class -> instance -> prediction in
Python; here a scene's intersections come from one ``bincount``, matching runs
on all (threshold, instance, prediction) candidate pairs at once, and PR curves
come from sorts and cumulative sums. The only loop is the fixed-point
iteration of the greedy matching (see ``_greedy_owner``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from evaluation_workers._xp import array_namespace, bincount, cumsum64, scatter_set

# Exactly the official ``np.append(np.arange(0.5, 0.95, 0.05), 0.25)`` values
# (0.6000000000000001, ...), not linspace: a match needs IoU strictly greater
# than the threshold, and the official floats are the contract.
IOU_THRESHOLDS: tuple[float, ...] = tuple(float(t) for t in np.append(np.arange(0.5, 0.95, 0.05), 0.25))
AP_SLICE = slice(0, 9)  # the nine thresholds 0.50 ... 0.90 averaged into AP
AP50_INDEX = 0
AP25_INDEX = 9
MIN_REGION_SIZE = 100  # vertices; smaller predictions are dropped, smaller instances ignorable


def intersection_counts(vertex: Any, mask: Any, gt_local: Any, n_masks: int, width: int) -> Any:
    """Vertex counts of every mask against every instance of its scene, from one bincount.

    Args:
        vertex: (E,) int, global vertex index of each (vertex, mask) membership.
        mask: (E,) int, mask index (0..n_masks-1) of the same membership.
        gt_local: (V_total,) int, per vertex: 0 void, j >= 1 the scene's j-th instance.
        n_masks: N.
        width: W, larger than every ``gt_local`` value.

    Returns:
        (N, W) int64: column 0 vertices on void, column j overlap with instance j.
        Row sums are the mask sizes.
    """
    xp = array_namespace(vertex, mask, gt_local)
    # copy=False: the memberships are int64 already (a copy of each was 2 x 1.8 MB a scene and aspect)
    gt = xp.astype(xp.take(gt_local, xp.astype(vertex, xp.int64, copy=False)), xp.int64, copy=False)
    key = xp.astype(mask, xp.int64, copy=False) * width + gt
    counts = bincount(key, minlength=n_masks * width)
    return xp.reshape(xp.astype(counts, xp.int64, copy=False), (n_masks, width))


def instance_ap(
    inter: Any,
    pred_class: Any,
    pred_score: Any,
    pred_gt_base: Any,
    gt_class: Any,
    gt_size: Any,
    n_classes: int,
    thresholds: tuple[float, ...] = IOU_THRESHOLDS,
) -> Any:
    """Per-class, per-threshold AP of ScanNet's instance evaluator.

    Args:
        inter: (N, W) int64 from ``intersection_counts``; row n's column j >= 1 is
            the overlap with global instance ``pred_gt_base[n] + j - 1``.
        pred_class: (N,) int, attribute id 1..K.
        pred_score: (N,) float confidence.
        pred_gt_base: (N,) int, global index of the first instance of the mask's scene.
        gt_class: (M,) int, attribute id 1..K of each instance.
        gt_size: (M,) int, vertex count of each instance.
        n_classes: K.
        thresholds: (T,) IoU thresholds.

    Returns:
        (T, K) float64 AP; NaN for a class without an instance of >= 100 vertices,
        0 for a class with instances but no true positive.
    """
    xp = array_namespace(inter, pred_class, pred_score, gt_class, gt_size)
    group, is_true, score, _ = matching_entries(
        inter, pred_class, pred_score, pred_gt_base, gt_class, gt_size, n_classes, thresholds)
    n_pos = positives(gt_class, gt_size, n_classes, len(thresholds))
    ap = average_precision_distinct(group, is_true, score, n_pos)
    return xp.reshape(ap, (len(thresholds), n_classes))


def positives(gt_class: Any, gt_size: Any, n_classes: int, n_thresholds: int) -> Any:
    """(T * K,) int: valid instances (>= 100 vertices) of each class, repeated per threshold."""
    xp = array_namespace(gt_class, gt_size)
    gt_class = xp.astype(gt_class, xp.int64)
    valid_gt = xp.astype(gt_size, xp.int64) >= MIN_REGION_SIZE
    n_pos = bincount(gt_class[valid_gt] - 1, minlength=n_classes)
    return xp.reshape(xp.broadcast_to(xp.astype(n_pos[None, :], xp.int64), (n_thresholds, n_classes)), (-1,))


def matching_entries(
    inter: Any,
    pred_class: Any,
    pred_score: Any,
    pred_gt_base: Any,
    gt_class: Any,
    gt_size: Any,
    n_classes: int,
    thresholds: tuple[float, ...] = IOU_THRESHOLDS,
) -> tuple[Any, Any, Any, Any]:
    """The outcome of ScanNet's matching: the entries of every PR curve.

    Arguments as ``instance_ap``. Matching never crosses scenes, so each entry
    belongs to the scene of its prediction (the bootstrap resamples scenes with
    these entries fixed).

    Returns:
        group (E,) int: threshold * K + class - 1; is_true (E,) bool;
        score (E,) float64; pred (E,) int: the entry's row in ``inter``.
    """
    xp = array_namespace(inter, pred_class, pred_score, gt_class, gt_size)
    n_thr = len(thresholds)
    thr = xp.asarray(thresholds, dtype=xp.float64)
    n_gt = gt_class.shape[0]

    size_all = xp.sum(inter, axis=1)
    keep = size_all >= MIN_REGION_SIZE
    kept_rows = xp.nonzero(keep)[0]
    inter = xp.take(inter, kept_rows, axis=0)
    psize = size_all[keep]
    pclass = xp.astype(pred_class[keep], xp.int64)
    pscore = xp.astype(pred_score[keep], xp.float64)
    pbase = xp.astype(pred_gt_base[keep], xp.int64)
    n_pred = psize.shape[0]
    gt_class = xp.astype(gt_class, xp.int64)
    gt_size = xp.astype(gt_size, xp.int64)

    # (prediction, instance) pairs that overlap and share the class
    p_idx, col = xp.nonzero(inter[:, 1:] > 0)
    g_idx = xp.take(pbase, p_idx) + col
    pair_inter = xp.reshape(inter[:, 1:], (-1,))
    pair_inter = xp.take(pair_inter, p_idx * (inter.shape[1] - 1) + col)
    same = xp.take(gt_class, g_idx) == xp.take(pclass, p_idx)
    p_idx, g_idx, pair_inter = p_idx[same], g_idx[same], pair_inter[same]
    g_sz = xp.take(gt_size, g_idx)
    p_sz = xp.take(psize, p_idx)
    iou = xp.astype(pair_inter, xp.float64) / xp.astype(g_sz + p_sz - pair_inter, xp.float64)
    valid = g_sz >= MIN_REGION_SIZE
    hit = iou[:, None] > thr[None, :]  # (E, T)

    # Step 1: greedy matching on valid instances, per (threshold, instance)
    e_c, t_c = xp.nonzero(hit & valid[:, None])
    key_g = t_c * n_gt + xp.take(g_idx, e_c)
    key_p = t_c * n_pred + xp.take(p_idx, e_c)
    order = xp.argsort(key_g * max(n_pred, 1) + xp.take(p_idx, e_c), stable=True)
    key_g, key_p, e_c, t_c = (xp.take(a, order) for a in (key_g, key_p, e_c, t_c))
    owner = _greedy_owner(xp, key_g, key_p, n_thr * n_pred, n_thr * n_gt)

    # matches and duplicates: one true positive per matched instance with the
    # highest score among them, the others false positives with their scores
    own = xp.take(owner, key_p)
    grp = own >= key_g
    m_key_g, m_e, m_t = key_g[grp], e_c[grp], t_c[grp]
    m_score = xp.take(pscore, xp.take(p_idx, m_e))
    by_score = xp.argsort(m_score, descending=True, stable=True)
    m_key_g, m_score, m_e, m_t = (xp.take(a, by_score) for a in (m_key_g, m_score, m_e, m_t))
    by_gt = xp.argsort(m_key_g, stable=True)
    m_key_g, m_score, m_e, m_t = (xp.take(a, by_gt) for a in (m_key_g, m_score, m_e, m_t))
    m_true = _first_of_runs(xp, m_key_g)
    m_class = xp.take(gt_class, xp.take(g_idx, m_e))

    # Step 2: predictions with no instance of their class above the threshold
    # are false positives unless mostly on void / small instances of their class
    e_all, t_all = xp.nonzero(hit)
    found = scatter_set(
        xp.zeros(n_thr * n_pred, dtype=xp.bool),
        t_all * n_pred + xp.take(p_idx, e_all),
        xp.ones(e_all.shape[0], dtype=xp.bool),
    )
    small = ~valid
    ignore = xp.astype(inter[:, 0], xp.float64) + xp.astype(
        bincount(p_idx[small], minlength=n_pred, weights=xp.astype(pair_inter[small], xp.float64)), xp.float64
    )
    proportion = ignore / xp.astype(xp.where(psize > 0, psize, 1), xp.float64)
    fp = ~xp.reshape(found, (n_thr, n_pred)) & (proportion[None, :] <= thr[:, None])
    f_t, f_p = xp.nonzero(fp)

    group = xp.concat([m_t * n_classes + (m_class - 1), f_t * n_classes + (xp.take(pclass, f_p) - 1)])
    is_true = xp.concat([m_true, xp.zeros(f_p.shape[0], dtype=xp.bool)])
    score = xp.concat([m_score, xp.take(pscore, f_p)])
    pred = xp.take(kept_rows, xp.concat([xp.take(p_idx, m_e), f_p]))
    return group, is_true, score, pred


def _first_of_runs(xp: Any, key: Any) -> Any:
    """(E,) bool: True where ``key`` (sorted) starts a new run."""
    if key.shape[0] == 0:
        return xp.zeros(0, dtype=xp.bool)
    return xp.concat([xp.ones(1, dtype=xp.bool), key[1:] != key[:-1]])


def _greedy_owner(xp: Any, key_g: Any, key_p: Any, n_keys_p: int, big: int) -> Any:
    """Which instance each prediction is matched to, in ScanNet's greedy order.

    Candidates are (instance, prediction) pairs above the threshold, sorted by
    instance then file order. Instance g takes its first candidate not taken
    by an earlier instance. Iterating "each instance takes its first candidate
    not owned by an earlier one" from an empty assignment fixes the k-th
    instance by round k, and a round that changes nothing is the greedy result;
    with IoU > 0.5 a prediction has one candidate instance, so one or two
    rounds suffice, and at 0.25 chains of conflicts are short.

    Returns:
        (n_keys_p,) int64: owning ``key_g`` per ``key_p``, ``big`` where unmatched.
    """
    owner = xp.full(n_keys_p, big, dtype=xp.int64)
    while True:
        free = xp.take(owner, key_p) >= key_g
        c_g, c_p = key_g[free], key_p[free]
        first = _first_of_runs(xp, c_g)
        c_g, c_p = c_g[first], c_p[first]
        order = xp.argsort(c_p * (big + 1) + c_g, stable=True)
        c_g, c_p = xp.take(c_g, order), xp.take(c_p, order)
        first_p = _first_of_runs(xp, c_p)
        new = scatter_set(xp.full(n_keys_p, big, dtype=xp.int64), c_p[first_p], c_g[first_p])
        if bool(xp.all(new == owner)):
            return owner
        owner = new


def average_precision_distinct(group: Any, is_true: Any, score: Any, n_pos: Any) -> Any:
    """ScanNet's AP per group: PR points at distinct scores, no envelope.

    At each distinct score s (all entries with score >= s counted) take
    precision p and recall r = TP / n_pos; add the point (p=1, r=0) above the
    highest score; AP = sum_i p_i (r_{i-1} - r_{i+1}) / 2 over points in
    ascending score, with r_{-1} = r_0 and r_{U+1} = 0. Entries of equal score
    form one point, so their order does not matter.

    Args:
        group: (E,) int, group of each entry (class x threshold), 0..G-1.
        is_true: (E,) bool, true positive or false positive.
        score: (E,) float64.
        n_pos: (G,) int, positives (valid instances) per group.

    Returns:
        (G,) float64; NaN where ``n_pos`` is 0, 0 where a group has no entries.
    """
    xp = array_namespace(group, is_true, score, n_pos)
    n_groups = n_pos.shape[0]
    group = xp.astype(group, xp.int64)
    order = xp.argsort(score, descending=True, stable=True)
    group, is_true, score = xp.take(group, order), xp.take(is_true, order), xp.take(score, order)
    order = xp.argsort(group, stable=True)
    group, is_true, score = xp.take(group, order), xp.take(is_true, order), xp.take(score, order)

    n = group.shape[0]
    counts = bincount(group, minlength=n_groups)
    start = cumsum64(counts) - xp.astype(counts, xp.float64)  # exclusive prefix, per group
    cum_true = cumsum64(is_true)
    before = xp.concat([xp.zeros(1, dtype=xp.float64), cum_true])  # trues before index e
    position = xp.astype(xp.arange(n), xp.float64)
    g_start = xp.take(start, group)
    tp = cum_true - xp.take(before, xp.astype(g_start, xp.int64))
    seen = position - g_start + 1.0

    if n:
        last = xp.concat([(group[1:] != group[:-1]) | (score[1:] != score[:-1]), xp.ones(1, dtype=xp.bool)])
    else:
        last = xp.zeros(0, dtype=xp.bool)
    pg, tp, seen = group[last], tp[last], seen[last]
    pos = xp.astype(xp.take(n_pos, pg), xp.float64)
    recall = tp / xp.where(pos > 0, pos, 1.0)
    precision = tp / seen
    m = pg.shape[0]
    if m:
        first = xp.concat([xp.ones(1, dtype=xp.bool), pg[1:] != pg[:-1]])
        final = xp.concat([pg[1:] != pg[:-1], xp.ones(1, dtype=xp.bool)])
        r_prev = xp.concat([xp.zeros(1, dtype=xp.float64), recall[:-1]])
        r_next = xp.concat([recall[1:], xp.zeros(1, dtype=xp.float64)])
        higher = xp.where(first, 0.0, r_prev)  # the point of the next higher score
        lower = xp.where(final, recall, r_next)  # the point of the next lower score
        contrib = precision * (lower - higher) / 2.0 + xp.where(first, recall / 2.0, 0.0)
    else:
        contrib = xp.zeros(0, dtype=xp.float64)
    ap = xp.astype(bincount(pg, minlength=n_groups, weights=contrib), xp.float64)
    return xp.where(n_pos > 0, ap, xp.nan)
