"""The scoring task's outcomes, with the reports it sends recorded."""

from __future__ import annotations

import hashlib
import json
import shutil
import socket
from typing import Any

import pytest

from evaluation_workers import contracts
from evaluation_workers.synthetic import sqa3d
from evaluation_workers.worker import tasks


@pytest.fixture(autouse=True)
def no_shared_broker(monkeypatch):
    """The worker's attempt check reads its broker's Redis, where the machine's (CI's REDIS_URL) keeps
    other runs' keys for a week: a submission 7 dispatched there made these tests' message "stale".
    A test here reaches Redis only through ``broker``, which starts without keys of submission 7."""
    monkeypatch.setattr(tasks.app.conf, "broker_url", "memory://")


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
    monkeypatch.setattr(tasks.app, "send_task", lambda name, kwargs, queue, **options: sent.append((name, kwargs)))
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
    assert (name, report["kind"], report["message"]) == (contracts.RECORD_FAILURE, "platform_error",
                                                         "Internal evaluation error. It does not count "
                                                         "against your quota.")


def test_keys_cannot_escape_their_root(roots, reports):
    tasks.run_score(request(predictions_key="../labels/sqa3d/test/v1/x.json"))
    assert reports[-1][1]["kind"] == "platform_error"


def test_a_request_of_another_schema_is_dropped(roots, reports):
    tasks.score_submission.run(**{**request(), "schema": 99})
    assert reports == []


@pytest.fixture
def broker(redis_url, monkeypatch):
    """The worker's attempt keys live in the test session's Redis."""
    import redis

    monkeypatch.setattr(tasks.app.conf, "broker_url", redis_url)
    client = redis.Redis.from_url(redis_url)
    client.delete(contracts.attempt_key(7), contracts.running_key(7, 2))
    yield client
    client.delete(contracts.attempt_key(7), contracts.running_key(7, 2))


def test_a_message_of_a_stale_attempt_or_of_one_the_site_never_noted_is_dropped_unscored(roots, reports, broker):
    broker.set(contracts.attempt_key(7), 3)  # the site has sent attempt 3 since
    tasks.run_score(request())
    assert reports == []
    # No note at all: the site has not sent it, or it ended over a week ago (the note expired) and this is
    # a replay; a request the site sent while the note could not be written is sent again as a new attempt.
    broker.delete(contracts.attempt_key(7))
    tasks.run_score(request())
    assert reports == [] and broker.get(contracts.running_key(7, 2)) is None


def test_a_second_delivery_of_an_attempt_being_scored_is_dropped(roots, reports, broker):
    broker.set(contracts.attempt_key(7), 2)
    broker.set(contracts.running_key(7, 2), "1", ex=30)  # another worker holds it
    tasks.run_score(request())
    assert reports == []
    broker.delete(contracts.running_key(7, 2))
    tasks.run_score(request())
    assert reports[-1][0] == contracts.RECORD_RESULT
    tasks.run_score(request())  # delivered again once done: still taken
    assert [name for name, _ in reports].count(contracts.RECORD_RESULT) == 1


def test_the_claim_names_this_start_of_the_worker_and_keeps_the_signed_report(roots, reports, broker):
    """What the site's sweeper reads (``contracts.Claim``): who took the attempt, then its report as sent."""
    from evaluation_workers import signing
    from evaluation_workers.worker import attempts

    broker.set(contracts.attempt_key(7), 2)
    tasks.run_score(request())
    claim = json.loads(broker.get(contracts.running_key(7, 2)))
    assert (claim["node"], claim["instance"]) == (socket.gethostname(), attempts.INSTANCE)
    assert claim["report"] == contracts.RECORD_RESULT
    assert signing.verified(contracts.RECORD_RESULT, (), claim["kwargs"], signing.worker_keys()) == reports[-1][1]
    assert 0 < broker.ttl(contracts.running_key(7, 2)) <= attempts.CLAIM_SECONDS


