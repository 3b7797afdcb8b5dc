"""Signed messages between the site and the workers (``evaluation_workers.signing``): the HMAC itself,
its nonce, the keys and their rotation, and the worker's app, which signs everything it sends and runs
only signed requests, once (``evaluation_workers.replays``). Over the real broker, with a worker
process and a site worker: tests/leaderboard/test_replays_live.py."""

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
from evaluation_workers.worker import deferred_intervals, presence, significance, tasks

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
    pytest.param(lambda signed: {**signed, signing.FIELD: signed[signing.FIELD].partition(":")[2]},
                 id="older-form-without-key-id"),
    pytest.param(lambda signed: {**signed, signing.FIELD: "k2" + signed[signing.FIELD].removeprefix("default")},
                 id="a-key-the-receiver-lacks"),
    pytest.param(lambda signed: {**signed, signing.NONCE: "0" * 32}, id="another-nonce"),
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


def test_a_message_without_a_nonce_is_refused_even_when_its_signature_is_right(caplog):
    """Signed as a version before nonces did: it could be replayed, and is refused."""
    unsigned = {k: v for k, v in over_the_wire(REPORT).items()}
    legacy = {**unsigned, signing.FIELD: "default:" + signing._digest(KEY, contracts.RECORD_RESULT, unsigned)}
    with caplog.at_level(logging.WARNING, logger="evaluation_workers.signing"):
        assert signing.verified(contracts.RECORD_RESULT, (), legacy, KEY) is None
    assert "it carries no nonce" in caplog.text


def test_each_message_gets_its_own_nonce_and_signing_one_message_again_keeps_it():
    first, second = (signing.signed(contracts.RECORD_PROGRESS, {"submission_id": 7}, KEY) for _ in range(2))
    assert first[signing.NONCE] != second[signing.NONCE] and len(first[signing.NONCE]) == 32
    assert signing.signed(contracts.RECORD_PROGRESS, first, KEY) == first  # a retry, a report kept then sent
    assert signing.verified(contracts.RECORD_PROGRESS, (), first, KEY) == {"submission_id": 7}


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


# Keys with ids: the first signs, each verifies; the singular variables are the key ``default``.

OLD, NEW = "o" * 40, "n" * 40


def test_the_first_key_signs_and_every_listed_key_verifies_until_it_is_removed(caplog):
    old = signing.parse_keys(f"2025:{OLD}", "K")
    both = signing.parse_keys(f"2026:{NEW}, 2025:{OLD}", "K")
    new = signing.parse_keys(f"2026:{NEW}", "K")
    in_flight = over_the_wire(signing.signed(contracts.SCORE_SUBMISSION, {"submission_id": 7}, old))
    assert signing.key_id_of(in_flight) == "2025"
    assert signing.verified(contracts.SCORE_SUBMISSION, (), in_flight, both) == {"submission_id": 7}
    answer = signing.signed(contracts.RECORD_RESULT, {"submission_id": 7}, both)
    assert signing.key_id_of(answer) == "2026"
    assert signing.verified(contracts.RECORD_RESULT, (), answer, new) == {"submission_id": 7}
    with caplog.at_level(logging.WARNING, logger="evaluation_workers.signing"):
        assert signing.verified(contracts.SCORE_SUBMISSION, (), in_flight, new) is None
    assert "it is signed with the key '2025', which is not among this receiver's keys (2026)" in caplog.text
    assert OLD not in repr(both) and NEW not in repr(both) and repr(both) == "Keys(2026, 2025)"


