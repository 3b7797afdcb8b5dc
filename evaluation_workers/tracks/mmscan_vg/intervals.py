"""Every MMScan metric on a resample of prompts (the bootstrap's statistic).

A resample is a (b, S) array of counts: how often each scored prompt was
drawn. Per-prompt metrics (gTop-k, AP_sample, AR) are means over prompts, so
their resampled value is the counts-weighted mean. AP_box and AR_box pool the
predictions of a category's prompts: a prompt drawn c times puts c copies of
each of its predictions in the pooled ranking, next to each other (copies of
one prompt share its label position, so the devkit's tie order, label order
then rank, does not separate them). The ranking itself does not change, so
the statistic takes running sums of the copies' weights along the ranking:

- precision at a true positive = weighted true positives so far / weighted
  predictions so far (at the last copy; within a run of copies of a true
  positive the precision only rises, so every copy takes the envelope of the
  last one);
- the VOC envelope needs only the true positives: a false positive's precision
  is below that of the position before it;
- recall is over the weighted ground-truth boxes of the category.

The running sums of all predictions are needed only at the true positives
(``weighted.RunningSums``: one sparse product per category, over its R pooled
predictions up to its last true positive, ``score._outcomes``), those of the
true positives all along. Both, and the envelope, are computed with the
resamples side by side in ``metrics.interleaved``'s layout: element-wise steps
over every resample at once rather than a chain of additions per resample.
Each AP is summed in ranking order, resample by resample, as a plain
computation would, so the values are the same bit for bit.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from evaluation_workers.plugin import (
    Interleaved,
    Unpaired,
    array_namespace,
    bootstrap,
    contiguous,
    into,
    weighted,
)
from evaluation_workers.tracks.mmscan_vg.labels import GROUPS
from evaluation_workers.tracks.mmscan_vg.score import PER_SAMPLE_KEYS, POOLED, THRESHOLDS

UNIT = "prompt"


def units_of(outcomes: dict[str, np.ndarray]) -> int:
    return int(outcomes["group"].shape[0])


def groups_of(outcomes: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The prompts of each category (an interval per category needs enough scans)."""
    return bootstrap.groups_of(outcomes["group"], GROUPS)


def entries(outcomes: dict[str, np.ndarray]) -> int:
    """What one resample gathers: every pooled prediction up to its group's last true positive, and
    every prompt."""
    return int(np.count_nonzero(_up_to_last_hit(outcomes)) + outcomes["values"].size)


def _up_to_last_hit(outcomes: dict[str, np.ndarray]) -> np.ndarray:
    """(R,) bool: the pooled predictions up to their group's last true positive (later ones change
    neither AP nor AR; outcomes kept before issue 34 hold no others)."""
    group, tp = outcomes["pool_group"], outcomes["pool_tp"]
    hits = np.flatnonzero(tp.any(axis=1))
    last = np.full(len(GROUPS), -1, dtype=np.int64)
    np.maximum.at(last, group[hits], hits)
    kept: np.ndarray = np.arange(group.shape[0]) <= last[group]
    return kept


def width(outcomes: dict[str, np.ndarray]) -> int:
    """Entries per resample the statistic holds at once, for the bootstrap's blocks: a category's
    running sums at its hits and five (b, P) temporaries of its true positives at one threshold."""
    group, tp = outcomes["pool_group"], outcomes["pool_tp"]
    hits = np.bincount(group[tp.any(axis=1)], minlength=len(GROUPS))
    true = np.stack([np.bincount(group[tp[:, t]], minlength=len(GROUPS)) for t in range(tp.shape[1])])
    return int((hits + 5 * true.max(axis=0, initial=0)).max(initial=1))


