"""ScanRefer single-object 3D visual grounding: Acc@0.25 and Acc@0.5 (METRICS.md, "ScanRefer").

A track plugin: the core finds ``TRACK`` through the ``scene_leaderboards.tracks``
entry point. Modules: ``labels`` (the labels JSON, the manifest), ``predictions``
(the two box forms and their messages), ``iou`` (the script's axis-aligned IoU,
vectorised), ``values`` (one field's checks), ``synthetic`` (generated labels and
predictions). Formats, limits, messages and deviations from the script: format.md.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from evaluation_workers.plugin import (
    PARTITION_FILE,
    DetailRows,
    LabelsError,
    Manifest,
    Progress,
    Result,
    Track,
    array_namespace,
    bootstrap,
    labels_sha256,
    make_result,
    sha256_file,
    stack_units,
    weighted,
)
from scanrefer_track.iou import paired_iou
from scanrefer_track.labels import ScanReferLabels, labels_file, load_labels, manifest, prepare_labels
from scanrefer_track.predictions import MAX_INFLATED_BYTES, MAX_UPLOAD_BYTES, check_known, read_submission
from scanrefer_track.samples import SAMPLES
from scanrefer_track.synthetic import write_demo

__all__ = [
    "FORMAT_DOC", "MANIFEST_SCHEMA", "MAX_INFLATED_BYTES", "MAX_UPLOAD_BYTES", "SAMPLE", "TRACK",
    "ScanReferLabels", "labels_file", "load_labels", "manifest", "prepare_labels", "score", "validate", "write_demo",
]

FORMAT_DOC = Path(__file__).with_name("format.md")
METRICS_DOC = Path(__file__).with_name("metrics.md")
SAMPLE = Path(__file__).with_name("sample_predictions.json")

THRESHOLDS = (0.25, 0.5)
METRICS = ("Acc@0.25", "Acc@0.5")
GROUPS = ("unique", "multiple")  # index = the labels' unique_multiple
OTHERS = ("in_others", "not_in_others")
UNIT = "description"

MANIFEST_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "The public facts of a ScanRefer labels version: which descriptions it has, never boxes or flags.",
    "required": ["track", "descriptions", "count", "scenes"],
    "properties": {
        "track": {"type": "string", "enum": ["scanrefer"]},
        "descriptions": {
            "type": "array",
            "description": "Each description's [scene_id, object_id, ann_id], as strings, in the labels' order.",
            "items": {"type": "array", "items": {"type": "string"}, "minItems": 3, "maxItems": 3},
        },
        "count": {"type": "integer", "minimum": 0, "description": "How many descriptions."},
        "scenes": {"type": "array", "items": {"type": "string"},
                   "description": "The scene ids, sorted (what intervals and partitions resample)."},
    },
}


def labels_checksum(labels: Path) -> str:
    """The checksum the site recorded for these labels (the core's rule, ``labels_sha256``): of the labels
    file a maintainer loaded, which ``prepare_labels`` copies as it is, or of the prepared folder where it
    also holds a public subset (``PARTITION_FILE``), as the site hashes it then."""
    labels = Path(labels)
    if labels.is_dir() and (labels / PARTITION_FILE).is_file():
        return labels_sha256(labels)
    return labels_sha256(labels_file(labels))


def _missing_warning(missing: int, count: int) -> list[str]:
    if not missing:
        return []
    return [f"{missing:,} of {count:,} descriptions have no prediction; they count as misses "
            "(ScanRefer's script would leave them out of the denominator)."]


def validate(predictions: Path, manifest: Manifest) -> dict[str, Any]:
    """Check a predictions file against the public manifest (the description triples only)."""
    triples = manifest.get("descriptions") if isinstance(manifest, dict) else None
    if not isinstance(triples, list) or not all(isinstance(t, list) and len(t) == 3 for t in triples):
        raise LabelsError("Expected the ScanRefer manifest to have a list `descriptions` of "
                          "[scene_id, object_id, ann_id]")
    known = {(str(s), str(o), str(a)) for s, o, a in triples}
    submission = read_submission(predictions, descriptions=len(known))
    check_known(Path(predictions).name, submission.keys, known)
    missing = len(known) - len(submission.keys)
    return {"format": submission.form, "predicted": len(submission.keys), "missing": missing, "count": len(known),
            "warnings": submission.warnings + _missing_warning(missing, len(known))}


def units_of(outcomes: dict[str, np.ndarray]) -> int:
    return int(outcomes["group"].shape[0])


def groups_of(outcomes: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The descriptions of each subset (an interval per subset needs enough scenes)."""
    return bootstrap.groups_of(outcomes["group"], GROUPS)


def outcomes_statistic(outcomes: dict[str, np.ndarray]) -> bootstrap.Statistic:
    """Acc@0.25 and Acc@0.5, overall and per subset, of a resample given as (b, n) description weights.

    ``outcomes``: ``hit25``, ``hit50`` (n,) bool per description, ``group`` (n,) index
    into GROUPS. A resample's accuracy is its weighted mean of hits.
    """
    hits_h = np.stack([outcomes["hit25"], outcomes["hit50"]], axis=1).astype(np.float64)  # (n, 2)
    onehot_h = (outcomes["group"][:, None] == np.arange(len(GROUPS))[None, :]).astype(np.float64)  # (n, 2)
    by_group_h = (onehot_h[:, :, None] * hits_h[:, None, :]).reshape(hits_h.shape[0], -1)  # (n, 2*2)
    cache: dict[int, tuple[Any, Any, Any]] = {}

    def statistic(counts: Any) -> dict[str, Any]:
        xp = array_namespace(counts)
        if id(xp) not in cache:
            cache[id(xp)] = (xp.asarray(hits_h), xp.asarray(onehot_h), xp.asarray(by_group_h))
        hits, onehot, by_group = cache[id(xp)]
        total = xp.sum(counts, axis=1)[:, None]
        overall = weighted.weighted_ratio(xp, counts @ hits, total)  # (b, 2)
        per_group = counts @ onehot  # (b, 2)
        group_hits = xp.reshape(counts @ by_group, (counts.shape[0], len(GROUPS), len(METRICS)))
        ratio = weighted.weighted_ratio(xp, group_hits, per_group[:, :, None])
        out = {metric: overall[:, m] for m, metric in enumerate(METRICS)}
        for g, group in enumerate(GROUPS):
            for m, metric in enumerate(METRICS):
                out[f"{group}/{metric}"] = ratio[:, g, m]
        return out

    return statistic


def _accuracy(hits: int, count: int) -> float | None:
    """hits / count as the script divides them (Python ints), None where there is no description."""
    return hits / count if count else None


def _values(mask: np.ndarray, hits: np.ndarray) -> dict[str, Any]:
    count = int(mask.sum())
    return {**{metric: _accuracy(int(hits[mask, m].sum()), count) for m, metric in enumerate(METRICS)},
            "count": count}


def score(labels: Path, predictions: Path, progress: Progress, outcomes: dict[str, Any] | None = None) -> Result:
    """Score one predictions file: Acc@0.25 and Acc@0.5 overall, per subset and per cell.

    ``outcomes``, when given, is filled with the per-description outcomes
    (``outcomes_statistic``); they stay on the worker (``evaluation_workers.outcomes``).
    """
    progress(0.0, "reading labels")
    truth = load_labels(labels)
    position = {key: i for i, key in enumerate(truth.keys)}
    n = len(truth.keys)
    progress(0.2, "reading predictions")
    submission = read_submission(predictions, descriptions=n)
    check_known(Path(predictions).name, submission.keys, position)
    progress(0.5, "computing IoU")

    at = np.fromiter((position[k] for k in submission.keys), dtype=np.int64, count=len(submission.keys))
    iou = paired_iou(submission.pred_lo, submission.pred_hi, truth.gt_lo[at], truth.gt_hi[at])
    hits = np.zeros((n, len(THRESHOLDS)), dtype=bool)  # a description without a prediction is a miss
    hits[at] = np.asarray(iou)[:, None] >= np.asarray(THRESHOLDS)[None, :]

    progress(0.8, "summing up")
    everything = np.ones(n, dtype=bool)
    subsets = {"unique": ~truth.multiple, "multiple": truth.multiple, "overall": everything}
    in_others = {"in_others": truth.others, "not_in_others": ~truth.others}
    breakdown = {group: _values(subsets[group], hits) for group in GROUPS}
    cells = {f"{subset}/{flag}": _values(subsets[subset] & members, hits)
             for subset in (*GROUPS, "overall") for flag, members in in_others.items()}
    overall = _values(everything, hits)

    progress(0.9, "confidence intervals")
    scene_names, scenes = bootstrap.scene_index(truth.scene_ids)
    group_index = truth.multiple.astype(np.int64)
    per_description = {"hit25": hits[:, 0].copy(), "hit50": hits[:, 1].copy(), "group": group_index,
                       "scene": scenes}
    if outcomes is not None:
        outcomes.update(per_description)
    later = bootstrap.deferred(n)
    uncertainty = bootstrap.intervals(outcomes_statistic(per_description), n, UNIT,
                                      unit_ids=["/".join(k) for k in truth.keys], scenes=scenes,
                                      scene_names=scene_names, groups=groups_of(per_description),
                                      resamples=0 if later else None)
    missing = n - len(submission.keys)
    progress(1.0, "done")
    return make_result(
        track=TRACK.name,
        scorer_version=TRACK.scorer_version,
        labels_sha256=labels_checksum(labels),
        predictions_sha256=sha256_file(predictions),
        metrics={metric: overall[metric] for metric in METRICS},
        breakdown=breakdown,
        details={"cells": cells, "predicted": len(submission.keys), "missing": missing, "form": submission.form},
        warnings=submission.warnings + _missing_warning(missing, n),
        uncertainty=uncertainty,
        deferred={"resamples": bootstrap.resamples_setting(), "unit": "scene"} if later else None,
    )


DESCRIPTION = """\
Single-object 3D visual grounding on ScanNet scenes (ScanRefer, Chen et al., ECCV 2020): for each \
description, the box of the one object it refers to. A description is right at t when the \
axis-aligned IoU of the predicted box with the target's box is at least t (ScanRefer's box3d_iou, \
1e-8 added to the union). Acc@0.25 and Acc@0.5 are the fractions of the split's descriptions \
that are right, overall and for targets whose class is unique in the scene ("unique") or not \
("multiple"); a description without a prediction is a miss.

Upload the benchmark's own pred.json, a JSON list of {"scene_id", "object_id", "ann_id", \
"bbox": [[x, y, z] x 8]}, or the same with "box": [cx, cy, cz, dx, dy, dz] (centre and full \
sizes, axis-aligned) instead of "bbox"."""

TRACK = Track(
    name="scanrefer",
    title="ScanRefer",
    scorer_version="1.0.0",
    metrics=METRICS,
    primary_metric="Acc@0.25",
    groups=GROUPS,
    group_label="Subset",
    upload_suffixes=(".json",),
    max_upload_bytes=MAX_UPLOAD_BYTES,
    prepare_labels=prepare_labels,
    validate=validate,
    score=score,
    manifest=manifest,
    metric_families=(METRICS,),
    description=DESCRIPTION,
    unit=UNIT,
    statistic=outcomes_statistic,
    units_of=units_of,
    scenes_of=bootstrap.scenes_of,
    stack=stack_units,
    groups_of=groups_of,
    max_inflated_bytes=MAX_INFLATED_BYTES,
    detail_rows=DetailRows("cells", "Cell"),
    per_class_keys=("cells",),
    format_doc=FORMAT_DOC,
    metrics_doc=METRICS_DOC,
    manifest_schema=MANIFEST_SCHEMA,
    samples=SAMPLES,
    write_demo=write_demo,
)
