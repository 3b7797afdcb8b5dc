"""The sweeper's fast paths against a real Redis: attempts whose worker is gone (started again, or no
longer announcing itself), reports lost with a site worker, intervals asked again, and what the
retention tells the workers to keep of their outcomes."""

from __future__ import annotations

import json
import time
import uuid
from datetime import timedelta
from types import SimpleNamespace
from typing import Any

import pytest
from django.utils import timezone

from evaluation_workers import contracts, signing
from evaluation_workers.tracks import all_tracks, get_track
from leaderboard.submissions import broker, lifecycle, retention, sweeper
from leaderboard.submissions.models import Result, Submission
from tests.leaderboard.test_intervals import publish
from tests.leaderboard.test_lifecycle import age, create, queued_attempts, real_broker  # noqa: F401 - a fixture


@pytest.fixture
def running(owner, sqa3d_split, sqa3d_files, real_broker, django_capture_on_commit_callbacks):  # noqa: F811
    """A submission a worker node of this test has started (its first progress recorded), and that node's name."""
    node = f"eval-{uuid.uuid4().hex[:6]}@host"
    with django_capture_on_commit_callbacks(execute=True):
        submission = create(owner, sqa3d_files)
    lifecycle.record_progress(submission_id=submission.pk, attempt=1, fraction=0.2, worker=f"{node}:4242")
    yield submission, node
    broker.client().delete(contracts.running_key(submission.pk, 1), contracts.worker_key(node))


def claim(submission: Submission, node: str, instance: str, **extra: Any) -> None:
    broker.client().set(contracts.running_key(submission.pk, submission.attempt),
                        json.dumps({"node": node, "instance": instance, "since": time.time(), **extra}))


def announce(node: str, instance: str) -> None:
    broker.client().set(contracts.worker_key(node), json.dumps({"name": node, "instance": instance}), ex=60)


def sweep(django_capture_on_commit_callbacks: Any) -> dict[str, int]:
    with django_capture_on_commit_callbacks(execute=True):
        return sweeper.do_sweep()


def test_an_attempt_of_a_worker_that_started_again_is_sent_again_at_once(running, real_broker,  # noqa: F811
                                                                          django_capture_on_commit_callbacks):
    submission, node = running
    claim(submission, node, "before-the-crash")
    announce(node, "after-the-crash")
    assert sweep(django_capture_on_commit_callbacks)["requeued"] == 1  # heartbeats are still fresh
    submission.refresh_from_db()
    assert (submission.status, submission.attempt, submission.lost_attempts) == ("queued", 2, 1)
    assert (submission.pk, 2) in queued_attempts(real_broker)


def test_an_attempt_of_a_worker_that_stopped_announcing_itself_is_sent_again(running, settings,
                                                                             django_capture_on_commit_callbacks):
    submission, node = running
    claim(submission, node, "gone")
    settings.SWEEP_AFTER_BROKER_RESTART = 10**9  # as if the broker had just started: workers announce again
    assert sweep(django_capture_on_commit_callbacks)["requeued"] == 0
    settings.SWEEP_AFTER_BROKER_RESTART = 0
    assert sweep(django_capture_on_commit_callbacks)["requeued"] == 1
    submission.refresh_from_db()
    assert (submission.status, submission.attempt) == ("queued", 2)


def test_a_live_worker_keeps_its_attempt_however_long_its_heartbeats_take(running,
                                                                          django_capture_on_commit_callbacks):
    """A site queue behind by minutes records heartbeats late: the claim and the announcement decide."""
    submission, node = running
    claim(submission, node, "alive")
    announce(node, "alive")
    age(submission, 3600, heartbeat_at=True, updated_at=True)
    counts = sweep(django_capture_on_commit_callbacks)
    assert counts["requeued"] == counts["failed"] == 0
    submission.refresh_from_db()
    assert (submission.status, submission.attempt) == ("running", 1)


