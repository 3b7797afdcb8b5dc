"""The SQA3D track: labels, the three prediction forms, their errors, scoring, and the command line."""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
from argparse import Namespace
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from evaluation_workers.errors import LabelsError, PredictionFormatError
from evaluation_workers.metrics.answers import clean_answer, match_answer
from evaluation_workers.results import sha256_tree
from evaluation_workers.synthetic import sqa3d as synthetic
from evaluation_workers.tracks import get_track
from evaluation_workers.tracks import sqa3d as track_module

REPO = Path(__file__).parents[2]
TRACK = get_track("sqa3d")
TYPES = ("What", "Is", "How", "Can", "Which", "Others")


def quiet(fraction: float, message: str = "") -> None:
    assert 0.0 <= fraction <= 1.0


def reference_type(question: str) -> str:
    words = question.lower().replace(",", "").replace(".", "").replace("?", "").replace("'s", " 's").split()
    first = words[0] if words else ""
    return {"what": "What", "is": "Is", "how": "How", "can": "Can", "which": "Which"}.get(first, "Others")


def reference_score(labels: Path, predictions: dict[int, str]) -> dict[str, Any]:
    """Per-question loop over the raw official files; averages by hand."""
    questions = json.loads(next(labels.glob("v1_balanced_questions_*")).read_text())["questions"]
    annotations = json.loads(next(labels.glob("v1_balanced_sqa_annotations_*")).read_text())["annotations"]
    answers = {a["question_id"]: [clean_answer(x["answer"]) for x in a["answers"]] for a in annotations}
    hits: dict[str, list[tuple[bool, bool]]] = defaultdict(list)
    for q in questions:
        qid = q["question_id"]
        result = (False, False)
        if qid in predictions:
            result = match_answer(clean_answer(predictions[qid]), answers[qid])
        hits[reference_type(q["question"])].append(result)
        hits["all"].append(result)

    def mean(rows: list[tuple[bool, bool]], k: int) -> float | None:
        return sum(r[k] for r in rows) / len(rows) if rows else None

    return {"metrics": {"EM": mean(hits["all"], 0), "EM_R": mean(hits["all"], 1)},
            "breakdown": {t: {"EM": mean(hits[t], 0), "EM_R": mean(hits[t], 1), "count": len(hits[t])}
                          for t in TYPES}}


def write_official(folder: Path, rows: list[tuple[int, str, list[str]]], split: str = "test") -> Path:
    """A labels folder with (question_id, question, answers) rows."""
    folder.mkdir(parents=True, exist_ok=True)
    questions = [{"scene_id": "scene0000_00", "situation": "I am here.", "question": q, "question_id": qid}
                 for qid, q, _ in rows]
    annotations = [{"scene_id": "scene0000_00", "question_id": qid, "question_type": "N/A",
                    "answers": [{"answer": a, "answer_confidence": "yes", "answer_id": i + 1}
                                for i, a in enumerate(answers)]} for qid, _, answers in rows]
    (folder / f"v1_balanced_questions_{split}_scannetv2.json").write_text(
        json.dumps({"questions": questions}))
    (folder / f"v1_balanced_sqa_annotations_{split}_scannetv2.json").write_text(
        json.dumps({"annotations": annotations}))
    return folder


HAND_ROWS = [
    (11, "What's on my left?", ["table"]),
    (12, "Is the door open?", ["yes"]),
    (13, "How many chairs are there?", ["two"]),
    (14, "Can I sit down?", ["no"]),
    (15, "Which is closer, the table or the coffee table?", ["coffee table"]),
    (16, "Are there any windows?", ["yes"]),
]
HAND_PREDICTIONS = [{"question_id": 11, "answer": "The Table."}, {"question_id": 12, "answer": "yes"},
                    {"question_id": 13, "answer": "2"}, {"question_id": 14, "answer": " ?! "},
                    {"question_id": 15, "answer": "table"}]  # 16 is missing


