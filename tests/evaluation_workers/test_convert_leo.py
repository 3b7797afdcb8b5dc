"""LEO's results.json joins to question ids through the split's public questions file and scores as
answers submitted directly."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from evaluation_workers.cli import main as cli
from evaluation_workers.convert import ConvertError, convert
from evaluation_workers.synthetic import sqa3d as synthetic
from evaluation_workers.tracks import sqa3d

_WORD = re.compile(r"\w+|[^\w\s]+")


def _leo_person_view(sentence: str) -> str:
    """LEO's convert_person_view: wordpunct tokens, first person to second, capitalize()."""
    forms = {"i": "you", "me": "you", "my": "your", "mine": "yours", "am": "are"}
    return " ".join(forms.get(w.lower(), w) for w in _WORD.findall(sentence)).capitalize()


def _leo_results(questions: list[dict], answers: dict[int, str]) -> list[dict]:
    """What LEO's SQA3DEvaluator.update appends and record dumps, for each test question."""
    return [{"source": "scannet", "scene_id": q["scene_id"], "anchor": [0.0, 0.0, 0.0], "anchor_ort": [0, 0, 0, 1.0],
             "situation": q["situation"], "instruction": f"USER: {_leo_person_view(q['question'])} ASSISTANT:",
             "response_gt": ["hidden"], "response_pred": answers[q["question_id"]]} for q in questions]


def test_it_joins_leo_results_to_question_ids_and_scores_like_direct_answers(tmp_path: Path) -> None:
    files = synthetic.write_labels(tmp_path / "labels", 300, seed=3)
    preds = tmp_path / "direct.json"
    synthetic.write_predictions(tmp_path / "labels", preds, accuracy=0.5, seed=4)
    answers = {item["question_id"]: item["answer"] for item in json.loads(preds.read_text())}
    questions = json.loads(Path(files["questions"]).read_text())["questions"]
    results = _leo_results(questions[::-1], answers)  # LEO's order need not be the file's
    (tmp_path / "results.json").write_text(json.dumps(results, indent=2))
    out = tmp_path / "answers.json"
    assert cli(["convert", "--track", "sqa3d", "--from", "leo", "--labels", str(tmp_path / "labels"),
                "--questions", str(files["questions"]), str(tmp_path / "results.json"), str(out)]) == 0
    got, want = sqa3d.score(tmp_path / "labels", out, lambda *a: None), sqa3d.score(
        tmp_path / "labels", preds, lambda *a: None)
    assert got["metrics"] == want["metrics"] and got["breakdown"] == want["breakdown"]
    assert 0.3 < got["metrics"]["EM"] < 0.7


def test_it_names_the_item_that_matches_no_question(tmp_path: Path) -> None:
    questions = {"questions": [{"scene_id": "scene0000_00", "situation": "I sit.", "question": "What is left of me?",
                                "question_id": 7, "alternative_situation": []}]}
    (tmp_path / "q.json").write_text(json.dumps(questions))
    results = [{"scene_id": "scene0000_00", "situation": "I sit.", "instruction": "USER: Where is the door? ASSISTANT:",
                "response_pred": "left"}]
    (tmp_path / "results.json").write_text(json.dumps(results))
    with pytest.raises(ConvertError, match=r"results.json: item 1: Expected a question of q.json in scene "
                                           r"scene0000_00, but none matches 'USER: Where is the door\? ASSISTANT:'"):
        convert("sqa3d", "leo", tmp_path / "results.json", tmp_path / "o.json", None, questions=tmp_path / "q.json")