def test_an_attempt_that_ends_without_a_report_gives_its_claim_up(roots, reports, broker, monkeypatch):
    def unreachable(*args, **kwargs):
        raise ConnectionError("the broker is away")

    broker.set(contracts.attempt_key(7), 2)
    monkeypatch.setattr(tasks.Reporter, "progress", unreachable)
    with pytest.raises(ConnectionError):
        tasks.run_score(request())
    assert broker.get(contracts.running_key(7, 2)) is None  # the site's heartbeat timeout takes it from here


def test_a_missing_upload_is_the_platforms_fault_and_names_no_path(roots, reports):
    uploads, _ = roots
    (uploads / "t/1/p.json").unlink()
    tasks.run_score(request())
    name, report = reports[-1]
    assert name == contracts.RECORD_FAILURE and report["kind"] == "platform_error"
    assert "could not be read from storage" in report["message"]
    assert str(uploads) not in report["message"] and "Errno" not in report["message"]


def test_a_long_step_sends_heartbeats(roots, reports, monkeypatch, tmp_path):
    monkeypatch.setattr(tasks, "HEARTBEAT_SECONDS", 0.05)
    monkeypatch.setattr(tasks, "FAULT_DIR", str(tmp_path))
    (tmp_path / "hold-scoring").write_text("0.4")  # a slow step before scoring
    tasks.run_score(request())
    beats = [kw for name, kw in reports if name == contracts.RECORD_HEARTBEAT]
    assert len(beats) >= 3 and all(b["attempt"] == 2 for b in beats)
    assert reports[-1][0] == contracts.RECORD_RESULT


def test_a_large_split_reports_the_score_first_and_its_intervals_when_the_site_asks(roots, reports, monkeypatch,
                                                                                    tmp_path):
    """Past EVAL_BOOTSTRAP_INLINE_MAX a CPU worker reports the result without intervals and keeps its
    outcomes; the request the site then sends (naming the result and its revision) is answered with
    the intervals inline scoring gives, and the same result and revision."""
    from evaluation_workers import outcomes
    from evaluation_workers.worker import deferred_intervals

    monkeypatch.setenv("EVAL_OUTCOMES_DIR", str(tmp_path / "outcomes"))
    inline = []
    monkeypatch.setattr(tasks.app, "send_task", lambda name, kwargs, queue, **o: inline.append((name, kwargs)))
    tasks.run_score(request())
    want = inline[-1][1]["result"]

    queued: list[tuple[str, dict[str, Any], str]] = []
    monkeypatch.setattr(tasks.app, "send_task", lambda name, kwargs, queue, **o: queued.append((name, kwargs, queue)))
    monkeypatch.setenv("EVAL_BOOTSTRAP_INLINE_MAX", "1")
    tasks.run_score(request())
    assert queued[-1][0] == contracts.RECORD_RESULT
    result = queued[-1][1]["result"]
    assert "intervals" not in result and result["bootstrap"] == {"deferred": True, "resamples": 1000,
                                                                 "unit": "scene"}
    assert result["metrics"] == want["metrics"]
    key = contracts.outcomes_key("sqa3d", result["labels_sha256"], result["predictions_sha256"],
                                 result["scorer_version"])
    assert outcomes.load(key) is not None
    asked = contracts.IntervalsRequest(schema=1, submission_id=7, result_id=70, revision=4, track="sqa3d",
                                       scorer_version=result["scorer_version"], outcomes_key=key, reply_queue="site")
    deferred_intervals.compute_intervals.run(**asked)  # as the site sends it, unsigned here (run, not the task)
    name, report, reply = queued[-1]
    assert (name, reply) == (contracts.RECORD_INTERVALS, "site")
    assert (report["submission_id"], report["result_id"], report["revision"]) == (7, 70, 4)
    assert report["intervals"] == want["intervals"] and report["bootstrap"] == want["bootstrap"]


# The scored bytes are the accepted bytes (``ScoreRequest.predictions_sha256``, ``tasks.as_accepted``).


def accepted_sha256(roots) -> str:
    uploads, _ = roots
    return hashlib.sha256((uploads / "t/1/p.json").read_bytes()).hexdigest()


def outcomes_of(reports) -> list[tuple[str, dict[str, Any]]]:
    return [(name, kw) for name, kw in reports if name in {contracts.RECORD_RESULT, contracts.RECORD_FAILURE}]


