"""Every OpenScan metric on a resample of scenes (the bootstrap's statistic).

ScanNet's matching never crosses scenes, so a scene's matching outcome (its
entries of the PR curves: true or false positive, score, class x threshold)
is the same in any resample; a scene drawn c times contributes c copies of
each entry and c times its valid instances. The exact AP of the resample then
follows from weighted running sums along each (threshold, class) curve, in
the order ``average_precision_distinct`` sorts it:

- a point is a distinct score of a curve (the same points as on the full
  data); its TP and "seen" counts are weighted sums, needed only around the
  points that hold a true positive (``_curves``);
- a point no resampled entry reaches repeats the point above it (or the
  sentinel (p = 1, r = 0) when nothing above it was drawn either), and a
  repeated point adds nothing to ScanNet's sum p_i (r_{i-1} - r_{i+1}) / 2;
- a class none of whose drawn scenes has a valid instance is undefined (NaN),
  as on the full data.

Semantic IoU and Acc come from the confusion's per-class sums, which add up
over scenes. Cost: per aspect, a matrix product (b, scenes) x (scenes, 3 P)
with P its points holding a true positive, or, with many scenes, one gather
of (b, E) weights, E its entries (``weighted.RunningSums``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from evaluation_workers.plugin import (
    AP25_INDEX,
    AP50_INDEX,
    AP_SLICE,
    IOU_THRESHOLDS,
    Unpaired,
    array_namespace,
    bootstrap,
    segment_sums,
    weighted,
)

UNIT = "scene"
# Mean AP over classes, some of them rare, is biased on few scenes (a rare class is missing from some
# splits, and an AP of a handful of instances runs high): on benchmarks/coverage.py's OpenScan shape
# the 95 % percentile interval covered 85 % at 50 scenes, 88 % at 100, 92-94 % from 150 (and at
# val's 312). Fewer scenes than this get no interval.
MIN_SCENES = 150


def units_of(outcomes: dict[str, dict[str, np.ndarray]]) -> int:
    """Scenes of the split (every aspect's ``n_pos`` has a row per scene of the manifest)."""
    return int(next(iter(outcomes.values()))["n_pos"].shape[0]) if outcomes else 0


def width(outcomes: dict[str, dict[str, np.ndarray]]) -> int:
    return max([3 * int(o["is_true"].sum()) for o in outcomes.values()] + [1])


def stack(a: dict[str, dict[str, np.ndarray]], b: dict[str, dict[str, np.ndarray]]) -> dict[str, dict[str, np.ndarray]]:
    """Both submissions' scenes side by side (``Track.stack``): 2S units, B's scene i as unit S + i.

    A scene's entries keep their matching outcome whoever else is scored with them, and AP pools the
    entries of every unit by score (ties count as one point whatever their order), so the stacked
    entries of each aspect are A's and B's together, B's units shifted by S; the positives and the
    semantic confusion add up per unit. A semantic part that only one of them has is left out.
    """
    if set(a) != set(b):
        raise Unpaired("the two results' outcomes hold different aspects")
    shift = units_of(a)
    out: dict[str, dict[str, np.ndarray]] = {}
    for aspect, x in a.items():
        y = b[aspect]
        out[aspect] = {key: np.concatenate([x[key], y[key]]) for key in ("group", "is_true", "score")}
        out[aspect]["unit"] = np.concatenate([x["unit"], y["unit"] + shift])
        out[aspect]["n_pos"] = np.concatenate([x["n_pos"], y["n_pos"]])
        if x.get("semantic") is not None and y.get("semantic") is not None:
            out[aspect]["semantic"] = np.concatenate([x["semantic"], y["semantic"]])
    return out


def _curves(o: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Sort an aspect's entries as ``average_precision_distinct`` does; find what AP needs of them.

    ScanNet's sum p_i (r_{i-1} - r_{i+1}) / 2 over a curve's points (from the
    highest score) telescopes to sum_i (r_i - r_{i-1}) (p_i + p_{i-1}) / 2 with
    p = 1 above the first point: only points holding a true positive add to
    it, and each needs the precision at its own end and at the end of the
    point above. So the running sums are needed at three positions per such
    point (its end, the end of the point above, the curve's start), the true
    positives' running sums at the same places.
    """
    order = np.argsort(-o["score"], kind="stable")
    order = order[np.argsort(o["group"][order], kind="stable")]
    group, score = o["group"][order], o["score"][order]
    unit, is_true = o["unit"][order], o["is_true"][order].astype(bool)
    n = group.shape[0]
    new_group = np.ones(n, dtype=bool)
    new_group[1:] = group[1:] != group[:-1]
    curve_start = np.maximum.accumulate(np.where(new_group, np.arange(n), 0)) if n else np.zeros(0, np.int64)
    last = np.ones(n, dtype=bool)
    last[:-1] = (group[1:] != group[:-1]) | (score[1:] != score[:-1])
    point_of = np.cumsum(last) - last  # the point each entry belongs to
    point_end = np.flatnonzero(last)
    point_begin = np.concatenate([[0], point_end[:-1] + 1]).astype(np.int64) if n else np.zeros(0, np.int64)
    has_true = np.bincount(point_of[is_true], minlength=point_end.shape[0]) > 0
    tp_points = np.flatnonzero(has_true)
    end = point_end[tp_points]
    above = point_begin[tp_points] - 1  # -1 or another curve's entry when the point is its curve's first
    start = curve_start[end] - 1
    # Running sums at position -1 are 0: shift every position by one onto a leading dummy entry.
    wanted = np.unique(np.concatenate([end, above, start]) + 1)
    true_before = np.concatenate([[0], np.cumsum(is_true)])  # true positives before each position
    # index in the leading-dummy list of true positives; running sums want distinct ones
    true_wanted, true_of_wanted = np.unique(true_before[wanted], return_inverse=True)
    return {"unit": np.concatenate([[0], unit]), "wanted": wanted,
            "at_end": np.searchsorted(wanted, end + 1), "at_above": np.searchsorted(wanted, above + 1),
            "at_start": np.searchsorted(wanted, start + 1),
            "true_unit": np.concatenate([[0], unit[is_true]]),
            "true_wanted": true_wanted, "true_of_wanted": true_of_wanted,
            "curve": group[end]}


# Units x TP points up to which an aspect's running sums are precomputed as matrices (float64 each).
DENSE_ELEMENTS = 1 << 22


def statistic(outcomes: dict[str, dict[str, np.ndarray]]) -> bootstrap.Statistic:
    """The (b, S) counts -> AP/AP50/AP25 (and mIoU/mAcc) overall and "<aspect>/<metric>"."""
    n_units = units_of(outcomes)
    curves = {a: _curves(o) for a, o in outcomes.items()}
    plans = {a: _plan(curves[a], n_units, o["n_pos"].shape[1]) for a, o in outcomes.items()}
    n_thr = len(IOU_THRESHOLDS)

    def stat(counts: Any) -> dict[str, Any]:
        xp = array_namespace(counts)
        out: dict[str, Any] = {}
        all_ap: list[Any] = []
        all_iou: list[Any] = []
        all_acc: list[Any] = []
        for aspect, o in outcomes.items():
            ap = _aspect_ap(xp, counts, curves[aspect], plans[aspect], o["n_pos"], n_thr)  # (b, T, K)
            class_ap = xp.mean(ap[:, AP_SLICE, :], axis=1)
            values = {"AP": class_ap, "AP50": ap[:, AP50_INDEX, :], "AP25": ap[:, AP25_INDEX, :]}
            for key, v in values.items():
                out[f"{aspect}/{key}"] = weighted.nanmean_last(xp, v)
            all_ap.append(xp.stack([class_ap, values["AP50"], values["AP25"]]))
            if o.get("semantic") is not None:
                iou, acc = _semantic(xp, counts, o["semantic"])
                out[f"{aspect}/mIoU"], out[f"{aspect}/mAcc"] = (weighted.nanmean_last(xp, x) for x in (iou, acc))
                all_iou.append(iou)
                all_acc.append(acc)
        if all_ap:
            stacked = xp.concat(all_ap, axis=2)
            for i, key in enumerate(("AP", "AP50", "AP25")):
                out[key] = weighted.nanmean_last(xp, stacked[i])
        if all_iou:
            out["mIoU"] = weighted.nanmean_last(xp, xp.concat(all_iou, axis=1))
            out["mAcc"] = weighted.nanmean_last(xp, xp.concat(all_acc, axis=1))
        return out

    return stat


def _plan(c: dict[str, np.ndarray], n_units: int, n_classes: int) -> dict[str, Any]:
    """What every block of resamples shares: where each curve's points are and, with few enough
    units x points, the running sums at each point as (units, 4 P) matrices, so that a block's
    sums are one product. Integer entries: the product's sums are the running sums' exactly."""
    n_curves = len(IOU_THRESHOLDS) * n_classes
    # Points come curve after curve: a curve's AP is the sum over its segment of points, put in its
    # column (column 0 of the sums' padded copy, 0, for a curve without any point).
    curve = c["curve"]
    first = np.flatnonzero(np.concatenate([[True], curve[1:] != curve[:-1]])) if curve.shape[0] else curve[:0]
    column = np.zeros(n_curves, dtype=np.int64)
    column[curve[first]] = np.arange(1, first.shape[0] + 1)
    plan: dict[str, Any] = {"curve_starts": first, "curve_column": column}
    p = int(curve.shape[0])
    if p and n_units * 4 * p <= DENSE_ELEMENTS:
        seen = weighted.entries_up_to(_dummy_first(c["unit"]), c["wanted"], n_units + 1)[1:]
        true = weighted.entries_up_to(_dummy_first(c["true_unit"]), c["true_wanted"], n_units + 1)[1:]
        true = true[:, c["true_of_wanted"]]
        s0, t0 = seen[:, c["at_start"]], true[:, c["at_start"]]
        plan["sums"] = np.concatenate([seen[:, c["at_end"]] - s0, true[:, c["at_end"]] - t0,
                                       seen[:, c["at_above"]] - s0, true[:, c["at_above"]] - t0], axis=1)
    elif p:
        plan["seen"] = weighted.RunningSums(_dummy_first(c["unit"]), c["wanted"], n_units + 1)
        plan["true"] = weighted.RunningSums(_dummy_first(c["true_unit"]), c["true_wanted"], n_units + 1)
    return plan


def _aspect_ap(xp: Any, counts: Any, c: dict[str, np.ndarray], plan: dict[str, Any], n_pos_h: np.ndarray,
               n_thr: int) -> Any:
    b = counts.shape[0]
    n_classes = n_pos_h.shape[1]
    n_curves = n_thr * n_classes
    n_pos = xp.reshape(xp.broadcast_to((counts @ xp.asarray(n_pos_h.astype(np.float64)))[:, None, :],
                                       (b, n_thr, n_classes)), (b, n_curves))
    ap = xp.zeros((b, n_curves), dtype=xp.float64)
    p = int(c["curve"].shape[0])
    if p:
        if "sums" in plan:
            sums = counts @ xp.asarray(plan["sums"])
            seen_end, true_end, seen_above, true_above = (sums[:, k * p : (k + 1) * p] for k in range(4))
        else:
            # The leading dummy entry weighs nothing: its unit's counts are replaced by a zero column.
            padded = xp.concat([xp.zeros((b, 1), dtype=xp.float64), counts], axis=1)
            seen_at = plan["seen"](padded)
            true_at = xp.take(plan["true"](padded), xp.asarray(c["true_of_wanted"]), axis=1)
            at_end, at_above, at_start = (xp.asarray(c[k]) for k in ("at_end", "at_above", "at_start"))
            seen0, true0 = xp.take(seen_at, at_start, axis=1), xp.take(true_at, at_start, axis=1)
            seen_end = xp.take(seen_at, at_end, axis=1) - seen0
            true_end = xp.take(true_at, at_end, axis=1) - true0
            seen_above = xp.take(seen_at, at_above, axis=1) - seen0
            true_above = xp.take(true_at, at_above, axis=1) - true0
        curve = xp.asarray(c["curve"])
        # A curve without positives in the resample gains nothing: a true positive's scene holds its
        # instance, so none of its true positives was drawn either, and its gains are 0 / 1.
        pos = xp.take(xp.maximum(n_pos, 1.0), curve, axis=1)
        p_end, p_above = _precision(xp, true_end, seen_end), _precision(xp, true_above, seen_above)
        gain = (true_end - true_above) / pos
        # Halved after the sums: halving is exact, so the sums' bits are those of the halved terms.
        per_curve = segment_sums(gain * (p_end + p_above), xp.asarray(plan["curve_starts"]), xp) / 2.0
        padded_ap = xp.concat([xp.zeros((b, 1), dtype=xp.float64), per_curve], axis=1)
        ap = xp.take(padded_ap, xp.asarray(plan["curve_column"]), axis=1)
    ap = xp.where(n_pos > 0, ap, xp.full_like(ap, np.nan))
    return xp.reshape(ap, (b, n_thr, n_classes))


def _precision(xp: Any, true: Any, seen: Any) -> Any:
    """true / seen, and 1 where nothing is drawn at or above the point (seen 0, then true 0 too: the
    sentinel's precision): 0 / 0 is NaN, which ``fmin`` replaces by 1; elsewhere true <= seen, so the
    quotient is at most 1 and ``fmin`` keeps it. Two passes over these (b, P) arrays, where adding a
    0/1 "nothing" to both took five, and ``where`` three times as long as those."""
    with np.errstate(invalid="ignore"):
        return xp.fmin(true / seen, 1.0)


def _dummy_first(unit: np.ndarray) -> np.ndarray:
    """Units shifted by one (column 0 of ``padded`` is the dummy's zero weight)."""
    out = unit + 1
    out[0] = 0
    return out


def _semantic(xp: Any, counts: Any, per_scene: np.ndarray) -> tuple[Any, Any]:
    """Per-class IoU and Acc of a resample: (b, K) each, NaN where the denominator is 0."""
    s, _, k = per_scene.shape
    sums = xp.reshape(counts @ xp.asarray(per_scene.reshape(s, 3 * k).astype(np.float64)), (-1, 3, k))
    tp, positives, predicted = sums[:, 0, :], sums[:, 1, :], sums[:, 2, :]
    union = positives + predicted - tp
    return weighted.weighted_ratio(xp, tp, union), weighted.weighted_ratio(xp, tp, positives)
