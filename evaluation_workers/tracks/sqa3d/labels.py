"""Labels of the SQA3D track: the official pair of files of one split, side by side in a folder.

``v1_balanced_questions_<split>_scannetv2.json`` (``{"questions": [{"question_id",
"question", "scene_id", "situation", ...}]}``) and
``v1_balanced_sqa_annotations_<split>_scannetv2.json`` (``{"annotations":
[{"question_id", "answers": [{"answer"}, ...], ...}]}``).
"""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evaluation_workers.plugin import LabelsError, Manifest, clean_answer, question_type
from evaluation_workers.tracks.sqa3d.values import is_int as _is_int
from evaluation_workers.tracks.sqa3d.values import show as _show

QUESTIONS_PATTERN = re.compile(r"v1_balanced_questions_(?P<split>.+)_scannetv2\.json")
ANNOTATIONS_PATTERN = re.compile(r"v1_balanced_sqa_annotations_(?P<split>.+)_scannetv2\.json")


@dataclass(frozen=True)
class SQA3DLabels:
    """One split's hidden labels, in the questions file's order.

    Attributes:
        question_ids: (Q,) question ids.
        types: (Q,) question types, each one of ``QUESTION_TYPES``.
        answers: (Q,) cleaned ground-truth answers of each question.
        scene_ids: (Q,) the ScanNet scene of each question: the bootstrap's resampling unit.
    """

    question_ids: list[int]
    types: list[str]
    answers: list[tuple[str, ...]]
    scene_ids: list[str]


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
    scenes: list[str] = []
    for i, entry in enumerate(questions):
        qid = _label_id(questions_path, i, entry)
        if not isinstance(entry.get("question"), str):
            raise LabelsError(f"{questions_path}: question {qid}: Expected `question` to be a string, "
                              f"but got {_show(entry.get('question'))}")
        if not isinstance(entry.get("scene_id"), str) or not entry["scene_id"]:
            raise LabelsError(f"{questions_path}: question {qid}: Expected `scene_id` to be a scene id "
                              f"(the confidence intervals resample scenes), but got {_show(entry.get('scene_id'))}")
        ids.append(qid)
        types.append(question_type(entry["question"]))
        scenes.append(entry["scene_id"])
    if len(set(ids)) != len(ids):
        raise LabelsError(f"{questions_path}: some question ids appear twice")
    if set(ids) != set(answers_by_id):
        raise LabelsError(f"{folder}: Expected the same question ids in both files, but "
                          f"{len(set(ids) - set(answers_by_id))} questions have no annotation and "
                          f"{len(set(answers_by_id) - set(ids))} annotations have no question")
    return SQA3DLabels(question_ids=ids, types=types, answers=[answers_by_id[q] for q in ids], scene_ids=scenes)


def manifest(labels: Path) -> Manifest:
    """The public manifest: the split's question ids and scenes (as the public questions file has
    them), nothing about answers."""
    truth = load_labels(labels)
    ids = sorted(truth.question_ids)
    return {"track": "sqa3d", "question_ids": ids, "count": len(ids), "scenes": sorted(set(truth.scene_ids))}


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


