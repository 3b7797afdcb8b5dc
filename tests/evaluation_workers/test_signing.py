"""Signed messages between the site and the workers (``evaluation_workers.signing``): the HMAC itself,
the key, and the worker's app, which signs everything it sends and runs only signed requests."""

from __future__ import annotations

import logging
import math
from typing import Any

import pytest
from celery import Celery
from celery.exceptions import TimeLimitExceeded, WorkerLostError
from kombu import serialization

from evaluation_workers import contracts, signing
from evaluation_workers.synthetic import sqa3d
from evaluation_workers.worker import deferred_intervals, significance, tasks

KEY = signing.checked_key("k" * 40, "TEST")


def over_the_wire(kwargs: dict[str, Any]) -> dict[str, Any]:
    """What the receiving side decodes: Celery's JSON, both ways."""
    content_type, encoding, data = serialization.dumps(((), kwargs, {}), "json")
    return serialization.loads(data, content_type, encoding)[1]


REPORT = {"submission_id": 7, "attempt": 2, "seconds": 0.1 + 0.2, "device": "cpu", "worker": "eval@h:1 ü",
          "result": {"metrics": {"EM": 1 / 3, "AP": None, "big": 10**20, "neg": -0.0, "nan": math.nan},
                     "breakdown": {"Which": {"EM": 0.25}}, "intervals": {"EM": (0.1, 0.9)}, "warnings": []}}


def test_a_signed_report_verifies_after_the_broker_carried_it():
    received = over_the_wire(signing.signed(contracts.RECORD_RESULT, REPORT, KEY))
    assert signing.verified(contracts.RECORD_RESULT, (), received, KEY) == over_the_wire(REPORT)


@pytest.mark.parametrize("forge", [
    pytest.param(lambda signed: {k: v for k, v in signed.items() if k != signing.FIELD}, id="unsigned"),
    pytest.param(lambda signed: {**signed, "attempt": 3}, id="tampered"),
    pytest.param(lambda signed: {**signed, "extra": 1}, id="an-argument-added"),
    pytest.param(lambda signed: {**signed, signing.FIELD: signed[signing.FIELD].upper()}, id="other-digits"),
    pytest.param(lambda signed: {**signed, signing.FIELD: 12}, id="not-text"),
    pytest.param(lambda signed: {**signed, signing.FIELD: "é" * 64}, id="not-ascii"),
    pytest.param(lambda signed: signing.signed(contracts.RECORD_RESULT, REPORT, b"another key" * 4), id="other-key"),
])
def test_a_forged_report_is_refused_and_logged_without_its_payload(forge, caplog):
    forged = over_the_wire(forge(signing.signed(contracts.RECORD_RESULT, REPORT, KEY)))
    with caplog.at_level(logging.WARNING, logger="evaluation_workers.signing"):
        assert signing.verified(contracts.RECORD_RESULT, (), forged, KEY) is None
    [record] = caplog.records
    assert record.getMessage().startswith(f"Refused {contracts.RECORD_RESULT} for submission '7': ")
    assert "0.333" not in caplog.text and "eval@h" not in caplog.text


def test_a_signature_holds_for_one_task_name_only():
    signed = signing.signed(contracts.RECORD_FAILURE, {"submission_id": 7, "attempt": 2, "kind": "invalid_input",
                                                       "message": "x"}, KEY)
    assert signing.verified(contracts.RECORD_LOST, (), signed, KEY) is None


def test_positional_arguments_are_refused():
    signed = signing.signed(contracts.RECORD_RESULT, REPORT, KEY)
    assert signing.verified(contracts.RECORD_RESULT, (7,), signed, KEY) is None


def test_the_key_comes_from_the_variable_or_its_file_and_must_be_long(tmp_path):
    key_file = tmp_path / "key"
    key_file.write_text("f" * 40 + "\n")
    assert signing.key_from_environ("K", {"K": "v" * 32}) == b"v" * 32
    assert signing.key_from_environ("K", {"K_FILE": str(key_file)}) == b"f" * 40
    with pytest.raises(signing.SigningKeyError, match="K \\(or K_FILE\\) is not set"):
        signing.key_from_environ("K", {})
    with pytest.raises(signing.SigningKeyError, match="at least 32 characters, but it has 6"):
        signing.key_from_environ("K", {"K": "secret"})
    with pytest.raises(signing.SigningKeyError, match="K_FILE=/nonexistent cannot be read"):
        signing.key_from_environ("K", {"K_FILE": "/nonexistent"})