def stack(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Both submissions' prompts side by side (``Track.stack``): 2S units, B's prompt i as unit S + i.

    Per-prompt values, categories and box counts stack. The pooled rankings merge into the one a
    submission holding both's predictions would have: score descending, ties in label order of
    the prompt (A's and B's prompt i share it: a mix weighs only one of them), then rank within
    it (each submission's own order). Matching never crosses prompts, so every flag stays.
    """
    if "pool_score" not in a or "pool_score" not in b:
        raise Unpaired("the outcomes were kept by an older scorer (without the scores of the pooled "
                                   "predictions); re-scoring both results keeps what the test needs")
    n = units_of(a)
    score = np.concatenate([a["pool_score"], b["pool_score"]])
    prompt = np.concatenate([a["pool_sample"], b["pool_sample"]])
    own_order = np.concatenate([np.arange(a["pool_score"].shape[0]), np.arange(b["pool_score"].shape[0])])
    order = np.lexsort((own_order, prompt, -score))
    out = {key: np.concatenate([a[key], b[key]]) for key in ("values", "group", "gt_count")}
    if "scene" in a and "scene" in b:
        out["scene"] = np.concatenate([a["scene"], b["scene"]])
    out["pool_sample"] = np.concatenate([a["pool_sample"], b["pool_sample"] + n])[order]
    for key in ("pool_group", "pool_tp"):
        out[key] = np.concatenate([a[key], b[key]])[order]
    out["pool_score"] = score[order]
    return out


def statistic(outcomes: dict[str, np.ndarray]) -> bootstrap.Statistic:
    """The (b, S) counts -> every metric and every "<group>/<metric>" of the result."""
    values_h = outcomes["values"].astype(np.float64)
    n, n_keys = values_h.shape
    onehot_h = (outcomes["group"][:, None] == np.arange(len(GROUPS))[None, :]).astype(np.float64)
    by_group_h = (onehot_h[:, :, None] * values_h[:, None, :]).reshape(n, -1)
    gt_h = onehot_h * outcomes["gt_count"][:, None]
    pool_group = np.where(_up_to_last_hit(outcomes), outcomes["pool_group"], -1)
    pools = []
    for gi in range(len(GROUPS)):
        rows = np.flatnonzero(pool_group == gi)
        tp = outcomes["pool_tp"][rows]
        sample = outcomes["pool_sample"][rows]
        hits = np.flatnonzero(tp.any(axis=1))  # where the running sum of all predictions is needed
        at_hits = Interleaved(int(hits.shape[0]))
        seen = weighted.RunningSums(sample, hits, n)
        per_t = []
        for t in range(len(THRESHOLDS)):
            tp_rows = np.flatnonzero(tp[:, t])
            layout = Interleaved(int(tp_rows.shape[0]))
            # Per row of the layout: the prompt whose weight it takes, and the hit whose running sum.
            per_t.append((layout, layout.source_rows(sample[tp_rows]),
                          layout.source_rows(at_hits.row_of(np.searchsorted(hits, tp_rows)))))
        pools.append((seen, at_hits, per_t))
    longest = max([layout.n for _, _, per_t in pools for layout, _, _ in per_t] + [1])

    def stat(counts: Any) -> dict[str, Any]:
        xp = array_namespace(counts)
        b = counts.shape[0]
        total = xp.sum(counts, axis=1)
        out: dict[str, Any] = {}
        overall = counts @ xp.asarray(values_h) / total[:, None]
        sizes = counts @ xp.asarray(onehot_h)  # (b, G) prompts per category
        per_group = xp.reshape(counts @ xp.asarray(by_group_h), (b, len(GROUPS), n_keys))
        per_group = weighted.weighted_ratio(xp, per_group, sizes[:, :, None])
        for k, key in enumerate(PER_SAMPLE_KEYS):
            out[key] = overall[:, k]
            for gi, g in enumerate(GROUPS):
                out[f"{g}/{key}"] = per_group[:, gi, k]
        n_gt = counts @ xp.asarray(gt_h)  # (b, G) ground-truth boxes per category
        # The true positives' weights gathered and summed as integers where they are whole (draws);
        # prompts by resamples, so that a gather copies rows (``interleaved``).
        ints = weighted.as_int32(counts, longest)
        weights = contiguous(xp.permute_dims(counts if ints is None else ints, (1, 0)))  # (S, b)
        pooled = {f"{m}@{t}": xp.zeros((b,), dtype=xp.float64) for m in POOLED for t in THRESHOLDS}
        for gi, (running, at_hits, per_t) in enumerate(pools):
            present = sizes[:, gi] > 0
            # Predictions up to each hit, at least 1 (the precision's denominator).
            seen = xp.maximum(running.interleaved(weights, at_hits), xp.ones((1,), dtype=xp.float64))
            for ti, t in enumerate(THRESHOLDS):
                layout, tp_prompt, tp_hit = per_t[ti]
                ap, ar = _pooled(xp, layout, weights, seen, xp.asarray(tp_prompt), xp.asarray(tp_hit), n_gt[:, gi])
                for key, value in ((f"AP_box@{t}", ap), (f"AR_box@{t}", ar)):
                    defined = xp.where(present, value, xp.full_like(value, np.nan))
                    out[f"{GROUPS[gi]}/{key}"] = defined
                    pooled[key] = pooled[key] + xp.where(present, value * sizes[:, gi], xp.zeros_like(value))
        for key, value in pooled.items():
            out[key] = value / total
        return out

    return stat


def _pooled(xp: Any, layout: Interleaved, weights: Any, seen: Any, tp_prompt: Any, tp_hit: Any,
            n_gt: Any) -> tuple[Any, Any]:
    """Weighted AP and AR of one category's ranking at one threshold: (b,) each, 0 where it has no
    true positive.

    ``weights`` (S, b): each prompt's weight in each resample, int32 (summed in int32: the caller
    checked that every sum fits) or float64; ``seen`` (rows, b) in ``at_hits``' layout: the weight of
    all predictions up to each hit, at least 1; ``tp_prompt``, ``tp_hit``: for each row of
    ``layout`` (the true positives, in ranking order), the row of ``weights`` and of ``seen``.
    """
    b = weights.shape[1]
    if layout.n == 0:
        zero = xp.zeros((b,), dtype=xp.float64)
        return zero, zero
    w_tp = layout.gather(weights, tp_prompt)  # (rows, b), 0 at the padding
    w_float = xp.astype(w_tp, xp.float64)
    found = layout.running_sum(w_tp)
    # Weights are whole numbers and so_far >= found: where nothing is drawn yet both are 0 and so is
    # the precision; elsewhere so_far >= 1 and the division is the plain one.
    so_far = layout.gather(seen, tp_hit, pad=1.0)
    precision = layout.set_padding(into("divide", found, so_far, so_far), 0)
    envelope = layout.running_max_reverse(precision)
    # Summed in ranking order, as one resample's row: the same bits as the plain computation.
    ap = weighted.weighted_ratio(xp, xp.sum(layout.to_positions(into("multiply", w_float, envelope, envelope)),
                                             axis=1), n_gt)
    ar = weighted.weighted_ratio(xp, xp.astype(found[layout.last_row, :], xp.float64), n_gt)
    return ap, ar
