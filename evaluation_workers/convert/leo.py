"""LEO's ``results.json`` for SQA3D -> our SQA3D answers, joined to question ids.

LEO (embodied-generalist/embodied-generalist, ``evaluator/sqa3d_eval.py``)
writes a list of ``{"source", "scene_id", "anchor", "anchor_ort", "situation",
"instruction", "response_gt", "response_pred"}``: no question id. Its dataset
(``data/datasets.py: LeoSQA3D``) builds ``instruction`` as
``"USER: " + convert_person_view(question) + " ASSISTANT:"`` and, on the
test split, ``situation`` as the question's first situation. So each result is
joined to the public questions file of the split
(``v1_balanced_questions_<split>_scannetv2.json``) on (scene, situation,
question as LEO rewrote it); questions asked twice in one scene and
situation are taken in file order. ``response_gt`` is not used.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict, deque
from pathlib import Path
from typing import Any

from evaluation_workers.convert.common import ConvertError, read_json

FORM = "leo"
SUFFIXES = ()
_TOKEN = re.compile(r"\w+|[^\w\s]+")  # nltk.wordpunct_tokenize, which LEO calls
_PERSON = {"i": "you", "me": "you", "my": "your", "mine": "yours", "am": "are"}
_PROMPT = re.compile(r"^\s*USER:\s*(.*?)\s*ASSISTANT:\s*$", re.S)


def person_view(sentence: str) -> str:
    """LEO's ``convert_person_view`` (first person to second), then lower-cased for the join."""
    words = [_PERSON.get(w.lower(), w) for w in _TOKEN.findall(sentence)]
    return " ".join(words).lower()


def _question_of(instruction: str) -> str:
    """The question inside LEO's prompt, in the join's form (``person_view`` is idempotent, so a prompt
    that already holds the rewritten question and one that holds the original agree)."""
    match = _PROMPT.match(instruction)
    return person_view(match.group(1) if match else instruction)


def answers_of(results: Any, questions: Any, results_name: str, questions_name: str) -> tuple[list[dict[str, Any]], int]:
    """(answers, questions asked twice) for LEO's results and the split's questions file."""
    if not isinstance(questions, dict) or not isinstance(questions.get("questions"), list):
        raise ConvertError(f"{questions_name}: Expected SQA3D's questions file ({{\"questions\": [...]}}), "
                           f"but got {type(questions).__name__}")
    if not isinstance(results, list):
        raise ConvertError(f"{results_name}: Expected LEO's list of results, but got {type(results).__name__}")
    exact: dict[tuple[str, str, str], deque[int]] = defaultdict(deque)
    loose: dict[tuple[str, str], deque[int]] = defaultdict(deque)
    for q in questions["questions"]:
        key = (str(q["scene_id"]), person_view(str(q["question"])))
        exact[(key[0], " ".join(str(q["situation"]).split()), key[1])].append(int(q["question_id"]))
        loose[key].append(int(q["question_id"]))
    repeated = sum(len(v) - 1 for v in exact.values())
    answers, used = [], set()
    for n, item in enumerate(results, start=1):
        missing = [k for k in ("scene_id", "situation", "instruction", "response_pred")
                   if not isinstance(item, dict) or not isinstance(item.get(k), str)]
        if missing:
            raise ConvertError(f"{results_name}: item {n}: Expected a string `{missing[0]}` as LEO writes it, "
                               "but it is missing or not a string")
        question = _question_of(item["instruction"])
        ids = exact.get((item["scene_id"], " ".join(item["situation"].split()), question))
        if not ids:  # a situation other than the first (LEO picks one at random on train)
            ids = loose.get((item["scene_id"], question))
        while ids and ids[0] in used:
            ids.popleft()
        if not ids:
            raise ConvertError(f"{results_name}: item {n}: Expected a question of {questions_name} in scene "
                               f"{item['scene_id']}, but none matches {item['instruction'][:120]!r}")
        qid = ids.popleft()
        used.add(qid)
        answers.append({"question_id": qid, "answer": item["response_pred"]})
    return answers, repeated


def convert(source: Path, dest: Path, manifest: dict[str, Any] | None, *, questions: Path | None = None,
            **_: Any) -> str:
    if questions is None:
        raise ConvertError("LEO's results carry no question ids: give --questions "
                           "v1_balanced_questions_<split>_scannetv2.json (the public questions file of the split)")
    answers, repeated = answers_of(read_json(source), read_json(questions), Path(source).name, Path(questions).name)
    Path(dest).write_text(json.dumps(answers))
    note = f"; {repeated} questions asked twice in one scene and situation, matched in file order" if repeated else ""
    return f"{len(answers):,} LEO answers -> {dest} (SQA3D answers list){note}"
