"""OpenScan: generalized open-vocabulary 3D instance segmentation (METRICS.md, "OpenScan").

Modules: ``labels`` (hidden labels, cache, manifest), ``common`` (what the
prediction readers produce, shared checks), ``members`` (budgeted zip member
reads), ``official_zip``/``text_zip``/``compact`` (the three prediction
forms), ``reader`` (tells them apart), ``score`` (scoring and validation).
"""

from __future__ import annotations

from pathlib import Path as _Path

from evaluation_workers.plugin import DetailRows, Track
from evaluation_workers.synthetic.samples import samples_of
from evaluation_workers.tracks.openscan import intervals, labels
from evaluation_workers.tracks.openscan.labels import ASPECTS
from evaluation_workers.tracks.openscan.reader import MAX_INFLATED_BYTES
from evaluation_workers.tracks.openscan.score import SCORER_VERSION, class_keys, score, validate

__all__ = ["TRACK", "class_keys", "score", "validate"]

COMPACT_SUFFIX = ".npz"

MANIFEST_SCHEMA = {
    "type": "object",
    "properties": {
        "track": {"const": "openscan"},
        "vocabulary": {"type": "object", "additionalProperties": {"type": "array", "items": {"type": "string"}},
                       "description": "Each aspect's attributes; a class id is a position in its list, from 1"},
        "aspects": {"type": "object", "additionalProperties": {"type": "array", "items": {"type": "string"}},
                    "description": "The scenes of each aspect"},
        "scenes": {"type": "object", "additionalProperties": {"type": "integer"},
                   "description": "Vertex count of each scene"}},
}


def write_demo(folder: _Path, split: str) -> tuple[_Path, _Path]:
    """Small synthetic labels and predictions for a demo split (``evaluation_workers.synthetic``)."""
    from evaluation_workers.synthetic import openscan as synthetic

    return synthetic.write_demo(folder, split)


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
        "Generalized open-vocabulary 3D instance segmentation on ScanNet200 val: "
        "8 linguistic aspects, 341 attributes. ScanNet's instance AP per aspect; semantic "
        "mIoU/mAcc when per-vertex predictions are given."
    ),
    metric_families=(("AP", "AP50", "AP25"), ("mIoU", "mAcc")),
    unit=intervals.UNIT,
    statistic=intervals.statistic,
    units_of=intervals.units_of,
    width=intervals.width,
    stack=intervals.stack,
    min_scenes=intervals.MIN_SCENES,
    max_inflated_bytes=MAX_INFLATED_BYTES,
    per_class_keys=("per_class", "semantic_per_class"),
    detail_rows=DetailRows("per_class", "Attribute", ("AP", "AP50", "AP25")),
    chart="radar",
    format_doc=_Path(__file__).resolve().parents[3] / "docs" / "openscan-format.md",
    manifest_schema=MANIFEST_SCHEMA,
    samples=samples_of("openscan"),
    write_demo=write_demo,
)
