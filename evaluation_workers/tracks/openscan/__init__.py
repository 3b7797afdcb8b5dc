"""OpenScan: generalized open-vocabulary 3D instance segmentation (METRICS.md, "OpenScan").

Modules: ``labels`` (hidden labels, cache, manifest), ``common`` (what the
prediction readers produce, shared checks), ``members`` (budgeted zip member
reads), ``official_zip``/``text_zip``/``compact`` (the three prediction
forms), ``reader`` (tells them apart), ``score`` (scoring and validation).
"""

from __future__ import annotations

from evaluation_workers.tracks.base import Track
from evaluation_workers.tracks.openscan import intervals, labels
from evaluation_workers.tracks.openscan.labels import ASPECTS
from evaluation_workers.tracks.openscan.score import SCORER_VERSION, class_keys, score, validate

__all__ = ["TRACK", "class_keys", "score", "validate"]

COMPACT_SUFFIX = ".npz"

TRACK = Track(
    name="openscan",
    title="OpenScan",
    scorer_version=SCORER_VERSION,
    metrics=("AP", "AP50", "AP25", "mIoU", "mAcc"),
    primary_metric="AP",
    groups=ASPECTS,
    group_label="Aspect",
    upload_suffixes=(".zip", COMPACT_SUFFIX),
    max_upload_bytes=8 * 2**30,
    prepare_labels=labels.prepare_labels,
    validate=validate,
    score=score,
    manifest=labels.manifest,
    wants_gpu=True,
    description=(
        "Generalized open-vocabulary 3D instance segmentation on ScanNet200 val (312 scenes): "
        "8 linguistic aspects, 341 attributes. ScanNet's instance AP per aspect; semantic "
        "mIoU/mAcc when per-vertex predictions are given."
    ),
    metric_families=(("AP", "AP50", "AP25"), ("mIoU", "mAcc")),
    unit=intervals.UNIT,
    statistic=intervals.statistic,
    units_of=intervals.units_of,
    width=intervals.width,
    min_scenes=intervals.MIN_SCENES,
)
