"""Every OpenScan metric on a resample of scenes (the bootstrap's statistic).

ScanNet's matching never crosses scenes, so a scene's matching outcome (its
entries of the PR curves: true or false positive, score, class x threshold)
is the same in any resample; a scene drawn c times contributes c copies of
each entry and c times its valid instances. The exact AP of the resample then
follows from weighted running sums along each (threshold, class) curve, in
the order ``average_precision_distinct`` sorts it:

- a point is a distinct score of a curve (the same points as on the full
  data); its TP and "seen" counts are weighted sums;
- a point no resampled entry reaches repeats the point above it (or the
  sentinel (p = 1, r = 0) when nothing above it was drawn either), and a
  repeated point adds nothing to ScanNet's sum p_i (r_{i-1} - r_{i+1}) / 2;
- a class none of whose drawn scenes has a valid instance is undefined (NaN),
  as on the full data.

Semantic IoU and Acc come from the confusion's per-class sums, which add up
over scenes. Cost: one (b, E) running sum per aspect, E its entries.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from evaluation_workers._xp import array_namespace, cumsum64
from evaluation_workers.metrics import bootstrap
from evaluation_workers.metrics.instance_ap import AP25_INDEX, AP50_INDEX, AP_SLICE, IOU_THRESHOLDS

UNIT = "scene"


def width(outcomes: dict[str, dict[str, np.ndarray]]) -> int:
    return max([int(o["group"].shape[0]) for o in outcomes.values()] + [1])


def _curves(o: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Sort an aspect's entries as ``average_precision_distinct`` does; mark its points."""
    order = np.argsort(-o["score"], kind="stable")
    order = order[np.argsort(o["group"][order], kind="stable")]
    group, score = o["group"][order], o["score"][order]
    n = group.shape[0]
    new_group = np.ones(n, dtype=bool)
    new_group[1:] = group[1:] != group[:-1]
    start = np.maximum.accumulate(np.where(new_group, np.arange(n), 0)) if n else np.zeros(0, np.int64)
    last = np.ones(n, dtype=bool)
    last[:-1] = (group[1:] != group[:-1]) | (score[1:] != score[:-1])
    points = np.flatnonzero(last)
    pg = group[points]
    first = np.ones(points.shape[0], dtype=bool)
    first[1:] = pg[1:] != pg[:-1]
    final = np.ones(points.shape[0], dtype=bool)
    final[:-1] = pg[1:] != pg[:-1]
    ends = np.flatnonzero(final)  # last point of each curve that has one
    return {"unit": o["unit"][order], "is_true": o["is_true"][order].astype(np.float64),
            "points": points, "point_start": start[points], "point_group": pg,
            "first": first, "final": final, "curve_end": ends, "curve_group": pg[ends]}


def statistic(outcomes: dict[str, dict[str, np.ndarray]]) -> bootstrap.Statistic:
    """The (b, S) counts -> AP/AP50/AP25 (and mIoU/mAcc) overall and "<aspect>/<metric>"."""
    curves = {a: _curves(o) for a, o in outcomes.items()}
    n_thr = len(IOU_THRESHOLDS)

    def stat(counts: Any) -> dict[str, Any]:
        xp = array_namespace(counts)
        out: dict[str, Any] = {}
        all_ap: list[Any] = []
        all_iou: list[Any] = []
        all_acc: list[Any] = []
        for aspect, o in outcomes.items():
            ap = _aspect_ap(xp, counts, curves[aspect], o["n_pos"], n_thr)  # (b, T, K)
            class_ap = xp.mean(ap[:, AP_SLICE, :], axis=1)
            values = {"AP": class_ap, "AP50": ap[:, AP50_INDEX, :], "AP25": ap[:, AP25_INDEX, :]}
            for key, v in values.items():
                out[f"{aspect}/{key}"] = bootstrap.nanmean_last(xp, v)
            all_ap.append(xp.stack([class_ap, values["AP50"], values["AP25"]]))
            if o.get("semantic") is not None:
                iou, acc = _semantic(xp, counts, o["semantic"])
                out[f"{aspect}/mIoU"], out[f"{aspect}/mAcc"] = (bootstrap.nanmean_last(xp, x) for x in (iou, acc))
                all_iou.append(iou)
                all_acc.append(acc)
        if all_ap:
            stacked = xp.concat(all_ap, axis=2)
            for i, key in enumerate(("AP", "AP50", "AP25")):
                out[key] = bootstrap.nanmean_last(xp, stacked[i])
        if all_iou:
            out["mIoU"] = bootstrap.nanmean_last(xp, xp.concat(all_iou, axis=1))
            out["mAcc"] = bootstrap.nanmean_last(xp, xp.concat(all_acc, axis=1))
        return out

    return stat


