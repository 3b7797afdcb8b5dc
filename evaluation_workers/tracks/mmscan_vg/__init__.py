"""MMScan visual grounding: ranked 9-DoF boxes per prompt, scored as in METRICS.md.

Differences from the official devkit, all stated in METRICS.md: the IoU is
the exact volume ratio (the devkit's pytorch3d kernel is off for close,
nearly parallel faces); sorts are stable; a prompt with no predictions scores
0 and counts (the devkit crashes).

Modules: ``labels`` (labels, shared constants, the ``Predictions`` arrays),
``json_form`` and ``binary_form`` (the two prediction forms), ``checks``
(rules both forms share), ``reader`` (which form a file is), ``score``
(blocks of prompts through the kernels of ``metrics.grounding``).
Formats and messages: docs/mmscan-vg-format.md.
"""

from __future__ import annotations

import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from evaluation_workers.plugin import (
    DEFAULT_CHUNK_PAIRS,
    DetailRows,
    Manifest,
    Progress,
    Result,
    ScoringProtocol,
    Track,
    backend,
    bootstrap,
    device_name,
    make_result,
    no_progress,
    sha256_file,
)
from evaluation_workers.synthetic.samples import samples_of
from evaluation_workers.tracks.mmscan_vg import intervals
from evaluation_workers.tracks.mmscan_vg.labels import (
    BOX_ARITY,
    GROUPS,
    MAX_BOXES_PER_PROMPT,
    SUB_CLASS_GROUP,
    Labels,
    Predictions,
    build_cache,
    labels_file,
    load_labels,
    parse_labels,
)
from evaluation_workers.tracks.mmscan_vg.reader import MAX_INFLATED_BYTES, load_predictions
from evaluation_workers.tracks.mmscan_vg.score import (
    BLOCK_PAIRS,
    FAMILIES,
    GPU_BLOCK_PAIRS,
    GPU_CHUNK_PAIRS,
    METRICS,
    score_arrays,
)

__all__ = [
    "BOX_ARITY", "GROUPS", "MAX_BOXES_PER_PROMPT", "SUB_CLASS_GROUP", "TRACK", "Labels", "Predictions",
    "labels_file", "load_labels", "load_predictions", "manifest", "prepare_labels", "score", "score_arrays",
    "validate",
]


def manifest(labels: Path) -> Manifest:
    """Public facts: sample ids and counts (never boxes)."""
    data = load_labels(labels)
    scored = data.gt_count > 0
    return {
        "track": "mmscan-vg",
        "sample_ids": data.sample_ids,
        "samples": len(data.sample_ids),
        "scored_samples": int(scored.sum()),
        "groups": {g: int((scored & (data.group == i)).sum()) for i, g in enumerate(GROUPS)},
        "scenes": [data.scans[i] for i in np.unique(data.scan_index[scored])],
        "max_boxes_per_prompt": MAX_BOXES_PER_PROMPT,
    }


def prepare_labels(source: Path, dest: Path) -> Manifest:
    """Copy the official labels file into ``dest`` and return the public manifest."""
    file = labels_file(source)
    parse_labels(file)  # refuse a bad file before copying it
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(file, dest / file.name)
    build_cache(dest)
    return manifest(dest)


def validate(predictions: Path, manifest_: Manifest) -> dict[str, Any]:
    """Check a predictions file against the public manifest only."""
    known = {sid: i for i, sid in enumerate(manifest_["sample_ids"])}
    preds = load_predictions(predictions, known)
    summary: dict[str, Any] = {
        "samples": preds.entries,
        "boxes": int(preds.boxes.shape[0]),
        "missing_samples": len(preds.missing),
    }
    if preds.warnings:
        summary["warnings"] = list(preds.warnings)
    return summary


def score(labels: Path, predictions: Path, progress: Progress = no_progress,
          outcomes: dict[str, Any] | None = None) -> Result:
    """Score a predictions file. ``labels`` is the official file or a prepared folder.

    ``outcomes``, when given, is filled with the per-prompt outcomes
    (``score._outcomes``); they stay on the worker (``evaluation_workers.outcomes``).

    ``labels_sha256`` is the checksum of the labels file itself, so the file
    and the folder ``prepare_labels`` wrote from it give the same value.
    """
    with ThreadPoolExecutor(2) as pool:  # the checksums are computed while the file is scored
        checksums = pool.submit(lambda: (sha256_file(labels_file(Path(labels))), sha256_file(Path(predictions))))
        result = _score(labels, predictions, progress, outcomes, pool)
        labels_sha, predictions_sha = checksums.result()
    return make_result(track=TRACK.name, scorer_version=TRACK.scorer_version, labels_sha256=labels_sha,
                       predictions_sha256=predictions_sha, **result)