@pytest.fixture(scope="module")
def synthetic_labels(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("sqa3d") / "labels"
    synthetic.write_labels(folder, 400, seed=5, split="test")
    return folder


def write_json(path: Path, value: Any) -> Path:
    path.write_text(json.dumps(value))
    return path


def test_it_scores_a_hand_worked_split(tmp_path: Path) -> None:
    labels = write_official(tmp_path / "labels", HAND_ROWS)
    result = TRACK.score(labels, write_json(tmp_path / "p.json", HAND_PREDICTIONS), quiet)
    # right: 11 (articles, case, '.'), 12, 13 ("2" -> "two"); 14 empty after cleaning; 15 by containment only.
    assert result["metrics"] == {"EM": 3 / 6, "EM_R": 4 / 6}
    assert result["breakdown"] == {
        "What": {"EM": 1.0, "EM_R": 1.0, "count": 1}, "Is": {"EM": 1.0, "EM_R": 1.0, "count": 1},
        "How": {"EM": 1.0, "EM_R": 1.0, "count": 1}, "Can": {"EM": 0.0, "EM_R": 0.0, "count": 1},
        "Which": {"EM": 0.0, "EM_R": 1.0, "count": 1}, "Others": {"EM": 0.0, "EM_R": 0.0, "count": 1}}
    assert result["details"] == {"answered": 5, "missing": 1}
    assert result["warnings"] == ["1 of 6 questions have no prediction; they count as wrong.",
                                  "1 predictions are empty after cleaning; they count as wrong.",
                                  "No confidence intervals: 1 scene scored, and an interval needs at least 20 "
                                  "(the bootstrap resamples scenes)."]
    assert result["intervals"] == {key: None for key in result["intervals"]} and "EM" in result["intervals"]
    assert result["track"] == "sqa3d" and result["scorer_version"] == TRACK.scorer_version
    assert result["labels_sha256"] == sha256_tree(labels)


def test_it_reports_null_for_a_question_type_with_no_question(tmp_path: Path) -> None:
    labels = write_official(tmp_path / "labels", HAND_ROWS[:2])
    result = TRACK.score(labels, write_json(tmp_path / "p.json", HAND_PREDICTIONS[:2]), quiet)
    assert result["breakdown"]["How"] == {"EM": None, "EM_R": None, "count": 0}
    assert result["metrics"] == {"EM": 1.0, "EM_R": 1.0}


@pytest.mark.parametrize("seed", range(6))
def test_it_agrees_with_the_reference_on_random_predictions(synthetic_labels: Path, tmp_path: Path,
                                                           seed: int) -> None:
    rng = random.Random(seed)
    form = ["list", "object", "jsonl"][seed % 3]
    name = "p.jsonl" if form == "jsonl" else "p.json"
    path = synthetic.write_predictions(synthetic_labels, tmp_path / name, accuracy=rng.random(), seed=seed,
                                       missing=rng.choice([0.0, 0.1]), form=form)
    result = TRACK.score(synthetic_labels, path, quiet)
    _, submitted = track_module.read_predictions(path)
    expected = reference_score(synthetic_labels, submitted)
    assert result["metrics"] == pytest.approx(expected["metrics"], abs=1e-12)
    for group in TYPES:
        assert result["breakdown"][group] == pytest.approx(expected["breakdown"][group], abs=1e-12)


def test_it_gives_the_accuracy_the_generator_was_asked_for(synthetic_labels: Path, tmp_path: Path) -> None:
    path = synthetic.write_predictions(synthetic_labels, tmp_path / "p.json", accuracy=0.25, seed=1)
    assert TRACK.score(synthetic_labels, path, quiet)["metrics"]["EM"] == 100 / 400


def test_it_scores_the_three_forms_alike(synthetic_labels: Path, tmp_path: Path) -> None:
    results = []
    for form, name in [("list", "a.json"), ("object", "b.json"), ("jsonl", "c.jsonl"), ("jsonl", "d.json")]:
        path = synthetic.write_predictions(synthetic_labels, tmp_path / name, accuracy=0.6, seed=2, form=form)
        results.append(TRACK.score(synthetic_labels, path, quiet))
    assert all(r["metrics"] == results[0]["metrics"] and r["breakdown"] == results[0]["breakdown"]
               for r in results)


def test_it_never_reports_per_question_correctness(synthetic_labels: Path, tmp_path: Path) -> None:
    path = synthetic.write_predictions(synthetic_labels, tmp_path / "p.json", accuracy=0.5, seed=3,
                                       missing=0.1)
    result = TRACK.score(synthetic_labels, path, quiet)
    assert set(result["details"]) == {"answered", "missing"}
    text = json.dumps(result)
    assert not any(str(qid) in text for qid in track_module.load_labels(synthetic_labels).question_ids)


def test_it_builds_a_manifest_without_answers(tmp_path: Path) -> None:
    labels = write_official(tmp_path / "labels", list(reversed(HAND_ROWS)))
    assert TRACK.manifest(labels) == {"track": "sqa3d", "question_ids": [11, 12, 13, 14, 15, 16], "count": 6,
                                      "scenes": ["scene0000_00"]}


def test_it_prepares_labels_by_copying_the_official_pair_only(synthetic_labels: Path, tmp_path: Path) -> None:
    source = tmp_path / "source"
    shutil.copytree(synthetic_labels, source)
    (source / "scanrefer_captions_by_scene.pkl").write_bytes(b"other files of the release")
    dest = tmp_path / "dest"
    manifest = TRACK.prepare_labels(source, dest)
    assert sorted(p.name for p in dest.iterdir()) == sorted(p.name for p in synthetic_labels.iterdir())
    assert sha256_tree(dest) == sha256_tree(synthetic_labels)
    assert manifest == TRACK.manifest(synthetic_labels)
    assert manifest["count"] == 400


def test_it_refuses_to_prepare_into_a_folder_holding_another_split(synthetic_labels: Path,
                                                                  tmp_path: Path) -> None:
    dest = write_official(tmp_path / "dest", HAND_ROWS, split="val")
    with pytest.raises(LabelsError, match="no other split's label files"):
        TRACK.prepare_labels(synthetic_labels, dest)


@pytest.mark.parametrize(("mutate", "message"), [
    (lambda f: (f / "v1_balanced_questions_val_scannetv2.json").write_text("{}"), "exactly one"),
    (lambda f: (f / "v1_balanced_sqa_annotations_test_scannetv2.json").rename(
        f / "v1_balanced_sqa_annotations_val_scannetv2.json"), "one split"),
    (lambda f: (f / "v1_balanced_sqa_annotations_test_scannetv2.json").write_text("[]"), "`annotations`"),
])
def test_it_refuses_unusable_labels(tmp_path: Path, mutate: Any, message: str) -> None:
    labels = write_official(tmp_path / "labels", HAND_ROWS)
    mutate(labels)
    with pytest.raises(LabelsError, match=message):
        TRACK.manifest(labels)


def test_it_refuses_labels_with_an_answer_that_cleans_to_nothing(tmp_path: Path) -> None:
    labels = write_official(tmp_path / "labels", [(1, "What?", ["?"])])
    with pytest.raises(LabelsError, match="empty after cleaning"):
        TRACK.manifest(labels)


def test_it_refuses_labels_whose_files_disagree_on_ids(tmp_path: Path) -> None:
    labels = write_official(tmp_path / "labels", HAND_ROWS)
    (labels / "v1_balanced_sqa_annotations_test_scannetv2.json").write_text(json.dumps({"annotations": []}))
    with pytest.raises(LabelsError, match="6 questions have no annotation"):
        TRACK.manifest(labels)


MANIFEST = {"track": "sqa3d", "question_ids": [11, 12, 13, 14, 15, 16], "count": 6}


@pytest.mark.parametrize(("name", "content", "message"), [
    ("p.json", b"", "but got an empty file (0 bytes)"),
    ("p.json", b"\xff\xfe[]", "Expected UTF-8 text, but got the byte 0xff at offset 0"),
    ("p.json", b'[{"question_id": 11, "answer": "x"}',
     "Expected valid JSON, but got a syntax error at line 1"),
    ("p.json", b'{"question_id": 11, "answer": "x"}\n{"question_id": 12, "answer": "x"}\n{"question_id": 13,',
     "p.json: line 3: Expected a JSON object, but got a syntax error"),
    ("p.jsonl", b'{"question_id": 11, "answer": "x"}\n\nnot json\n',
     "p.jsonl: line 3: Expected a JSON object"),
    ("p.jsonl", b'{"question_id": 11, "answer": "x"}\n[11, "x"]\n', "p.jsonl: line 2: Expected an object"),
    ("p.json", b'"left"', 'Expected a JSON list of {"question_id": int, "answer": str}'),
    ("p.json", b"42", "but got 42"),
    ("p.json", b'[["11", "x"]]', "p.json: item 1: Expected an object"),
    ("p.json", b'[{"question_id": 11}]', "p.json: item 1: Expected keys `question_id` and `answer`, "
                                          "but `answer` is missing"),
    ("p.json", b'[{"id": 11, "answer": "x"}]', "but `question_id` is missing"),
    ("p.json", b'[{"question_id": "11", "answer": "x"}]',
     'Expected `question_id` to be an integer, but got "11"'),
    ("p.json", b'[{"question_id": 11.0, "answer": "x"}]', "but got 11.0"),
    ("p.json", b'[{"question_id": true, "answer": "x"}]', "but got true"),
    ("p.json", b'{"q11": "x"}', 'p.json: key "q11": Expected each key to be a question_id (an integer)'),
    ("p.json", b'[{"question_id": 11, "answer": 2}]', "item 1: Expected `answer` to be a string, but got 2"),
    ("p.json", b'{"11": null}', 'key "11": Expected `answer` to be a string, but got null'),
    ("p.json", b'{"11": ["x"]}', "but got a list"),
    ("p.json", b'[{"question_id": 11, "answer": "x"}, {"question_id": 12, "answer": "y"}, '
               b'{"question_id": 11, "answer": "z"}]',
     "p.json: item 3: Expected each question once, but question 11 was already answered at item 1"),
    ("p.json", b'{"11": "x", "011": "y"}', "question 11 was already answered"),
    ("p.json", b'{"11": "x", "11": "y"}', 'Expected each key once in an object, but got "11" twice'),
    ("p.json", b'[{"question_id": 11, "answer": "x"}, {"question_id": 99, "answer": "x"}, '
               b'{"question_id": 7, "answer": "x"}]', "but got 2 unknown: 7, 99"),
    ("p.json", json.dumps({str(i): "x" for i in range(100, 110)}).encode(),
     "but got 10 unknown: 100, 101, 102, 103, 104, ..."),
])
def test_it_explains_what_is_wrong_with_a_predictions_file(tmp_path: Path, name: str, content: bytes,
                                                           message: str) -> None:
    path = tmp_path / name
    path.write_bytes(content)
    with pytest.raises(PredictionFormatError) as excinfo:
        TRACK.validate(path, MANIFEST)
    assert message in excinfo.value.message
    labels = write_official(tmp_path / "labels", HAND_ROWS)
    with pytest.raises(PredictionFormatError):
        TRACK.score(labels, path, quiet)


def test_it_refuses_a_file_over_the_size_limit(tmp_path: Path) -> None:
    path = tmp_path / "p.json"
    with open(path, "wb") as f:
        f.truncate(TRACK.max_upload_bytes + 1)
    with pytest.raises(PredictionFormatError, match="Expected at most 50 MiB, but got 50.0 MiB"):
        TRACK.validate(path, MANIFEST)


@pytest.mark.parametrize(("name", "content", "form"), [
    ("p.json", b'[]', "list"),
    ("p.json", b'{"11": "x", "12": "y"}', "object"),
    ("p.json", b'\xef\xbb\xbf{"11": "x"}', "object"),
    ("p.json", b'{"question_id": 11, "answer": "x"}', "jsonl"),
    ("p.json", b'{"question_id": 11, "answer": "x"}\n{"question_id": 12, "answer": "y"}\n', "jsonl"),
    ("p.jsonl", b'\n{"question_id": 11, "answer": "x"}\n\n', "jsonl"),
])
def test_it_accepts_each_form_and_counts_missing_questions(tmp_path: Path, name: str, content: bytes,
                                                          form: str) -> None:
    path = tmp_path / name
    path.write_bytes(content)
    summary = TRACK.validate(path, MANIFEST)
    answered = summary["answered"]
    assert summary["format"] == form
    assert summary["missing"] == 6 - answered
    assert summary["warnings"] == [f"{6 - answered} of 6 questions have no prediction; they count as wrong."]


def test_it_ignores_other_keys_and_lists_them_once(tmp_path: Path) -> None:
    path = write_json(tmp_path / "p.json", [{"question_id": q, "answer": "x", "scene_id": "scene0000_00",
                                            "situation": "I am sitting"} for q in (11, 12)]
                      + [{"question_id": 13, "answer": "x", "gt": "y"}])
    summary = TRACK.validate(path, MANIFEST)
    assert summary["answered"] == 3
    assert summary["warnings"][0] == "p.json: ignored unknown keys in 3 items: gt, scene_id, situation"
    one_line = write_json(tmp_path / "one.json", {"question_id": 11, "answer": "x", "scene_id": "s"})
    assert TRACK.validate(one_line, MANIFEST)["format"] == "jsonl"


def _cli(*args: str | Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, *map(str, args)], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=120)


