"""SQA3D prediction files: one answer per question, in three JSON forms.

A JSON list of ``{"question_id": int, "answer": str}``, a JSON object
``{"<question_id>": "<answer>"}``, or JSON Lines of the list's objects. Other
keys in an item (``scene_id``, ``situation``, ...) are ignored and listed once
in the warnings. Items and lines are counted from 1 in messages. Limits: the
file is at most ``MAX_UPLOAD_BYTES``, UTF-8 (a BOM is allowed), nested at
most ``limits.MAX_JSON_DEPTH`` deep, and, given the split's question count, has
at most ``limits.entry_cap`` entries (counted before the file is parsed whole).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from evaluation_workers.plugin import PredictionFormatError, entries_past, entry_cap, loads_json, where
from evaluation_workers.tracks.sqa3d.values import is_int, show

MAX_UPLOAD_BYTES = 50 * 2**20
KEYS = ("question_id", "answer")
_INTEGER_KEY = re.compile(r"-?[0-9]+")
_UNKNOWN_SHOWN = 5
_KEYS_SHOWN = 10


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    for key, value in pairs:
        if key in seen:
            raise PredictionFormatError(f"Expected each key once in an object, but got {show(key)} twice")
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
        return loads_json(text, location, object_pairs_hook=_no_duplicate_keys)
    except PredictionFormatError as exc:
        if exc.message.startswith(location):  # the depth limit names the location itself
            raise
        raise PredictionFormatError(f"{location}: {exc.message}") from None


def _too_many(name: str, questions: int, what: str) -> PredictionFormatError:
    return PredictionFormatError(f"{name}: Expected at most {questions:,} answers (one per question of this split), "
                                 f"but got more than {entry_cap(questions):,} {what}")


def _lines(text: str) -> Iterator[tuple[int, str]]:
    """``enumerate(text.split("\n"), 1)`` one line at a time (2.5 million lines are 200 MB as a list)."""
    start = number = 0
    while start <= len(text):
        end = text.find("\n", start)
        end = len(text) if end < 0 else end
        number += 1
        yield number, text[start:end]
        start = end + 1


def _records(text: str, name: str, jsonl: bool, questions: int | None) -> tuple[str, list[tuple[str, Any]]]:
    """The submitted (location, record) pairs and the file's form: "list", "object" or "jsonl".

    ``questions``: the split's number of questions; a file with more than ``limits.entry_cap`` of
    entries is refused by their count before it is parsed whole.
    """
    cap = None if questions is None else entry_cap(questions)
    if not jsonl:
        if questions is not None and cap is not None:
            # An object holding `question_id` is one line of JSON Lines, counted below.
            past = entries_past(text, cap, stop_key="question_id")
            if past is not None:
                raise _too_many(name, questions, past)
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
            if isinstance(data, dict) and "question_id" in data:  # a one-line JSON Lines file
                return "jsonl", [(where(name, "line 1"), data)]
            if isinstance(data, dict):
                return "object", [(where(name, f"key {show(k)}"), (k, v)) for k, v in data.items()]
            raise PredictionFormatError(
                f"{name}: Expected a JSON list of {{\"question_id\": int, \"answer\": str}}, an object "
                f"{{\"<question_id>\": \"<answer>\"}} or JSON Lines, but got {show(data)}")
    records: list[tuple[str, Any]] = []
    for number, line in _lines(text):
        if not line.strip():
            continue
        if questions is not None and len(records) == cap:
            raise _too_many(name, questions, "lines")
        location = where(name, f"line {number}")
        try:
            records.append((location, _parse_json(line, location)))
        except json.JSONDecodeError as exc:
            raise PredictionFormatError(f"{location}: Expected a JSON object, but got a syntax error at "
                                        f"column {exc.colno}: {exc.msg}") from None
    return "jsonl", records


def _id_and_answer(form: str, location: str, record: Any) -> tuple[int, Any, list[str]]:
    """The question id, the answer and the item's ignored keys."""
    if form == "object":
        key, answer = record
        if not _INTEGER_KEY.fullmatch(key):
            raise PredictionFormatError(f"{location}: Expected each key to be a question_id (an integer), "
                                        f"but got {show(key)}")
        return int(key), answer, []
    if not isinstance(record, dict):
        raise PredictionFormatError(f"{location}: Expected an object "
                                    f"{{\"question_id\": int, \"answer\": str}}, but got {show(record)}")
    missing = [k for k in KEYS if k not in record]
    if missing:
        raise PredictionFormatError(f"{location}: Expected keys `question_id` and `answer`, "
                                    f"but `{missing[0]}` is missing")
    if not is_int(record["question_id"]):
        raise PredictionFormatError(f"{location}: Expected `question_id` to be an integer, "
                                    f"but got {show(record['question_id'])}")
    extra = [k for k in record if k not in KEYS] if len(record) > len(KEYS) else []
    return record["question_id"], record["answer"], extra


def read_submission(path: Path, max_answers: int | None = None) -> tuple[str, dict[int, str], list[str]]:
    """The file's form, the answers by question id, and warnings; ``PredictionFormatError`` otherwise.

    ``max_answers``: the split's number of questions; a file with far more entries is refused early.
    """
    path = Path(path)
    name = path.name
    text = _decode(path, name)
    form, records = _records(text, name, name.endswith(".jsonl"), max_answers)
    answers: dict[int, str] = {}
    first_seen: dict[int, str] = {}
    ignored: set[str] = set()
    with_ignored = 0
    for location, record in records:
        qid, answer, extra = _id_and_answer(form, location, record)
        if extra:
            ignored.update(extra)
            with_ignored += 1
        if not isinstance(answer, str):
            raise PredictionFormatError(f"{location}: Expected `answer` to be a string, "
                                        f"but got {show(answer)}")
        if qid in answers:
            raise PredictionFormatError(f"{location}: Expected each question once, but question {show(qid)} "
                                        f"was already answered at {first_seen[qid].split(': ')[-1]}")
        answers[qid] = answer
        first_seen[qid] = location
    warnings = []
    if with_ignored:
        keys = sorted(k if len(k) <= 40 else k[:37] + "..." for k in ignored)
        shown = ", ".join(keys[:_KEYS_SHOWN]) + (", ..." if len(keys) > _KEYS_SHOWN else "")
        warnings.append(f"{name}: ignored unknown keys in {with_ignored:,} items: {shown}")
    return form, answers, warnings


def read_predictions(path: Path) -> tuple[str, dict[int, str]]:
    """The submitted answers by question id, and the file's form (``read_submission`` without warnings)."""
    form, answers, _ = read_submission(path)
    return form, answers


def check_known(name: str, answers: dict[int, str], known: set[int]) -> None:
    unknown = sorted(set(answers) - known)
    if unknown:
        shown = ", ".join(show(q) for q in unknown[:_UNKNOWN_SHOWN])
        if len(unknown) > _UNKNOWN_SHOWN:
            shown += ", ..."
        raise PredictionFormatError(f"{name}: Expected question ids of this split only, but got "
                                    f"{len(unknown)} unknown: {shown}")