def test_without_a_claim_a_silent_worker_is_still_found_by_its_heartbeats(running,
                                                                         django_capture_on_commit_callbacks):
    """An older worker's claim ("1") names nobody; the heartbeat timeout is what is left."""
    submission, _ = running
    broker.client().set(contracts.running_key(submission.pk, 1), "1")
    assert sweep(django_capture_on_commit_callbacks)["requeued"] == 0
    age(submission, 3600, heartbeat_at=True)
    assert sweep(django_capture_on_commit_callbacks)["requeued"] == 1


def signed_result(submission: Submission, sqa3d_files: dict[str, Any], keys: signing.Keys | bytes) -> dict[str, Any]:
    result = get_track("sqa3d").score(sqa3d_files["labels"], sqa3d_files["predictions"], lambda f, m="": None)
    report = {"submission_id": submission.pk, "attempt": submission.attempt, "result": result, "seconds": 0.5,
              "device": "cpu", "worker": "w:1"}
    return signing.signed(contracts.RECORD_RESULT, json.loads(json.dumps(report)), keys)


def test_a_report_lost_with_the_site_worker_is_recorded_from_the_claim(running, sqa3d_files, settings,
                                                                       django_capture_on_commit_callbacks):
    submission, node = running
    settings.SWEEP_AFTER_BROKER_RESTART = 0  # a broker up for long: a node that stopped announcing is gone
    kwargs = signed_result(submission, sqa3d_files, settings.RESULTS_SIGNING_KEYS)
    claim(submission, node, "gone", report=contracts.RECORD_RESULT, kwargs=kwargs)
    counts = sweep(django_capture_on_commit_callbacks)
    assert counts["recorded"] == 0, "just sent: its message is on its way"
    assert counts["requeued"] == 0, "a worker that reported and then stopped has not lost its attempt"
    claim(submission, node, "gone", report=contracts.RECORD_RESULT, kwargs=kwargs,
          since=time.time() - settings.SWEEP_UNSENT_AFTER - 1)
    assert sweep(django_capture_on_commit_callbacks)["recorded"] == 1
    submission.refresh_from_db()
    assert (submission.status, submission.attempt, submission.lost_attempts) == ("finished", 1, 0)
    assert Result.objects.get(submission=submission).metrics == kwargs["result"]["metrics"]
    # The message itself, redelivered hours later, changes nothing.
    assert lifecycle.record_result(**signing.verified(contracts.RECORD_RESULT, (), kwargs,
                                                      settings.RESULTS_SIGNING_KEYS)) is None
    assert Result.objects.filter(submission=submission).count() == 1


def test_a_report_in_a_claim_that_is_not_signed_by_a_worker_changes_nothing(running, sqa3d_files,
                                                                            django_capture_on_commit_callbacks):
    """Anyone who can write to the broker can write a claim: only the workers' key makes a report."""
    submission, node = running
    forged = signed_result(submission, sqa3d_files, b"a key that is not the site's, long enough to pass")
    claim(submission, node, "gone", report=contracts.RECORD_RESULT, kwargs=forged, since=time.time() - 3600)
    announce(node, "gone")
    assert sweep(django_capture_on_commit_callbacks)["recorded"] == 0
    submission.refresh_from_db()
    assert submission.status == "running" and not submission.results.exists()
    age(submission, 3600, heartbeat_at=True)  # nor does it hold anything up: the heartbeats decide
    assert sweep(django_capture_on_commit_callbacks)["requeued"] == 1


def test_a_failure_lost_with_the_site_worker_is_recorded_from_the_claim(running, settings,
                                                                         django_capture_on_commit_callbacks):
    submission, node = running
    report = {"submission_id": submission.pk, "attempt": 1, "kind": "invalid_input", "message": "Expected a list"}
    claim(submission, node, "gone", report=contracts.RECORD_FAILURE, since=time.time() - 3600,
          kwargs=signing.signed(contracts.RECORD_FAILURE, report, settings.RESULTS_SIGNING_KEYS))
    assert sweep(django_capture_on_commit_callbacks)["recorded"] == 1
    submission.refresh_from_db()
    assert (submission.status, submission.status_detail, submission.quota) == ("failed", "Expected a list",
                                                                               "rejected")


