"""SQA3D situated question answering: exact match of cleaned answers (METRICS.md, "SQA3D").

Labels are the official pair of files of one split, side by side in a folder:
``v1_balanced_questions_<split>_scannetv2.json`` (``{"questions": [{"question_id",
"question", "scene_id", "situation", ...}]}``) and
``v1_balanced_sqa_annotations_<split>_scannetv2.json`` (``{"annotations":
[{"question_id", "answers": [{"answer"}, ...], ...}]}``).

Predictions are one answer per question, as a JSON list of
``{"question_id": int, "answer": str}``, a JSON object ``{"<question_id>":
"<answer>"}``, or JSON Lines of the list's objects. Items and lines are counted
from 1 in messages.
"""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from evaluation_workers.errors import LabelsError, PredictionFormatError, where
from evaluation_workers.metrics.answers import QUESTION_TYPES, clean_answer, match_answer, question_type
from evaluation_workers.results import make_result, sha256_file, sha256_tree
from evaluation_workers.tracks.base import Manifest, Progress, Result, Track

QUESTIONS_PATTERN = re.compile(r"v1_balanced_questions_(?P<split>.+)_scannetv2\.json")
ANNOTATIONS_PATTERN = re.compile(r"v1_balanced_sqa_annotations_(?P<split>.+)_scannetv2\.json")
MAX_UPLOAD_BYTES = 50 * 2**20
_KEYS = ("question_id", "answer")
_INTEGER_KEY = re.compile(r"-?[0-9]+")
_UNKNOWN_SHOWN = 5


# Labels


@dataclass(frozen=True)
class SQA3DLabels:
    """One split's hidden labels, in the questions file's order.

    Attributes:
        question_ids: (Q,) question ids.
        types: (Q,) question types, each one of ``QUESTION_TYPES``.
        answers: (Q,) cleaned ground-truth answers of each question.
    """

    question_ids: list[int]
    types: list[str]
    answers: list[tuple[str, ...]]


def label_files(folder: Path) -> tuple[Path, Path]:
    """The questions and annotations files of a labels folder (exactly one of each, same split)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise LabelsError(f"Expected SQA3D labels to be a folder, but got {folder}")
    found: dict[str, list[Path]] = {"questions": [], "annotations": []}
    for path in sorted(folder.iterdir()):
        if QUESTIONS_PATTERN.fullmatch(path.name):
            found["questions"].append(path)
        elif ANNOTATIONS_PATTERN.fullmatch(path.name):
            found["annotations"].append(path)
    for kind, paths in found.items():
        if len(paths) != 1:
            raise LabelsError(f"{folder}: Expected exactly one "
                              f"v1_balanced_*{kind[:-1]}*_<split>_scannetv2.json, "
                              f"but got {len(paths)}: {[p.name for p in paths]}")
    questions, annotations = found["questions"][0], found["annotations"][0]
    q_split = QUESTIONS_PATTERN.fullmatch(questions.name)["split"]  # type: ignore[index]
    a_split = ANNOTATIONS_PATTERN.fullmatch(annotations.name)["split"]  # type: ignore[index]
    if q_split != a_split:
        raise LabelsError(f"{folder}: Expected questions and annotations of one split, "
                          f"but got {q_split!r} and {a_split!r}")
    return questions, annotations


def _load_list(path: Path, key: str) -> list[Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise LabelsError(f"{path}: cannot read JSON: {exc}") from exc
    if not isinstance(data, dict) or not isinstance(data.get(key), list):
        raise LabelsError(f"{path}: Expected an object with a list `{key}`, but got {_show(data)}")
    entries: list[Any] = data[key]
    return entries


def _label_id(path: Path, index: int, entry: Any) -> int:
    qid = entry.get("question_id") if isinstance(entry, dict) else None
    if not _is_int(qid):
        raise LabelsError(f"{path}: entry {index}: Expected `question_id` to be an integer, "
                          f"but got {_show(qid)}")
    return int(qid)  # type: ignore[arg-type]


def load_labels(folder: Path) -> SQA3DLabels:
    """Read, check and clean one split's labels; ``LabelsError`` on anything unusable."""
    questions_path, annotations_path = label_files(folder)
    questions = _load_list(questions_path, "questions")
    annotations = _load_list(annotations_path, "annotations")

    answers_by_id: dict[int, tuple[str, ...]] = {}
    for i, entry in enumerate(annotations):
        qid = _label_id(annotations_path, i, entry)
        raw = entry.get("answers")
        if (not isinstance(raw, list) or not raw
                or not all(isinstance(a, dict) and isinstance(a.get("answer"), str) for a in raw)):
            raise LabelsError(f"{annotations_path}: question {qid}: Expected `answers` to be a non-empty "
                              f"list of {{\"answer\": str}}, but got {_show(raw)}")
        cleaned = tuple(clean_answer(a["answer"]) for a in raw)
        if not all(c.split() for c in cleaned):
            # An empty answer would be contained in every prediction (EM_R).
            raise LabelsError(f"{annotations_path}: question {qid}: an answer is empty after cleaning")
        if qid in answers_by_id:
            raise LabelsError(f"{annotations_path}: question {qid} is annotated twice")
        answers_by_id[qid] = cleaned

    ids: list[int] = []
    types: list[str] = []
    for i, entry in enumerate(questions):
        qid = _label_id(questions_path, i, entry)
        if not isinstance(entry.get("question"), str):
            raise LabelsError(f"{questions_path}: question {qid}: Expected `question` to be a string, "
                              f"but got {_show(entry.get('question'))}")
        ids.append(qid)
        types.append(question_type(entry["question"]))
    if len(set(ids)) != len(ids):
        raise LabelsError(f"{questions_path}: some question ids appear twice")
    if set(ids) != set(answers_by_id):
        raise LabelsError(f"{folder}: Expected the same question ids in both files, but "
                          f"{len(set(ids) - set(answers_by_id))} questions have no annotation and "
                          f"{len(set(answers_by_id) - set(ids))} annotations have no question")
    return SQA3DLabels(question_ids=ids, types=types, answers=[answers_by_id[q] for q in ids])