def test_the_accepted_bytes_are_scored(roots, reports):
    sha = accepted_sha256(roots)
    tasks.run_score(request(predictions_sha256=sha))
    [(name, report)] = outcomes_of(reports)
    assert name == contracts.RECORD_RESULT and report["result"]["predictions_sha256"] == sha


def test_a_file_edited_after_acceptance_is_refused_before_any_outcome_as_the_platforms_fault(roots, reports, caplog):
    """Still valid, other answers: it would score (differently); instead nothing but a platform error is reported."""
    uploads, labels = roots
    sha = accepted_sha256(roots)
    sqa3d.write_predictions(labels / "sqa3d/test/v1", uploads / "t/1/p.json", accuracy=0.3, seed=9)
    tasks.run_score(request(predictions_sha256=sha))
    assert outcomes_of(reports) == [(contracts.RECORD_FAILURE, {"submission_id": 7, "attempt": 2,
                                                                 "kind": "platform_error", "message": tasks.CHANGED})]
    [logged] = [r for r in caplog.records if r.levelname == "ERROR"]
    assert sha in logged.getMessage() and "submission 7" in logged.getMessage().lower()


def test_a_file_truncated_after_acceptance_is_no_format_error_of_the_researcher(roots, reports):
    uploads, _ = roots
    sha = accepted_sha256(roots)
    path = uploads / "t/1/p.json"
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    tasks.run_score(request())  # unchecked, the scorer blames the file
    assert outcomes_of(reports)[-1][1]["kind"] == "invalid_input"
    reports.clear()
    tasks.run_score(request(predictions_sha256=sha))
    assert [(name, kw["kind"], kw["message"]) for name, kw in outcomes_of(reports)] == [
        (contracts.RECORD_FAILURE, "platform_error", tasks.CHANGED)]


def test_a_request_without_the_checksum_still_scores_as_an_older_site_sends_it(roots, reports):
    uploads, labels = roots
    sqa3d.write_predictions(labels / "sqa3d/test/v1", uploads / "t/1/p.json", accuracy=0.3, seed=9)
    tasks.run_score(request())
    [(name, report)] = outcomes_of(reports)
    assert name == contracts.RECORD_RESULT and report["result"]["metrics"]["EM"] == pytest.approx(0.3)


def test_the_predictions_are_read_once_per_scoring_for_their_checksum(roots, reports, monkeypatch):
    """The check takes the track's own checksum (started ahead), and forgets it: a re-score reads again."""
    from evaluation_workers import results

    uploads, _ = roots
    read: list[str] = []
    real = results._read_sha256
    monkeypatch.setattr(results, "_read_sha256", lambda path, stop=None: (read.append(str(path)), real(path, stop))[1])
    sha = accepted_sha256(roots)
    for _ in range(2):
        tasks.run_score(request(predictions_sha256=sha))
    assert read.count(str(uploads / "t/1/p.json")) == 2
    assert [name for name, _ in outcomes_of(reports)] == [contracts.RECORD_RESULT] * 2


def test_another_sites_claim_of_the_same_submission_id_is_not_this_sites(roots, reports, broker, monkeypatch):
    """Two sites on one Redis database (here: an earlier test run whose database started its ids
    at 1 too) keep their attempts apart by BROKER_KEY_PREFIX."""
    monkeypatch.setenv("BROKER_KEY_PREFIX", "other-site")
    broker.set(contracts.attempt_key(7), 5)
    broker.set(contracts.running_key(7, 2), "1", ex=30)
    monkeypatch.setenv("BROKER_KEY_PREFIX", "this-site")
    broker.set(contracts.attempt_key(7), 2)  # this site's note of the attempt it sent
    try:
        tasks.run_score(request())
        assert reports and reports[-1][0] == contracts.RECORD_RESULT, "scored, not dropped as stale or taken"
    finally:
        broker.delete(contracts.running_key(7, 2), contracts.attempt_key(7))
        monkeypatch.setenv("BROKER_KEY_PREFIX", "other-site")
        broker.delete(contracts.running_key(7, 2), contracts.attempt_key(7))