def test_a_live_worker_past_the_hard_time_limit_without_a_report_has_lost_the_attempt(
        running, settings, django_capture_on_commit_callbacks):
    """Its scoring process was killed (the time limit, the OOM killer) and the loss report went
    astray: the claim would otherwise stand for days."""
    submission, node = running
    announce(node, "alive")
    claim(submission, node, "alive", since=time.time() - settings.EVAL_TIME_LIMIT + 60)
    assert sweep(django_capture_on_commit_callbacks)["requeued"] == 0
    claim(submission, node, "alive", since=time.time() - settings.EVAL_TIME_LIMIT - settings.SWEEP_HEARTBEAT_TIMEOUT - 1)
    assert sweep(django_capture_on_commit_callbacks)["requeued"] == 1


def test_the_site_worker_asks_for_a_sweep_when_it_starts(sent_tasks, settings):
    from leaderboard.celery import app
    from leaderboard.submissions import tasks

    settings.SITE_QUEUE = "site-start"
    tasks._sweep_at_start(sender=SimpleNamespace(app=object()))  # another app's worker: not ours
    assert sent_tasks == []
    tasks._sweep_at_start(sender=SimpleNamespace(app=app))
    assert [(t["name"], t["queue"]) for t in sent_tasks] == [(contracts.SWEEP, "site-start")]


# Deferred intervals that could not be computed


@pytest.fixture
def waiting(owner, sqa3d_split, sqa3d_files, sent_tasks, monkeypatch):
    """A published result whose intervals were deferred to a follow-up."""
    monkeypatch.setenv("EVAL_BOOTSTRAP_INLINE_MAX", "1")
    entry, result = publish(owner, sqa3d_files, "Later")
    assert result["bootstrap"]["deferred"]
    return Result.objects.get(pk=entry.result_id)


def failed(result: Result, error: str, retry: bool) -> bool:
    return lifecycle.record_intervals(submission_id=result.submission_id, result_id=result.pk,
                                      revision=result.revision, intervals={}, bootstrap={}, error=error, retry=retry)


def test_intervals_whose_outcomes_are_missing_are_marked_so_on_the_result_and_its_page(client, owner, waiting):
    assert not failed(waiting, "the per-unit outcomes of this result are no longer kept", retry=False)
    waiting.refresh_from_db()
    assert "deferred" not in waiting.bootstrap and waiting.intervals == {}
    assert waiting.bootstrap["unavailable"] == "the per-unit outcomes of this result are no longer kept"
    [warning] = [w for w in waiting.warnings if w.startswith("No 95 % intervals")]
    assert "Re-scoring the submission computes them" in warning
    client.force_login(owner)
    page = client.get(f"/submissions/{waiting.submission_id}/").content.decode()
    assert "being computed" not in page and "No 95 % intervals: they could not be computed" in page
    api = client.get(f"/api/v1/submissions/{waiting.submission_id}").json()
    assert warning in api["result"]["warnings"]


def test_intervals_the_store_could_not_give_are_asked_again_then_given_up(waiting, sent_tasks, settings):
    settings.INTERVALS_MAX_TRIES, settings.INTERVALS_RETRY_SECONDS = 3, 60
    later = timezone.now()
    for tries in (1, 2):
        failed(waiting, "the per-unit outcomes could not be read (the store was unavailable)", retry=True)
        waiting.refresh_from_db()
        assert waiting.bootstrap["deferred"] and waiting.bootstrap["tries"] == tries
        sent_tasks.clear()
        assert sweeper.do_sweep(now=later)["intervals"] == 0, "not yet due"
        later += timedelta(seconds=60 * tries + 1)
        assert sweeper.do_sweep(now=later)["intervals"] == 1
        [asked] = [t for t in sent_tasks if t["name"] == contracts.COMPUTE_INTERVALS]
        assert asked["queue"].endswith(f"-sqa3d-v{waiting.scorer_version}-bulk")
        assert asked["kwargs"]["outcomes_key"] == contracts.outcomes_key(
            "sqa3d", waiting.labels_sha256, waiting.predictions_sha256, waiting.scorer_version)
        assert sweeper.do_sweep(now=later)["intervals"] == 0, "asked once"
    failed(waiting, "the per-unit outcomes could not be read (the store was unavailable)", retry=True)
    waiting.refresh_from_db()
    assert "deferred" not in waiting.bootstrap and waiting.bootstrap["unavailable"].startswith("the per-unit")