def manifest(labels: Path) -> Manifest:
    """The public manifest: the split's question ids, nothing about answers."""
    ids = sorted(load_labels(labels).question_ids)
    return {"track": "sqa3d", "question_ids": ids, "count": len(ids)}


def prepare_labels(source: Path, dest: Path) -> Manifest:
    """Copy the official pair of files from ``source`` into ``dest``; return the manifest."""
    public = manifest(source)  # checks the files before anything is written
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    files = label_files(source)
    # Another split's files left in dest would make the folder ambiguous.
    stale = [p.name for p in dest.iterdir() if p.name not in {f.name for f in files}
             and (QUESTIONS_PATTERN.fullmatch(p.name) or ANNOTATIONS_PATTERN.fullmatch(p.name))]
    if stale:
        raise LabelsError(f"{dest}: Expected no other split's label files, but got {stale}")
    for path in files:
        shutil.copyfile(path, dest / path.name)
    return public


# Predictions


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _show(value: Any) -> str:
    """A short rendering of a submitted value for messages."""
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "a list"
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 40 else text[:37] + "..."


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    for key, value in pairs:
        if key in seen:
            raise PredictionFormatError(f"Expected each key once in an object, but got {_show(key)} twice")
        seen[key] = value
    return seen


def _decode(path: Path, name: str) -> str:
    size = path.stat().st_size
    if size == 0:
        raise PredictionFormatError(f"{name}: Expected a JSON list, a JSON object or JSON Lines, "
                                    "but got an empty file (0 bytes)")
    if size > MAX_UPLOAD_BYTES:
        raise PredictionFormatError(f"{name}: Expected at most {MAX_UPLOAD_BYTES // 2**20} MiB, "
                                    f"but got {size / 2**20:.1f} MiB")
    try:
        return path.read_bytes().decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise PredictionFormatError(f"{name}: Expected UTF-8 text, but got the byte "
                                    f"0x{exc.object[exc.start]:02x} at offset {exc.start}") from None


def _parse_json(text: str, location: str) -> Any:
    try:
        return json.loads(text, object_pairs_hook=_no_duplicate_keys)
    except PredictionFormatError as exc:
        raise PredictionFormatError(f"{location}: {exc.message}") from None
    except json.JSONDecodeError:
        raise
    except (ValueError, RecursionError) as exc:  # 5000-digit integers, deep nesting
        raise PredictionFormatError(f"{location}: Expected plain JSON values, but got {exc}") from None


def _records(text: str, name: str, jsonl: bool) -> tuple[str, list[tuple[str, Any]]]:
    """The submitted (location, record) pairs and the file's form: "list", "object" or "jsonl"."""
    if not jsonl:
        try:
            data = _parse_json(text, name)
        except json.JSONDecodeError as exc:
            if exc.msg != "Extra data":  # "Extra data": one value, then more, i.e. JSON Lines
                raise PredictionFormatError(f"{name}: Expected valid JSON, but got a syntax error at line "
                                            f"{exc.lineno}, column {exc.colno}: {exc.msg}") from None
            jsonl = True
        else:
            if isinstance(data, list):
                return "list", [(where(name, f"item {i}"), r) for i, r in enumerate(data, 1)]
            if isinstance(data, dict) and set(data) == set(_KEYS):  # a one-line JSON Lines file
                return "jsonl", [(where(name, "line 1"), data)]
            if isinstance(data, dict):
                return "object", [(where(name, f"key {_show(k)}"), (k, v)) for k, v in data.items()]
            raise PredictionFormatError(
                f"{name}: Expected a JSON list of {{\"question_id\": int, \"answer\": str}}, an object "
                f"{{\"<question_id>\": \"<answer>\"}} or JSON Lines, but got {_show(data)}")
    records = []
    for number, line in enumerate(text.split("\n"), 1):
        if not line.strip():
            continue
        location = where(name, f"line {number}")
        try:
            records.append((location, _parse_json(line, location)))
        except json.JSONDecodeError as exc:
            raise PredictionFormatError(f"{location}: Expected a JSON object, but got a syntax error at "
                                        f"column {exc.colno}: {exc.msg}") from None
    return "jsonl", records


