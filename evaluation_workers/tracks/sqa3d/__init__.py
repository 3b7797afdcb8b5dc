"""SQA3D situated question answering: exact match of cleaned answers (METRICS.md, "SQA3D").

Modules: ``labels`` (the official pair of label files), ``predictions`` (the
three accepted JSON forms and their messages), ``values`` (how values are
shown). Formats, limits and messages: docs/sqa3d-format.md.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from evaluation_workers.plugin import (
    QUESTION_TYPES,
    LabelsError,
    Manifest,
    Progress,
    Result,
    ScoringProtocol,
    Track,
    array_namespace,
    bootstrap,
    clean_answer,
    make_result,
    match_answer,
    sha256_file,
    sha256_tree,
    stack_units,
    weighted,
)
from evaluation_workers.synthetic.samples import samples_of
from evaluation_workers.tracks.sqa3d.labels import (
    ANNOTATIONS_PATTERN,
    QUESTIONS_PATTERN,
    SQA3DLabels,
    label_files,
    load_labels,
    manifest,
    prepare_labels,
)
from evaluation_workers.tracks.sqa3d.predictions import (
    MAX_UPLOAD_BYTES,
    check_known,
    read_predictions,
    read_submission,
)
from evaluation_workers.tracks.sqa3d.values import is_int

__all__ = [
    "ANNOTATIONS_PATTERN", "MAX_UPLOAD_BYTES", "QUESTIONS_PATTERN", "SQA3DLabels", "TRACK", "label_files",
    "load_labels", "manifest", "prepare_labels", "read_predictions", "read_submission", "score", "validate",
]


def _missing_warning(missing: int, count: int) -> list[str]:
    if not missing:
        return []
    return [f"{missing} of {count} questions have no prediction; they count as wrong."]


def validate(predictions: Path, manifest: Manifest) -> dict[str, Any]:
    """Check a predictions file against the public manifest (question ids only)."""
    ids = manifest.get("question_ids") if isinstance(manifest, dict) else None
    if not isinstance(ids, list) or not all(is_int(q) for q in ids):
        raise LabelsError("Expected the SQA3D manifest to have a list of integer `question_ids`")
    known = set(ids)
    form, answers, notes = read_submission(predictions, max_answers=len(known))
    check_known(Path(predictions).name, answers, known)
    missing = len(ids) - len(answers)
    return {"format": form, "answered": len(answers), "missing": missing, "count": len(ids),
            "warnings": notes + _missing_warning(missing, len(ids))}


UNIT = "question"


def units_of(outcomes: dict[str, np.ndarray]) -> int:
    return int(outcomes["em"].shape[0])


def outcomes_statistic(outcomes: dict[str, np.ndarray]) -> bootstrap.Statistic:
    """EM and EM_R, overall and per type, of a resample given as (b, n) question counts.

    ``outcomes``: ``em``, ``em_r`` (n,) bool per question, ``type`` (n,) index
    into QUESTION_TYPES. A resample's EM is its counts-weighted mean.
    """
    hits_h = np.stack([outcomes["em"], outcomes["em_r"]], axis=1).astype(np.float64)  # (n, 2)
    onehot_h = (outcomes["type"][:, None] == np.arange(len(QUESTION_TYPES))[None, :]).astype(np.float64)
    by_type_h = (onehot_h[:, :, None] * hits_h[:, None, :]).reshape(hits_h.shape[0], -1)  # (n, 6*2)
    cache: dict[int, tuple[Any, Any, Any]] = {}

    def statistic(counts: Any) -> dict[str, Any]:
        xp = array_namespace(counts)
        if id(xp) not in cache:
            cache[id(xp)] = (xp.asarray(hits_h), xp.asarray(onehot_h), xp.asarray(by_type_h))
        hits, onehot, by_type = cache[id(xp)]
        total = xp.sum(counts, axis=1)[:, None]
        overall = counts @ hits / total  # (b, 2)
        per_type = counts @ onehot  # (b, 6)
        type_hits = xp.reshape(counts @ by_type, (counts.shape[0], len(QUESTION_TYPES), 2))
        ratio = weighted.weighted_ratio(xp, type_hits, per_type[:, :, None])
        out = {"EM": overall[:, 0], "EM_R": overall[:, 1]}
        for g, group in enumerate(QUESTION_TYPES):
            out[f"{group}/EM"], out[f"{group}/EM_R"] = ratio[:, g, 0], ratio[:, g, 1]
        return out

    return statistic


def score(labels: Path, predictions: Path, progress: Progress, outcomes: dict[str, Any] | None = None) -> Result:
    """Score one predictions file: EM and EM_R overall and per question type.

    ``outcomes``, when given, is filled with the per-question outcomes
    (``outcomes_statistic``); they stay on the worker (``evaluation_workers.outcomes``).
    """
    progress(0.0, "reading labels")
    truth = load_labels(labels)
    progress(0.2, "reading predictions")
    known = set(truth.question_ids)
    _, answers, notes = read_submission(predictions, max_answers=len(known))
    check_known(Path(predictions).name, answers, known)
    progress(0.4, "matching answers")

    n = len(truth.question_ids)
    em = np.zeros(n, dtype=bool)
    em_r = np.zeros(n, dtype=bool)
    empty = 0
    for i, (qid, gts) in enumerate(zip(truth.question_ids, truth.answers)):
        pred = answers.get(qid)
        if pred is None:
            continue
        cleaned = clean_answer(pred)
        empty += not cleaned.split()
        em[i], em_r[i] = match_answer(cleaned, gts)

    progress(0.9, "summing up")
    type_index = np.array([QUESTION_TYPES.index(t) for t in truth.types], dtype=np.int64)
    counts = np.bincount(type_index, minlength=len(QUESTION_TYPES))
    em_hits = np.bincount(type_index, weights=em, minlength=len(QUESTION_TYPES))
    em_r_hits = np.bincount(type_index, weights=em_r, minlength=len(QUESTION_TYPES))
    breakdown = {
        group: {"EM": em_hits[g] / counts[g] if counts[g] else None,
                "EM_R": em_r_hits[g] / counts[g] if counts[g] else None,
                "count": int(counts[g])}
        for g, group in enumerate(QUESTION_TYPES)
    }
    progress(0.95, "confidence intervals")
    scene_names, scenes = bootstrap.scene_index(truth.scene_ids)
    per_question = {"em": em, "em_r": em_r, "type": type_index, "scene": scenes}
    if outcomes is not None:
        outcomes.update(per_question)
    later = bootstrap.deferred(n)
    # Deferred or not, the units are named: a partition's exact results come from the statistic (``partitions``).
    uncertainty = bootstrap.intervals(outcomes_statistic(per_question), n, UNIT, unit_ids=truth.question_ids,
                                      scenes=scenes, scene_names=scene_names, groups=bootstrap.groups_of(type_index, QUESTION_TYPES),
                                      resamples=0 if later else None)
    missing = n - len(answers)
    warnings = notes + _missing_warning(missing, n)
    if empty:
        warnings.append(f"{empty} predictions are empty after cleaning; they count as wrong.")
    progress(1.0, "done")
    return make_result(
        track=TRACK.name,
        scorer_version=TRACK.scorer_version,
        labels_sha256=sha256_tree(labels),
        predictions_sha256=sha256_file(predictions),
        metrics={"EM": em.mean() if n else None, "EM_R": em_r.mean() if n else None},
        breakdown=breakdown,
        details={"answered": len(answers), "missing": missing},
        warnings=warnings,
        uncertainty=uncertainty,
        deferred={"resamples": bootstrap.resamples_setting(), "unit": "scene"} if later else None,
    )


DESCRIPTION = """\
Situated question answering in ScanNet scenes (SQA3D). Each answer is \
cleaned exactly as LEO's `clean_answer` does (lower-case; punctuation removed; common typos fixed; \
numbers 0-20 and 23 written as words; 'a', 'an', 'the' dropped before a word) and compared with \
the cleaned ground truth. EM counts exact matches; EM_R (refined) also accepts an answer that \
contains the ground truth, or is contained in it, once spaces are removed. An answer that is empty \
after cleaning is wrong; a question without an answer is wrong. Breakdown by the question's first \
word (What, Is, How, Can, Which, Others), as in the SQA3D paper.