def test_keys_come_from_the_list_or_the_one_key_each_or_its_file_and_never_both(tmp_path):
    listed = tmp_path / "keys"
    listed.write_text(f"2026:{NEW}\n2025:{OLD}\n")
    one = tmp_path / "key"
    one.write_text(OLD + "\n")
    read = lambda **env: signing.keys_from_environ("KS", "K", env)  # noqa: E731
    assert read(KS=f"2026:{NEW},2025:{OLD}").pairs == (("2026", NEW.encode()), ("2025", OLD.encode()))
    assert read(KS_FILE=str(listed)) == read(KS=f"2026:{NEW},2025:{OLD}")
    assert read(K=OLD).pairs == read(K_FILE=str(one)).pairs == (("default", OLD.encode()),)
    assert read(KS="", K=OLD).ids == ["default"]  # an empty list variable (an env file's KS=) is no list
    assert signing.as_keys(OLD.encode()) == read(K=OLD)
    for env, error in [
            ({}, "K (or K_FILE) is not set, nor KS (or KS_FILE)"),
            ({"KS": f"2026:{NEW}", "K": OLD}, "Set KS or K, not both"),
            ({"KS": NEW}, "Expected key 1 of KS as id:secret, with an id of at most 40 letters, digits, '.', '_' "
                          "or '-' (such as 2026-07), but it has no ':'"),
            ({"KS": f"2026:{NEW},a b:{OLD}"}, "Expected key 2 of KS as id:secret"),
            ({"KS": f"2026:{NEW},2026:{OLD}"}, "Expected the ids in KS to differ, but '2026' comes twice"),
            ({"KS": f"2026:{NEW},2025:short"}, "Expected the key '2025' of KS to be at least 32 characters, but "
                                                "it has 5"),
            ({"KS": " , "}, "KS is empty"),
            ({"KS_FILE": "/nonexistent"}, "KS_FILE=/nonexistent cannot be read")]:
        with pytest.raises(signing.SigningKeyError) as refused:
            read(**env)
        assert error in str(refused.value) and NEW not in str(refused.value) and OLD not in str(refused.value)


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


def test_every_message_a_worker_sends_is_signed_with_a_nonce_of_its_own(wire, monkeypatch, tmp_path):
    kept: list[dict[str, Any]] = []  # what the worker keeps in an attempt's claim for the sweeper
    monkeypatch.setattr(tasks.attempts, "keep_report", lambda *args: kept.append(args[-1]))
    monkeypatch.setattr(tasks, "HEARTBEAT_SECONDS", 0.05)
    monkeypatch.setattr(tasks, "FAULT_DIR", str(tmp_path))
    (tmp_path / "hold-scoring").write_text("0.2")
    monkeypatch.setenv("EVAL_BOOTSTRAP_INLINE_MAX", "1")  # the intervals follow, once the site asks
    tasks.run_score(score_request())
    result = wire[-1][1]["result"]
    key = contracts.outcomes_key("sqa3d", result["labels_sha256"], result["predictions_sha256"],
                                 result["scorer_version"])
    deferred_intervals.compute_intervals.run(schema=1, submission_id=7, result_id=70, revision=1, track="sqa3d",
                                             scorer_version=result["scorer_version"], outcomes_key=key,
                                             reply_queue="site")
    tasks.run_score(score_request(predictions_key="t/1/missing.json"))  # a failure
    for exception in (WorkerLostError(), TimeLimitExceeded()):
        tasks._report_lost(sender=tasks.score_submission, exception=exception, kwargs=score_request())
    significance.paired_test.run(schema=1, test_id=3, revision_a=1, revision_b=2, track="sqa3d", outcomes_a="a.npz",
                                 outcomes_b="b.npz", reply_queue="site")
    presence.ask_for_sweep("eval@host")
    names = {name for name, _ in wire}
    assert names == {contracts.RECORD_PROGRESS, contracts.RECORD_HEARTBEAT, contracts.RECORD_RESULT,
                     contracts.RECORD_INTERVALS, contracts.RECORD_FAILURE, contracts.RECORD_LOST,
                     contracts.RECORD_PAIRED_TEST, contracts.SWEEP}
    assert all(signing.verified(name, (), over_the_wire(kw), b"w" * 40) is not None for name, kw in wire)
    assert len({kw[signing.NONCE] for _, kw in wire}) == len(wire)
    # The report kept in a claim is the message sent, its nonce included: one message, not two.
    outcomes = [kw for name, kw in wire if name in {contracts.RECORD_RESULT, contracts.RECORD_FAILURE}]
    assert len(kept) == 2 and kept == outcomes[:2]  # the result, the failure (then the time limit's, not kept)
    # Each answer names the state it was asked for.
    [intervals] = [kw for name, kw in wire if name == contracts.RECORD_INTERVALS]
    [paired] = [kw for name, kw in wire if name == contracts.RECORD_PAIRED_TEST]
    assert (intervals["result_id"], intervals["revision"], paired["revision_a"], paired["revision_b"]) == (70, 1, 1, 2)


