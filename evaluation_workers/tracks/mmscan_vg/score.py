"""Scoring of MMScan visual grounding (METRICS.md), in blocks of prompts.

Per-prompt metrics depend on one prompt's predictions only, so prompts are
scored in blocks of at most ``block_pairs`` (prediction, ground-truth column)
pairs: the IoU matrix, the matching and the per-prompt metrics of one block
are all that is in memory besides the (N,) arrays, whatever N (the full test
split is about 21-54 M boxes). Within a prompt every operation runs in the
same order as on the whole file at once, so the block size never changes a
bit of the result. AP_box/AR_box then pool the (N,) true-positive flags.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext
from typing import Any

import numpy as np
from array_api_compat import is_numpy_namespace

from evaluation_workers.plugin import (
    DEFAULT_CHUNK_PAIRS,
    Progress,
    grounding,
    indexed_iou3d,
    no_progress,
    read_ahead,
    threads,
    to_numpy,
)
from evaluation_workers.tracks.mmscan_vg.labels import GROUPS, SUB_CLASSES, Labels, Predictions

THRESHOLDS = (0.25, 0.5)
TOP_K = (1, 3, 5)
PER_SAMPLE = tuple(f"gTop-{k}" for k in TOP_K) + ("AP_sample", "AR")
POOLED = ("AP_box", "AR_box")
FAMILIES = tuple(tuple(f"{m}@{t}" for m in PER_SAMPLE + POOLED) for t in THRESHOLDS)
METRICS = FAMILIES[0] + FAMILIES[1]
PER_SAMPLE_KEYS = tuple(k for k in METRICS if not k.startswith(POOLED))
GPU_CHUNK_PAIRS = 1 << 18
# (prediction, ground-truth column) pairs per block: ~1 GiB of working memory at most on the CPU.
BLOCK_PAIRS = 1 << 20
GPU_BLOCK_PAIRS = 1 << 23
# Blocks per thread at least, on several threads: with one large block each, the last waits for the longest.
BLOCKS_PER_THREAD = 4


def score_arrays(
    labels: Labels,
    preds: Predictions,
    xp: Any,
    chunk_pairs: int = DEFAULT_CHUNK_PAIRS,
    progress: Progress = no_progress,
    block_pairs: int = BLOCK_PAIRS,
    outcomes: dict[str, np.ndarray] | None = None,
) -> dict[str, Any]:
    """Metrics, breakdown and details from loaded labels and predictions.

    ``outcomes``, when given, is filled with the per-prompt outcomes the
    bootstrap needs (``_outcomes``); they stay on the worker.

    Args:
        labels, preds: as loaded; ``preds.boxes`` may be float32 or memory-mapped.
        xp: the array namespace to score in.
        chunk_pairs: pairs per exact IoU chunk (``indexed_iou3d``).
        block_pairs: pairs per block of prompts (memory bound; no effect on values).
    """
    scored = labels.gt_count > 0
    # Scored samples are renumbered 0..S-1 in label order; predictions of
    # samples without ground truth are dropped (the devkit skips them).
    new_index = np.cumsum(scored) - 1
    kept_rows = np.flatnonzero(scored[preds.sample])
    pred_sample_h = new_index[preds.sample[kept_rows]]
    gt_count_h = labels.gt_count[scored]
    n_samples = int(gt_count_h.shape[0])
    group_h = labels.group[scored]
    pred_count_h = np.bincount(pred_sample_h, minlength=n_samples)
    pred_start_h = np.cumsum(pred_count_h) - pred_count_h
    gt_start_h = np.cumsum(gt_count_h) - gt_count_h

    pred_sample = xp.asarray(pred_sample_h)
    del pred_sample_h
    kept_scores = xp.asarray(np.asarray(preds.scores, dtype=np.float64)[kept_rows])
    order = grounding.sort_predictions(pred_sample, kept_scores)
    pred_sample = xp.take(pred_sample, order)
    pred_score = xp.take(kept_scores, order)
    del kept_scores
    box_rows = kept_rows[to_numpy(order)]  # row in preds.boxes of each sorted prediction
    del kept_rows, order
    n_pred = int(box_rows.shape[0])
    n_cols = int(gt_count_h.max()) if n_samples else 1
    progress(0.3, "predictions sorted")

    per_sample: dict[str, list[Any]] = {}
    tp_parts: dict[float, list[Any]] = {t: [] for t in THRESHOLDS}
    # Blocks are independent: on NumPy they run on EVAL_THREADS threads (each its own share of the
    # memory bound, its IoU on one thread), and are collected in order, so the values are the same.
    # With several threads, BLOCKS_PER_THREAD blocks each at least, so that they finish together.
    workers = threads() if is_numpy_namespace(xp) else 1
    rows_per_block = block_pairs // workers // n_cols
    if workers > 1:
        rows_per_block = min(rows_per_block, -(-n_pred // (BLOCKS_PER_THREAD * workers)))
    spans = _blocks(pred_count_h, pred_start_h, max(1, rows_per_block))

    def run(span: tuple[int, int]) -> dict[str, Any]:
        return _score_block(labels, preds, xp, chunk_pairs, pred_sample, box_rows, span[0], span[1],
                            pred_start_h, pred_count_h, gt_start_h, gt_count_h, 1 if workers > 1 else None)

    with ThreadPoolExecutor(workers) if workers > 1 else nullcontext() as pool:
        for (_, s1), block in read_ahead(pool, run, spans, depth=workers):
            for key, value in block["per_sample"].items():
                per_sample.setdefault(key, []).append(value)
            for t in THRESHOLDS:
                tp_parts[t].append(block["tp"][t])
            progress(0.3 + 0.6 * s1 / n_samples, "IoU and matching")

    host = {key: np.concatenate([to_numpy(v) for v in parts]) for key, parts in per_sample.items()}
    pooled: dict[str, dict[str, float | None]] = {g: {} for g in GROUPS}
    tps = [xp.concat(p) if len(p) > 1 else (p[0] if p else xp.zeros((0,), dtype=xp.bool))
           for p in tp_parts.values()]
    del tp_parts
    # One ranking serves every pooled set: the groups here, the sub-classes and the outcomes below.
    ranking = grounding.rank(pred_score, pred_sample, tps, with_score=outcomes is not None)
    del tps
    groups = ranking.members(xp.asarray(group_h), len(GROUPS))
    for gi, g in enumerate(GROUPS):
        in_group = group_h == gi
        for ti, t in enumerate(THRESHOLDS):
            if not in_group.any():
                pooled[g][f"AP_box@{t}"] = pooled[g][f"AR_box@{t}"] = None
                continue
            ap, ar = grounding.ranked_ap(xp.take(ranking.tp[ti], groups[gi]), int(gt_count_h[in_group].sum()))
            pooled[g][f"AP_box@{t}"], pooled[g][f"AR_box@{t}"] = ap, ar

    metrics: dict[str, float | None] = {}
    breakdown: dict[str, dict[str, Any]] = {}
    group_sizes = np.bincount(group_h, minlength=len(GROUPS))
    for gi, g in enumerate(GROUPS):
        in_group = group_h == gi
        entry: dict[str, Any] = {}
        for key in METRICS:
            if key in host:
                entry[key] = float(host[key][in_group].mean()) if in_group.any() else None
            else:
                entry[key] = pooled[g][key]
        entry["count"] = int(in_group.sum())
        breakdown[g] = entry
    for key in METRICS:
        if n_samples == 0:
            metrics[key] = None
        elif key in host:
            metrics[key] = float(host[key].mean())
        else:  # AP_box, AR_box: groups weighted by their number of samples
            metrics[key] = float(
                sum(breakdown[g][key] * group_sizes[gi] for gi, g in enumerate(GROUPS) if group_sizes[gi])
                / n_samples
            )
    if outcomes is not None:
        outcomes.update(_outcomes(host, group_h, gt_count_h, ranking))
    del groups
    per_sub_class = (_per_sub_class(labels.sub_class[scored], host, gt_count_h, ranking, xp)
                     if labels.sub_class is not None else None)
    details = {
        "samples": n_samples,
        "samples_without_ground_truth": int((~scored).sum()),
        "ground_truth_boxes": int(gt_count_h.sum()),
        "predicted_boxes": n_pred,
        "num_gt": {g: int(gt_count_h[group_h == gi].sum()) for gi, g in enumerate(GROUPS)},
        "iou": "exact oriented-box volume ratio, float64",
    }
    if per_sub_class is not None:
        details["per_sub_class"] = per_sub_class
    return {"metrics": metrics, "breakdown": breakdown, "details": details}


def _per_sub_class(
    sub_h: np.ndarray, host: dict[str, np.ndarray], gt_count_h: np.ndarray, ranking: grounding.Ranking, xp: Any,
) -> dict[str, dict[str, Any]]:
    """Every metric of each of the devkit's seven sub-classes (the five groups fold them), as the
    groups' are computed: per-sample means, and AP_box/AR_box pooled over the sub-class's prompts.
    ``count``: its scored prompts; a sub-class without any has null metrics."""
    subs = ranking.members(xp.asarray(sub_h), len(SUB_CLASSES))
    out: dict[str, dict[str, Any]] = {}
    for si, name in enumerate(SUB_CLASSES):
        members = sub_h == si
        entry: dict[str, Any] = {}
        for key in METRICS:
            if key in host:
                entry[key] = float(host[key][members].mean()) if members.any() else None
        for ti, t in enumerate(THRESHOLDS):
            if not members.any():
                entry[f"AP_box@{t}"] = entry[f"AR_box@{t}"] = None
                continue
            entry[f"AP_box@{t}"], entry[f"AR_box@{t}"] = grounding.ranked_ap(
                xp.take(ranking.tp[ti], subs[si]), int(gt_count_h[members].sum()))
        out[name] = {k: entry[k] for k in METRICS} | {"count": int(members.sum())}
    return out


def _outcomes(
    host: dict[str, np.ndarray], group_h: np.ndarray, gt_count_h: np.ndarray, ranking: grounding.Ranking,
) -> dict[str, np.ndarray]:
    """What the bootstrap and the paired test need to recompute every metric on a resample of
    prompts, or on a mix of two submissions' prompts (host arrays).

    ``values`` (S, len(PER_SAMPLE_KEYS)) per-prompt metrics; ``group``, ``gt_count`` (S,);
    the pooled rankings of AP_box/AR_box: ``pool_sample`` (R,) prompt of each prediction in
    the pooled order (``grounding.Ranking``: score descending, ties in label order then rank,
    the order of ``ranked_ap``), ``pool_group`` (R,) its group (a group's rows, in order, are
    its ranking), ``pool_tp`` (R, 2) true-positive flags at 0.25 and 0.5, ``pool_score`` (R,)
    its score. Every prediction is kept: after a group's last true positive they change
    neither AP nor AR (the statistic leaves them out), but merged with another submission's
    ranking (``intervals.stack``) they rank above some of its true positives.
    """
    n = int(group_h.shape[0])
    values = np.stack([host[k] for k in PER_SAMPLE_KEYS], axis=1) if n else np.zeros((0, len(PER_SAMPLE_KEYS)))
    sample_h = to_numpy(ranking.sample)
    tp_h = np.stack([to_numpy(flags) for flags in ranking.tp], axis=1)
    return {"values": values, "group": group_h.astype(np.int64), "gt_count": gt_count_h.astype(np.int64),
            "pool_sample": sample_h, "pool_group": group_h.astype(np.int64)[sample_h], "pool_tp": tp_h,
            "pool_score": np.asarray(to_numpy(ranking.score), dtype=np.float64)}


def _blocks(pred_count_h: np.ndarray, pred_start_h: np.ndarray, rows_per_block: int) -> list[tuple[int, int]]:
    """Consecutive spans [s0, s1) of samples, about ``rows_per_block`` predictions each (one sample at least)."""
    n_samples = int(pred_count_h.shape[0])
    ends = np.cumsum(pred_count_h)
    spans = []
    s0 = 0
    while s0 < n_samples:
        s1 = int(np.searchsorted(ends, pred_start_h[s0] + rows_per_block, side="right"))
        s1 = min(max(s1, s0 + 1), n_samples)
        spans.append((s0, s1))
        s0 = s1
    return spans


def _score_block(
    labels: Labels,
    preds: Predictions,
    xp: Any,
    chunk_pairs: int,
    pred_sample: Any,
    box_rows: np.ndarray,
    s0: int,
    s1: int,
    pred_start_h: np.ndarray,
    pred_count_h: np.ndarray,
    gt_start_h: np.ndarray,
    gt_count_h: np.ndarray,
    iou_threads: int | None = None,
) -> dict[str, Any]:
    """Per-sample metrics of samples s0..s1-1 and the TP flags of their predictions (sorted order).

    ``iou_threads``: threads of the exact IoU (``indexed_iou3d``; default ``EVAL_THREADS``).
    """
    a = int(pred_start_h[s0])
    b = int(pred_start_h[s1 - 1] + pred_count_h[s1 - 1])
    g0 = int(gt_start_h[s0])
    g1 = int(gt_start_h[s1 - 1] + gt_count_h[s1 - 1])
    sample = pred_sample[a:b] - s0
    start = xp.asarray(pred_start_h[s0:s1] - a)
    count = xp.asarray(pred_count_h[s0:s1])
    gt_count = xp.asarray(gt_count_h[s0:s1])
    gt_start = xp.asarray(gt_start_h[s0:s1] - g0)
    n = b - a
    n_cols = int(gt_count_h[s0:s1].max())
    # float32 boxes of the binary form are widened here, one block at a time.
    pred_boxes = xp.asarray(np.asarray(preds.boxes[box_rows[a:b]], dtype=np.float64))
    gt_boxes = xp.asarray(labels.gt_boxes[g0:g1])

    # IoU of each prediction with each ground-truth box of its sample: (n, G).
    cols = xp.arange(n_cols)
    valid = cols[None, :] < xp.take(gt_count, sample)[:, None]
    gt_index = xp.take(gt_start, sample)[:, None] + cols[None, :]
    pred_index = xp.broadcast_to(xp.arange(n)[:, None], valid.shape)
    iou = xp.full((n * n_cols,), -1.0, dtype=xp.float64)
    flat_valid = xp.reshape(valid, (-1,))
    if n:
        iou[flat_valid] = indexed_iou3d(
            pred_boxes,
            gt_boxes,
            xp.reshape(pred_index, (-1,))[flat_valid],
            xp.reshape(gt_index, (-1,))[flat_valid],
            chunk_pairs,
            floor=min(THRESHOLDS),  # an IoU below every threshold is no match, whatever its value
            threads=iou_threads,
        )
    iou = xp.reshape(iou, (n, n_cols))
    best_iou, best_col = grounding.best_match(iou)
    per_sample: dict[str, Any] = {}
    tp_by_t: dict[float, Any] = {}
    for t in THRESHOLDS:
        tp = grounding.true_positives(best_iou, best_col, sample, n_cols, t)
        values = grounding.sample_metrics(tp, sample, start, count, gt_count, TOP_K)
        per_sample[f"AP_sample@{t}"] = values["AP"]
        per_sample[f"AR@{t}"] = values["AR"]
        for k in TOP_K:
            per_sample[f"gTop-{k}@{t}"] = values[f"gTop-{k}"]
        tp_by_t[t] = tp
    return {"per_sample": per_sample, "tp": tp_by_t}
