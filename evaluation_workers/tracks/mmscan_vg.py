"""MMScan visual grounding: ranked 9-DoF boxes per prompt, scored as in METRICS.md.

Differences from the official devkit, all stated in METRICS.md: the IoU is
the exact volume ratio (the devkit's pytorch3d kernel is off for close,
nearly parallel faces); sorts are stable; a prompt with no predictions scores
0 and counts (the devkit crashes).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import numpy as np

from evaluation_workers import _xp
from evaluation_workers.metrics import grounding
from evaluation_workers.metrics.iou3d import DEFAULT_CHUNK_PAIRS, indexed_iou3d
from evaluation_workers.results import make_result, sha256_file
from evaluation_workers.tracks import mmscan_io
from evaluation_workers.tracks.base import Manifest, Progress, Result, Track, no_progress

THRESHOLDS = (0.25, 0.5)
TOP_K = (1, 3, 5)
PER_SAMPLE = tuple(f"gTop-{k}" for k in TOP_K) + ("AP_sample", "AR")
POOLED = ("AP_box", "AR_box")
FAMILIES = tuple(tuple(f"{m}@{t}" for m in PER_SAMPLE + POOLED) for t in THRESHOLDS)
GPU_CHUNK_PAIRS = 1 << 18


def manifest(labels: Path) -> Manifest:
    """Public facts: sample ids and counts (never boxes)."""
    data = mmscan_io.load_labels(labels)
    scored = data.gt_count > 0
    return {
        "track": "mmscan-vg",
        "sample_ids": data.sample_ids,
        "samples": len(data.sample_ids),
        "scored_samples": int(scored.sum()),
        "groups": {g: int((scored & (data.group == i)).sum()) for i, g in enumerate(mmscan_io.GROUPS)},
        "max_boxes_per_prompt": mmscan_io.MAX_BOXES_PER_PROMPT,
    }


def prepare_labels(source: Path, dest: Path) -> Manifest:
    """Copy the official labels file into ``dest`` and return the public manifest."""
    file = mmscan_io.labels_file(source)
    mmscan_io.load_labels(file)  # refuse a bad file before copying it
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(file, dest / file.name)
    return manifest(dest)


def validate(predictions: Path, manifest_: Manifest) -> dict[str, Any]:
    """Check a predictions file against the public manifest only."""
    known = {sid: i for i, sid in enumerate(manifest_["sample_ids"])}
    preds = mmscan_io.load_predictions(predictions, known)
    return {
        "samples": preds.entries,
        "boxes": int(preds.boxes.shape[0]),
        "missing_samples": len(preds.missing),
    }


def score(labels: Path, predictions: Path, progress: Progress = no_progress) -> Result:
    """Score a predictions file. ``labels`` is the official file or a prepared folder.

    ``labels_sha256`` is the checksum of the labels file itself, so the file
    and the folder ``prepare_labels`` wrote from it give the same value.
    """
    labels_data = mmscan_io.load_labels(labels)
    progress(0.05, "labels read")
    preds = mmscan_io.load_predictions(predictions, labels_data.index)
    progress(0.25, "predictions read")
    xp = _xp.backend()
    chunk = GPU_CHUNK_PAIRS if _xp.device_name() == "gpu" else DEFAULT_CHUNK_PAIRS
    values = score_arrays(labels_data, preds, xp, chunk, progress)
    warnings = []
    if preds.missing:
        warnings.append(
            f"{len(preds.missing)} sample(s) of the labels have no predictions and "
            "score 0 (first: {})".format(preds.missing[0])
        )
    progress(1.0, "done")
    return make_result(
        track=TRACK.name,
        scorer_version=TRACK.scorer_version,
        labels_sha256=sha256_file(mmscan_io.labels_file(Path(labels))),
        predictions_sha256=sha256_file(Path(predictions)),
        metrics=values["metrics"],
        breakdown=values["breakdown"],
        details=values["details"],
        warnings=warnings,
    )


def score_arrays(
    labels: mmscan_io.Labels,
    preds: mmscan_io.Predictions,
    xp: Any,
    chunk_pairs: int = DEFAULT_CHUNK_PAIRS,
    progress: Progress = no_progress,
) -> dict[str, Any]:
    """Metrics, breakdown and details from loaded labels and predictions."""
    scored = labels.gt_count > 0
    # Scored samples are renumbered 0..S-1 in label order; predictions of
    # samples without ground truth are dropped (the devkit skips them).
    new_index = np.cumsum(scored) - 1
    keep = scored[preds.sample]
    pred_sample_h = new_index[preds.sample[keep]]
    gt_count_h = labels.gt_count[scored]
    n_samples = int(gt_count_h.shape[0])
    group_h = labels.group[scored]

    pred_sample = xp.asarray(pred_sample_h)
    order = grounding.sort_predictions(pred_sample, xp.asarray(preds.scores[keep]))
    pred_sample = xp.take(pred_sample, order)
    pred_score = xp.take(xp.asarray(preds.scores[keep]), order)
    pred_boxes = xp.asarray(preds.boxes[keep])
    gt_boxes = xp.asarray(labels.gt_boxes)
    gt_count = xp.asarray(gt_count_h)
    pred_count = xp.asarray(np.bincount(pred_sample_h, minlength=n_samples))
    pred_start = _xp.cumsum64(pred_count) - xp.astype(pred_count, xp.float64)
    pred_start = xp.astype(pred_start, xp.int64)
    gt_start = xp.astype(_xp.cumsum64(gt_count) - xp.astype(gt_count, xp.float64), xp.int64)

    # IoU of each prediction with each ground-truth box of its sample: (N, G).
    n_cols = int(gt_count_h.max()) if n_samples else 1
    n_pred = int(pred_sample.shape[0])
    cols = xp.arange(n_cols)
    valid = cols[None, :] < xp.take(gt_count, pred_sample)[:, None]
    gt_index = xp.take(gt_start, pred_sample)[:, None] + cols[None, :]
    pred_index = xp.broadcast_to(order[:, None], valid.shape)
    iou = xp.full((n_pred * n_cols,), -1.0, dtype=xp.float64)
    flat_valid = xp.reshape(valid, (-1,))
    if n_pred:
        iou[flat_valid] = indexed_iou3d(
            pred_boxes,
            gt_boxes,
            xp.reshape(pred_index, (-1,))[flat_valid],
            xp.reshape(gt_index, (-1,))[flat_valid],
            chunk_pairs,
        )
    iou = xp.reshape(iou, (n_pred, n_cols))
    progress(0.8, "IoU computed")
    best_iou, best_col = grounding.best_match(iou)

    per_sample: dict[str, Any] = {}
    pooled: dict[str, dict[str, float | None]] = {g: {} for g in mmscan_io.GROUPS}
    sample_group = xp.asarray(group_h)
    pred_group = xp.take(sample_group, pred_sample) if n_pred else xp.zeros((0,), dtype=xp.int64)
    for t in THRESHOLDS:
        tp = grounding.true_positives(best_iou, best_col, pred_sample, pred_start, n_cols, t)
        values = grounding.sample_metrics(tp, pred_sample, pred_start, pred_count, gt_count, TOP_K)
        per_sample[f"AP_sample@{t}"] = values["AP"]
        per_sample[f"AR@{t}"] = values["AR"]
        for k in TOP_K:
            per_sample[f"gTop-{k}@{t}"] = values[f"gTop-{k}"]
        for gi, g in enumerate(mmscan_io.GROUPS):
            in_group = group_h == gi
            if not in_group.any():
                pooled[g][f"AP_box@{t}"] = pooled[g][f"AR_box@{t}"] = None
                continue
            mask = pred_group == gi
            ap, ar = grounding.pooled_ap(tp[mask], pred_score[mask], int(gt_count_h[in_group].sum()))
            pooled[g][f"AP_box@{t}"], pooled[g][f"AR_box@{t}"] = ap, ar

    host = {key: _xp.to_numpy(value) for key, value in per_sample.items()}
    metrics: dict[str, float | None] = {}
    breakdown: dict[str, dict[str, Any]] = {}
    group_sizes = np.bincount(group_h, minlength=len(mmscan_io.GROUPS))
    for gi, g in enumerate(mmscan_io.GROUPS):
        in_group = group_h == gi
        entry: dict[str, Any] = {}
        for key in TRACK.metrics:
            if key in host:
                entry[key] = float(host[key][in_group].mean()) if in_group.any() else None
            else:
                entry[key] = pooled[g][key]
        entry["count"] = int(in_group.sum())
        breakdown[g] = entry
    for key in TRACK.metrics:
        if n_samples == 0:
            metrics[key] = None
        elif key in host:
            metrics[key] = float(host[key].mean())
        else:  # AP_box, AR_box: groups weighted by their number of samples
            metrics[key] = float(
                sum(
                    breakdown[g][key] * group_sizes[gi]
                    for gi, g in enumerate(mmscan_io.GROUPS)
                    if group_sizes[gi]
                )
                / n_samples
            )
    details = {
        "samples": n_samples,
        "samples_without_ground_truth": int((~scored).sum()),
        "ground_truth_boxes": int(gt_count_h.sum()),
        "predicted_boxes": n_pred,
        "num_gt": {g: int(gt_count_h[group_h == gi].sum()) for gi, g in enumerate(mmscan_io.GROUPS)},
        "iou": "exact oriented-box volume ratio, float64",
    }
    return {"metrics": metrics, "breakdown": breakdown, "details": details}


TRACK = Track(
    name="mmscan-vg",
    title="MMScan visual grounding",
    scorer_version="1.0.0",
    metrics=FAMILIES[0] + FAMILIES[1],
    primary_metric="gTop-1@0.25",
    groups=mmscan_io.GROUPS,
    group_label="Category",
    upload_suffixes=(".json", ".json.gz"),
    max_upload_bytes=512 * 1024 * 1024,
    prepare_labels=prepare_labels,
    validate=validate,
    score=score,
    manifest=manifest,
    wants_gpu=True,
    description=(
        "3D visual grounding on MMScan: for each prompt, ranked 9-DoF boxes; gTop-k, AP and AR "
        "at IoU 0.25 and 0.5. IoU is the exact volume ratio of oriented boxes (the official "
        "devkit's pytorch3d kernel is wrong for close, nearly parallel faces)."
    ),
    metric_families=FAMILIES,
)