def test_it_scores_synthetic_files_from_the_command_line(tmp_path: Path) -> None:
    generated = _cli("-m", "evaluation_workers.synthetic", "sqa3d", "--out", tmp_path, "--questions", "3519",
                     "--accuracy", "0.4", "--seed", "9")
    assert generated.returncode == 0, generated.stderr
    written = json.loads(generated.stdout)
    scored = _cli("-m", "evaluation_workers", "score", "--track", "sqa3d", "--labels", written["labels"],
                  "--predictions", written["predictions"], "--output", tmp_path / "result.json")
    assert scored.returncode == 0, scored.stderr
    result = json.loads(scored.stdout)
    assert result["metrics"]["EM"] == round(0.4 * 3519) / 3519
    assert sum(group["count"] for group in result["breakdown"].values()) == 3519
    assert json.loads((tmp_path / "result.json").read_text()) == result
    assert "100.0%" in scored.stderr

    valid = _cli("-m", "evaluation_workers", "validate", "--track", "sqa3d", "--labels", written["labels"],
                 "--predictions", written["predictions"])
    assert valid.returncode == 0, valid.stderr
    assert json.loads(valid.stdout)["valid"] is True


def test_it_exits_1_with_a_clear_message_on_a_bad_file(tmp_path: Path) -> None:
    manifest = write_json(tmp_path / "manifest.json", MANIFEST)
    bad = write_json(tmp_path / "bad.json", [{"question_id": 11, "answer": 3}])
    checked = _cli("-m", "evaluation_workers", "validate", "--track", "sqa3d", "--manifest", manifest,
                   "--predictions", bad)
    assert checked.returncode == 1
    assert checked.stderr.strip() == "error: bad.json: item 1: Expected `answer` to be a string, but got 3"
    assert checked.stdout == ""


def test_it_generates_from_a_namespace_as_the_demo_does(tmp_path: Path) -> None:
    written = synthetic.generate(Namespace(out=tmp_path, questions=50, accuracy=1.0, seed=0))
    result = TRACK.score(written["labels"], written["predictions"], quiet)
    assert result["metrics"] == {"EM": 1.0, "EM_R": 1.0}