Upload a JSON list of {"question_id": int, "answer": str}, a JSON object {"<question_id>": "answer"}, \
or JSON Lines (.jsonl) with one {"question_id", "answer"} object per line."""

# This service scores the open answer; the SQA3D paper's Table 3 is the accuracy of a
# classifier over 706 answer candidates (its Section 2.2), a different protocol.
PROTOCOLS = (
    ScoringProtocol("open-answer-em", "EM on the open answer",
                    "The answer text is cleaned as LEO's clean_answer does and matched exactly with the "
                    "ground truth: this service's scorer."),
    ScoringProtocol("answer-classification-706", "706-way answer classification",
                    "The SQA3D paper's protocol: answers are picked among 706 answer candidates and exact "
                    "match is the classification accuracy (Table 3); not scored here."),
)

# The most a submission may inflate to (zip members, gzip), with room to spare:
#  3,519 answers, a few MB; 256 MiB is generous.
MAX_INFLATED_BYTES = 256 * 2**20
MANIFEST_SCHEMA = {
    "type": "object",
    "properties": {"track": {"const": "sqa3d"}, "question_ids": {"type": "array", "items": {"type": "integer"}},
                   "count": {"type": "integer"}, "scenes": {"type": "array", "items": {"type": "string"}}},
}


def write_demo(folder: Path, split: str) -> tuple[Path, Path]:
    """Small synthetic labels and predictions for a demo split (``evaluation_workers.synthetic``)."""
    from evaluation_workers.synthetic import sqa3d as synthetic

    return synthetic.write_demo(folder, split)


TRACK = Track(
    name="sqa3d",
    title="SQA3D",
    scorer_version="1.2.0",
    metrics=("EM", "EM_R"),
    primary_metric="EM",
    groups=QUESTION_TYPES,
    group_label="Question type",
    upload_suffixes=(".json", ".jsonl"),
    max_upload_bytes=MAX_UPLOAD_BYTES,
    prepare_labels=prepare_labels,
    validate=validate,
    score=score,
    manifest=manifest,
    metric_families=(("EM", "EM_R"),),
    description=DESCRIPTION,
    protocols=PROTOCOLS,
    unit=UNIT,
    statistic=outcomes_statistic,
    units_of=units_of,
    scenes_of=bootstrap.scenes_of,
    stack=stack_units,
    groups_of=lambda outcomes: bootstrap.groups_of(outcomes["type"], QUESTION_TYPES),
    max_inflated_bytes=MAX_INFLATED_BYTES,
    per_class_keys=(),
    format_doc=Path(__file__).resolve().parents[3] / "docs" / "sqa3d-format.md",
    manifest_schema=MANIFEST_SCHEMA,
    samples=samples_of("sqa3d"),
    write_demo=write_demo,
)