def test_a_worker_scores_only_a_signed_request(wire, caplog):
    """A host with the broker alone cannot make a worker score (and sign a result of) what it likes."""
    with caplog.at_level(logging.WARNING, logger="evaluation_workers.signing"):  # whatever Celery set the root to
        tasks.score_submission(**score_request())
    assert wire == [] and f"Refused {contracts.SCORE_SUBMISSION} for submission '7': it is unsigned" in caplog.text
    tasks.score_submission(**signing.signed(contracts.SCORE_SUBMISSION, score_request(), b"w" * 40))
    assert wire[-1][0] == contracts.RECORD_RESULT


@pytest.fixture
def worker_broker(wire, redis_url, monkeypatch):
    """The worker's app on the test session's Redis (its attempt keys, what it remembers), sending nowhere;
    the site has noted attempt 2 of submission 7."""
    import redis

    monkeypatch.setattr(tasks.app.conf, "broker_url", redis_url)
    client = redis.Redis.from_url(redis_url)
    client.set(contracts.attempt_key(7), 2)
    yield client
    client.delete(contracts.attempt_key(7), contracts.running_key(7, 2), contracts.running_key(7, 3))


def refused(client, name: str, reason: str) -> int:
    return int(client.hget(contracts.refused_key(), f"{name}|{reason}") or 0)


def test_a_worker_runs_a_request_once_and_old_key_requests_until_the_key_is_removed(worker_broker, wire,
                                                                                    monkeypatch, caplog):
    """A request the site signed before it rotated its key is scored by a worker that holds the new key
    and the old; a second delivery of it is refused by its nonce (even with the attempt's claim gone);
    once the old key is removed, a request signed with it is refused."""
    old = signing.checked_key("w" * 40, "TEST")  # the site's key before the rotation: "default"
    monkeypatch.delenv("EVAL_RESULTS_SIGNING_KEY")
    monkeypatch.setenv("EVAL_RESULTS_SIGNING_KEYS", f"2026:{NEW},default:{old.decode()}")
    request = over_the_wire(signing.signed(contracts.SCORE_SUBMISSION, score_request(), old))
    tasks.score_submission(**request)
    assert wire[-1][0] == contracts.RECORD_RESULT and signing.key_id_of(wire[-1][1]) == "2026"
    sent = len(wire)

    worker_broker.delete(contracts.running_key(7, 2))  # not the claim: the nonce refuses it
    replays_before = refused(worker_broker, contracts.SCORE_SUBMISSION, "replay")
    with caplog.at_level(logging.WARNING, logger="evaluation_workers.replays"):
        assert tasks.score_submission(**request) is None
    assert len(wire) == sent and worker_broker.get(contracts.running_key(7, 2)) is None
    assert f"Refused {contracts.SCORE_SUBMISSION} for submission '7': it was delivered before" in caplog.text
    assert refused(worker_broker, contracts.SCORE_SUBMISSION, "replay") == replays_before + 1

    monkeypatch.setenv("EVAL_RESULTS_SIGNING_KEYS", f"2026:{NEW}")
    worker_broker.set(contracts.attempt_key(7), 3)
    signatures_before = refused(worker_broker, contracts.SCORE_SUBMISSION, "signature")
    tasks.score_submission(**over_the_wire(signing.signed(contracts.SCORE_SUBMISSION, score_request(attempt=3), old)))
    assert len(wire) == sent and worker_broker.get(contracts.running_key(7, 3)) is None
    assert refused(worker_broker, contracts.SCORE_SUBMISSION, "signature") == signatures_before + 1