# What the workers keep of their outcomes


def test_the_retention_tells_each_tracks_workers_which_outcomes_rows_still_need(
        owner, sqa3d_split, sqa3d_files, sent_tasks, settings, monkeypatch):
    settings.OUTCOMES_KEEP_DAYS = 30
    row, _ = publish(owner, sqa3d_files, "OnTheBoard")
    unpublished = create(owner, sqa3d_files, "Private")
    result = get_track("sqa3d").score(sqa3d_files["labels"], sqa3d_files["predictions"], lambda f, m="": None)
    lifecycle.record_result(submission_id=unpublished.pk, attempt=unpublished.attempt,
                            result={**result, "predictions_sha256": "1" * 64})
    monkeypatch.setenv("EVAL_BOOTSTRAP_INLINE_MAX", "1")
    waiting = create(owner, sqa3d_files, "Waiting")
    deferred = get_track("sqa3d").score(sqa3d_files["labels"], sqa3d_files["predictions"], lambda f, m="": None)
    lifecycle.record_result(submission_id=waiting.pk, attempt=waiting.attempt,
                            result={**deferred, "predictions_sha256": "2" * 64})
    sent_tasks.clear()
    now = timezone.now()
    assert retention.do_prune_outcomes(now) == len(all_tracks())
    asks = {t["kwargs"]["track"]: t for t in sent_tasks if t["name"] == contracts.PRUNE_OUTCOMES}
    sqa3d = asks["sqa3d"]
    key = lambda r: contracts.outcomes_key("sqa3d", r.labels_sha256, r.predictions_sha256, r.scorer_version)  # noqa: E731
    assert sqa3d["kwargs"]["keep"] == sorted([key(Result.objects.get(pk=row.result_id)),
                                              key(Result.objects.get(submission=waiting))])
    assert key(Result.objects.get(submission=unpublished)) not in sqa3d["kwargs"]["keep"]
    assert sqa3d["kwargs"]["written_before"] == pytest.approx((now - timedelta(days=30)).timestamp())
    assert sqa3d["queue"].endswith(f"-sqa3d-v{get_track('sqa3d').scorer_version}-bulk")
    assert asks["openscan"]["kwargs"]["keep"] == []


def test_a_sweep_while_the_database_is_down_logs_its_traceback_once_then_a_line_each_until_it_works(
        monkeypatch, caplog):
    """Celery beat sweeps every SWEEP_INTERVAL s: a database down for an hour used to log 720 tracebacks.
    The error is a real driver's (PostgreSQL refusing), as Django hands it on; a bug is raised as before."""
    import logging

    from leaderboard.submissions import tasks
    from tests.leaderboard.test_unavailable import django_error, postgres_refused

    down = django_error(postgres_refused)
    outcomes: list[Any] = [down, down, down, {"sent": 0}, KeyError("a bug")]

    def do_sweep() -> dict[str, int]:
        outcome = outcomes.pop(0)
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    monkeypatch.setattr(sweeper, "do_sweep", do_sweep)
    monkeypatch.setattr(tasks.metrics, "count_sweep", lambda counts: None)
    with caplog.at_level(logging.WARNING, logger="leaderboard.submissions.tasks"):
        for _ in range(4):
            tasks.sweep.run()  # the task body (its __call__ runs signed messages only)
    records = [r for r in caplog.records if r.name == "leaderboard.submissions.tasks"]
    assert [bool(r.exc_info) for r in records] == [True, False, False, False]
    assert records[0].levelname == "ERROR" and "The database is unavailable" in records[0].getMessage()
    assert "3 in a row" in records[2].getMessage() and "The database is unavailable" in records[2].getMessage()
    assert "\n" not in records[1].getMessage() + records[2].getMessage()
    assert "The sweep works again after 3 failures in a row" in records[3].getMessage()
    with pytest.raises(KeyError):
        tasks.sweep.run()