# The worker's app: every message it sends is signed, in one place (``app.SigningCelery.send_task``).


@pytest.fixture
def wire(monkeypatch, tmp_path) -> list[tuple[str, dict[str, Any]]]:
    """What the worker's app hands to Celery to publish, after its own signing; scoring on synthetic files."""
    monkeypatch.setattr(tasks.app.conf, "broker_url", "memory://")  # no shared attempt keys
    uploads, labels = tmp_path / "uploads", tmp_path / "labels"
    sqa3d.write_labels(labels / "sqa3d/test/v1", 50, seed=3)
    sqa3d.write_predictions(labels / "sqa3d/test/v1", uploads / "t/1/p.json", accuracy=0.5, seed=4)
    for name, value in {"EVAL_UPLOADS_DIR": uploads, "EVAL_LABELS_DIR": labels, "EVAL_OUTCOMES_DIR": tmp_path / "o",
                        "EVAL_RESULTS_SIGNING_KEY": "w" * 40}.items():
        monkeypatch.setenv(name, str(value))
    sent: list[tuple[str, dict[str, Any]]] = []
    monkeypatch.setattr(Celery, "send_task", lambda self, name, args=None, kwargs=None, **o: sent.append((name, kwargs)))
    return sent


def score_request(**overrides: Any) -> dict[str, Any]:
    return {"schema": 1, "submission_id": 7, "attempt": 2, "track": "sqa3d", "predictions_key": "t/1/p.json",
            "labels_key": "sqa3d/test/v1", "reply_queue": "site", **overrides}


def test_every_message_a_worker_sends_is_signed(wire, monkeypatch, tmp_path):
    monkeypatch.setattr(tasks, "HEARTBEAT_SECONDS", 0.05)
    monkeypatch.setattr(tasks, "FAULT_DIR", str(tmp_path))
    (tmp_path / "hold-scoring").write_text("0.2")
    monkeypatch.setenv("EVAL_BOOTSTRAP_INLINE_MAX", "1")  # the intervals follow in a task of their own
    tasks.run_score(score_request())
    [follow_up] = [kw for name, kw in wire if name == contracts.COMPUTE_INTERVALS]
    deferred_intervals.compute_intervals(**follow_up)
    tasks.run_score(score_request(predictions_key="t/1/missing.json"))  # a failure
    for exception in (WorkerLostError(), TimeLimitExceeded()):
        tasks._report_lost(sender=tasks.score_submission, exception=exception, kwargs=score_request())
    significance.paired_test.run(schema=1, test_id=3, track="sqa3d", metric="EM", outcomes_a="a.npz",
                                 outcomes_b="b.npz", reply_queue="site")
    names = {name for name, _ in wire}
    assert names == {contracts.RECORD_PROGRESS, contracts.RECORD_HEARTBEAT, contracts.RECORD_RESULT,
                     contracts.COMPUTE_INTERVALS, contracts.RECORD_INTERVALS, contracts.RECORD_FAILURE,
                     contracts.RECORD_LOST, contracts.RECORD_PAIRED_TEST}
    key = b"w" * 40
    assert all(signing.verified(name, (), over_the_wire(kw), key) is not None for name, kw in wire)


def test_a_worker_scores_only_a_signed_request(wire, caplog):
    """A host with the broker alone cannot make a worker score (and sign a result of) what it likes."""
    with caplog.at_level(logging.WARNING, logger="evaluation_workers.signing"):  # whatever Celery set the root to
        tasks.score_submission(**score_request())
    assert wire == [] and f"Refused {contracts.SCORE_SUBMISSION} for submission '7': it is unsigned" in caplog.text
    tasks.score_submission(**signing.signed(contracts.SCORE_SUBMISSION, score_request(), b"w" * 40))
    assert wire[-1][0] == contracts.RECORD_RESULT