def _score(labels: Path, predictions: Path, progress: Progress,
           outcomes: dict[str, Any] | None = None, side: ThreadPoolExecutor | None = None) -> dict[str, Any]:
    """``side``: a pool for the bootstrap's imports, started once the predictions are read: then
    they overlap the IoU threads' NumPy work (during the JSON parse they would only wait for the
    GIL, which simdjson holds)."""
    labels_data = load_labels(labels)
    progress(0.05, "labels read")
    preds = load_predictions(predictions, labels_data.index)
    progress(0.25, "predictions read")
    if side is not None:
        side.submit(bootstrap.warm_up)
    xp = backend()
    gpu = device_name() == "gpu"
    per_prompt: dict[str, Any] = {}
    values = score_arrays(labels_data, preds, xp, GPU_CHUNK_PAIRS if gpu else DEFAULT_CHUNK_PAIRS, progress,
                          GPU_BLOCK_PAIRS if gpu else BLOCK_PAIRS, per_prompt)
    progress(0.95, "confidence intervals")
    scored = labels_data.gt_count > 0
    # The scored prompts' scans, numbered in sorted order (a scan without a scored prompt is no scene here).
    drawn, scenes = np.unique(labels_data.scan_index[scored], return_inverse=True)
    per_prompt["scene"] = scenes.astype(np.int64).reshape(-1)
    if outcomes is not None:
        outcomes.update(per_prompt)
    later = bootstrap.deferred(intervals.entries(per_prompt))
    # Deferred or not, the units are named: a partition's exact results come from the statistic
    # (``partitions``); resampling waits for the follow-up.
    uncertainty = bootstrap.intervals(
        intervals.statistic(per_prompt), intervals.units_of(per_prompt), intervals.UNIT, xp=xp,
        width=intervals.width(per_prompt), unit_ids=[s for s, keep in zip(labels_data.sample_ids, scored) if keep],
        scenes=per_prompt["scene"], scene_names=[labels_data.scans[i] for i in drawn],
        groups=intervals.groups_of(per_prompt), resamples=0 if later else None)
    warnings = list(preds.warnings)
    if preds.missing:
        warnings.append(
            f"{len(preds.missing)} sample(s) of the labels have no predictions and "
            "score 0 (first: {})".format(preds.missing[0])
        )
    progress(1.0, "done")
    return {"metrics": values["metrics"], "breakdown": values["breakdown"], "details": values["details"],
            "warnings": warnings, "uncertainty": uncertainty,
            "deferred": {"resamples": bootstrap.resamples_setting(), "unit": "scene"} if later else None}


# This service's IoU is exact; numbers printed by the devkit (its README's tables) used
# pytorch3d's box3d_overlap, which is off for close, nearly parallel faces (METRICS.md).
PROTOCOLS = (
    ScoringProtocol("exact-iou", "exact oriented-box IoU",
                    "Boxes matched with the exact IoU of oriented boxes, in float64: this service's scorer."),
    ScoringProtocol("devkit-iou", "devkit (pytorch3d) IoU",
                    "Numbers as the MMScan devkit prints them, with pytorch3d's box3d_overlap as the IoU; it "
                    "differs from the exact IoU for close, nearly parallel faces. Not scored here."),
)

MANIFEST_SCHEMA = {
    "type": "object",
    "properties": {
        "track": {"const": "mmscan-vg"}, "sample_ids": {"type": "array", "items": {"type": "string"}},
        "samples": {"type": "integer"},
        "scored_samples": {"type": "integer", "description": "Prompts with at least one ground-truth box"},
        "groups": {"type": "object", "additionalProperties": {"type": "integer"},
                   "description": "Scored prompts per group"},
        "scenes": {"type": "array", "items": {"type": "string"}}, "max_boxes_per_prompt": {"type": "integer"}},
}


def label_counts(manifest: Manifest) -> tuple[int | None, int | None]:
    """(prompts, scenes) of a labels version: the prompts that are scored (those with a ground-truth
    box) and the scenes they are in (``manifest`` lists only those)."""
    scored, scenes = manifest.get("scored_samples"), manifest.get("scenes")
    return (scored if isinstance(scored, int) else None), (len(scenes) if isinstance(scenes, list) else None)


def write_demo(folder: Path, split: str) -> tuple[Path, Path]:
    """Small synthetic labels and predictions for a demo split (``evaluation_workers.synthetic``)."""
    from evaluation_workers.synthetic import mmscan_vg as synthetic

    return synthetic.write_demo(folder, split)


TRACK = Track(
    name="mmscan-vg",
    title="MMScan visual grounding",
    scorer_version="1.2.0",
    metrics=METRICS,
    primary_metric="gTop-1@0.25",
    groups=GROUPS,
    group_label="Category",
    upload_suffixes=(".json", ".json.gz", ".npz"),
    # The binary form of the full test split: 209,717 prompts x 256 float32 boxes is ~2.2 GB.
    max_upload_bytes=4 * 2**30,
    prepare_labels=prepare_labels,
    validate=validate,
    score=score,
    manifest=manifest,
    wants_gpu=True,
    description=(
        "3D visual grounding on MMScan: for each prompt, ranked 9-DoF boxes; gTop-k, AP and AR "
        "at IoU 0.25 and 0.5. IoU is the exact volume ratio of oriented boxes (the official "
        "devkit's pytorch3d kernel is wrong for close, nearly parallel faces). Upload JSON "
        "(optionally .json.gz) or, for the full test split, the binary .npz form."
    ),
    metric_families=FAMILIES,
    protocols=PROTOCOLS,
    unit=intervals.UNIT,
    statistic=intervals.statistic,
    units_of=intervals.units_of,
    width=intervals.width,
    scenes_of=bootstrap.scenes_of,
    groups_of=intervals.groups_of,
    stack=intervals.stack,
    max_inflated_bytes=MAX_INFLATED_BYTES,
    per_class_keys=("per_sub_class",),
    detail_rows=DetailRows("per_sub_class", "Sub-class", parents=SUB_CLASS_GROUP),
    format_doc=Path(__file__).resolve().parents[3] / "docs" / "mmscan-vg-format.md",
    manifest_schema=MANIFEST_SCHEMA,
    samples=samples_of("mmscan-vg"),
    write_demo=write_demo,
    counts=label_counts,
)
