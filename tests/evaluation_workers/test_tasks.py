"""The scoring task's outcomes, with the reports it sends recorded."""

from __future__ import annotations

import shutil
from typing import Any

import pytest

from evaluation_workers import contracts, tasks
from evaluation_workers.synthetic import sqa3d


@pytest.fixture
def roots(tmp_path, monkeypatch):
    uploads, labels = tmp_path / "uploads", tmp_path / "labels"
    sqa3d.write_labels(labels / "sqa3d/test/v1", 50, seed=3)
    (uploads / "t/1").mkdir(parents=True)
    sqa3d.write_predictions(labels / "sqa3d/test/v1", uploads / "t/1/p.json", accuracy=0.5, seed=4)
    monkeypatch.setenv("EVAL_UPLOADS_DIR", str(uploads))
    monkeypatch.setenv("EVAL_LABELS_DIR", str(labels))
    return uploads, labels


@pytest.fixture
def reports(monkeypatch) -> list[tuple[str, dict[str, Any]]]:
    sent: list[tuple[str, dict[str, Any]]] = []
    monkeypatch.setattr(tasks.app, "send_task", lambda name, kwargs, queue, **_: sent.append((name, kwargs)))
    return sent


def request(**overrides: Any) -> contracts.ScoreRequest:
    base = dict(schema=1, submission_id=7, attempt=2, track="sqa3d", predictions_key="t/1/p.json",
                labels_key="sqa3d/test/v1", reply_queue="site")
    return contracts.ScoreRequest(**{**base, **overrides})  # type: ignore[typeddict-item]


def test_it_reports_progress_then_the_result(roots, reports):
    tasks.run_score(request())
    names = [name for name, _ in reports]
    assert names[0] == contracts.RECORD_PROGRESS and names[-1] == contracts.RECORD_RESULT
    fractions = [kw["fraction"] for name, kw in reports if name == contracts.RECORD_PROGRESS]
    assert reports[0][1]["message"] == "Fetching predictions"
    assert fractions == sorted(fractions) and fractions[-1] == 1.0
    result = reports[-1][1]
    assert result["submission_id"] == 7 and result["attempt"] == 2 and result["device"] == "cpu"
    assert result["result"]["metrics"]["EM"] == pytest.approx(0.5)


def test_bad_input_is_reported_with_its_message(roots, reports):
    uploads, _ = roots
    (uploads / "t/1/p.json").write_text("[1, 2]")
    tasks.run_score(request())
    name, report = reports[-1]
    assert name == contracts.RECORD_FAILURE and report["kind"] == "invalid_input"
    assert "p.json" in report["message"]


def test_an_internal_error_is_reported_without_details(roots, reports):
    _, labels = roots
    shutil.rmtree(labels / "sqa3d/test/v1")
    tasks.run_score(request())
    name, report = reports[-1]
    assert (name, report["kind"]) == (contracts.RECORD_FAILURE, "platform_error")
    assert report["message"] == "Internal evaluation error. It does not count against your quota."


def test_keys_cannot_escape_their_root(roots, reports):
    tasks.run_score(request(predictions_key="../labels/sqa3d/test/v1/x.json"))
    assert reports[-1][1]["kind"] == "platform_error"


def test_a_request_of_another_schema_is_dropped(roots, reports):
    tasks.score_submission.run(**{**request(), "schema": 99})
    assert reports == []