def _id_and_answer(form: str, location: str, record: Any) -> tuple[int, Any]:
    if form == "object":
        key, answer = record
        if not _INTEGER_KEY.fullmatch(key):
            raise PredictionFormatError(f"{location}: Expected each key to be a question_id (an integer), "
                                        f"but got {_show(key)}")
        return int(key), answer
    if not isinstance(record, dict):
        raise PredictionFormatError(f"{location}: Expected an object "
                                    f"{{\"question_id\": int, \"answer\": str}}, but got {_show(record)}")
    missing = [k for k in _KEYS if k not in record]
    if missing:
        raise PredictionFormatError(f"{location}: Expected keys `question_id` and `answer`, "
                                    f"but `{missing[0]}` is missing")
    extra = [k for k in record if k not in _KEYS]
    if extra:
        raise PredictionFormatError(f"{location}: Expected only keys `question_id` and `answer`, "
                                    f"but got also {', '.join(f'`{k}`' for k in extra[:5])}")
    if not _is_int(record["question_id"]):
        raise PredictionFormatError(f"{location}: Expected `question_id` to be an integer, "
                                    f"but got {_show(record['question_id'])}")
    return record["question_id"], record["answer"]


def read_predictions(path: Path) -> tuple[str, dict[int, str]]:
    """The submitted answers by question id, and the file's form; ``PredictionFormatError`` otherwise."""
    path = Path(path)
    name = path.name
    text = _decode(path, name)
    form, records = _records(text, name, jsonl=name.endswith(".jsonl"))
    answers: dict[int, str] = {}
    first_seen: dict[int, str] = {}
    for location, record in records:
        qid, answer = _id_and_answer(form, location, record)
        if not isinstance(answer, str):
            raise PredictionFormatError(f"{location}: Expected `answer` to be a string, "
                                        f"but got {_show(answer)}")
        if qid in answers:
            raise PredictionFormatError(f"{location}: Expected each question once, but question {qid} "
                                        f"was already answered at {first_seen[qid].split(': ')[-1]}")
        answers[qid] = answer
        first_seen[qid] = location
    return form, answers


def _check_known(name: str, answers: dict[int, str], known: set[int]) -> None:
    unknown = sorted(set(answers) - known)
    if unknown:
        shown = ", ".join(map(str, unknown[:_UNKNOWN_SHOWN]))
        if len(unknown) > _UNKNOWN_SHOWN:
            shown += ", ..."
        raise PredictionFormatError(f"{name}: Expected question ids of this split only, but got "
                                    f"{len(unknown)} unknown: {shown}")


def _missing_warning(missing: int, count: int) -> list[str]:
    if not missing:
        return []
    return [f"{missing} of {count} questions have no prediction; they count as wrong."]


def validate(predictions: Path, manifest: Manifest) -> dict[str, Any]:
    """Check a predictions file against the public manifest (question ids only)."""
    ids = manifest.get("question_ids") if isinstance(manifest, dict) else None
    if not isinstance(ids, list) or not all(_is_int(q) for q in ids):
        raise LabelsError("Expected the SQA3D manifest to have a list of integer `question_ids`")
    form, answers = read_predictions(predictions)
    _check_known(Path(predictions).name, answers, set(ids))
    missing = len(ids) - len(answers)
    return {"format": form, "answered": len(answers), "missing": missing, "count": len(ids),
            "warnings": _missing_warning(missing, len(ids))}


# Scoring


def score(labels: Path, predictions: Path, progress: Progress) -> Result:
    """Score one predictions file: EM and EM_R overall and per question type."""
    progress(0.0, "reading labels")
    truth = load_labels(labels)
    progress(0.2, "reading predictions")
    _, answers = read_predictions(predictions)
    _check_known(Path(predictions).name, answers, set(truth.question_ids))
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
    missing = n - len(answers)
    warnings = _missing_warning(missing, n)
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
    )


DESCRIPTION = """\
Situated question answering in ScanNet scenes (SQA3D, test split: 3,519 questions). Each answer is \
cleaned exactly as LEO's `clean_answer` does (lower-case; punctuation removed; common typos fixed; \
numbers 0-20 and 23 written as words; 'a', 'an', 'the' dropped before a word) and compared with \
the cleaned ground truth. EM counts exact matches; EM_R (refined) also accepts an answer that \
contains the ground truth, or is contained in it, once spaces are removed. An answer that is empty \
after cleaning is wrong; a question without an answer is wrong. Breakdown by the question's first \
word (What, Is, How, Can, Which, Others), as in the SQA3D paper.

Upload a JSON list of {"question_id": int, "answer": str}, a JSON object {"<question_id>": "answer"}, \
or JSON Lines (.jsonl) with one {"question_id", "answer"} object per line."""

TRACK = Track(
    name="sqa3d",
    title="SQA3D",
    scorer_version="1.0.0",
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
)