def _aspect_ap(xp: Any, counts: Any, c: dict[str, np.ndarray], n_pos_h: np.ndarray, n_thr: int) -> Any:
    b = counts.shape[0]
    n_classes = n_pos_h.shape[1]
    n_pos = xp.reshape(xp.broadcast_to((counts @ xp.asarray(n_pos_h.astype(np.float64)))[:, None, :],
                                       (b, n_thr, n_classes)), (b, n_thr * n_classes))
    ap = xp.zeros((b, n_thr * n_classes), dtype=xp.float64)
    if c["points"].shape[0]:
        weight = xp.take(counts, xp.asarray(c["unit"]), axis=1)  # (b, E)
        zero = xp.zeros((b, 1), dtype=xp.float64)
        seen_all = xp.concat([zero, cumsum64(weight, axis=1)], axis=1)
        true_all = xp.concat([zero, cumsum64(weight * xp.asarray(c["is_true"])[None, :], axis=1)], axis=1)
        points, start = xp.asarray(c["points"] + 1), xp.asarray(c["point_start"])
        seen = xp.take(seen_all, points, axis=1) - xp.take(seen_all, start, axis=1)
        tp = xp.take(true_all, points, axis=1) - xp.take(true_all, start, axis=1)
        pos = xp.take(n_pos, xp.asarray(c["point_group"]), axis=1)
        recall = xp.where(pos > 0, tp / xp.where(pos > 0, pos, xp.ones_like(pos)), xp.zeros_like(tp))
        # nothing drawn at or above the point: a copy of the sentinel (p = 1, r = 0)
        precision = xp.where(seen > 0, tp / xp.where(seen > 0, seen, xp.ones_like(seen)), xp.ones_like(seen))
        first, final = xp.asarray(c["first"])[None, :], xp.asarray(c["final"])[None, :]
        r_prev = xp.concat([zero, recall[:, :-1]], axis=1)
        r_next = xp.concat([recall[:, 1:], zero], axis=1)
        higher = xp.where(first, xp.zeros_like(r_prev), r_prev)
        lower = xp.where(final, recall, r_next)
        contrib = precision * (lower - higher) / 2.0 + xp.where(first, recall / 2.0, xp.zeros_like(recall))
        total = xp.concat([zero, cumsum64(contrib, axis=1)], axis=1)
        ends = c["curve_end"]
        begins = np.concatenate([[0], ends[:-1] + 1])
        per_curve = xp.take(total, xp.asarray(ends + 1), axis=1) - xp.take(total, xp.asarray(begins), axis=1)
        onehot = xp.asarray((c["curve_group"][:, None] == np.arange(n_thr * n_classes)[None, :]).astype(np.float64))
        ap = per_curve @ onehot
    ap = xp.where(n_pos > 0, ap, xp.full_like(ap, np.nan))
    return xp.reshape(ap, (b, n_thr, n_classes))


def _semantic(xp: Any, counts: Any, per_scene: np.ndarray) -> tuple[Any, Any]:
    """Per-class IoU and Acc of a resample: (b, K) each, NaN where the denominator is 0."""
    s, _, k = per_scene.shape
    sums = xp.reshape(counts @ xp.asarray(per_scene.reshape(s, 3 * k).astype(np.float64)), (-1, 3, k))
    tp, positives, predicted = sums[:, 0, :], sums[:, 1, :], sums[:, 2, :]
    union = positives + predicted - tp
    return bootstrap.weighted_ratio(xp, tp, union), bootstrap.weighted_ratio(xp, tp, positives)
