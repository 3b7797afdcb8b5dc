"""The lifecycle's rescue paths against a real Redis: the outbox, the sweeper, refunds."""

from __future__ import annotations

import dataclasses
import io
import json
import uuid
from datetime import timedelta

import pytest
from django.core import mail
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from evaluation_workers import contracts
from leaderboard.accounts.services import do_create_token
from leaderboard.submissions import broker, lifecycle, services, sweeper
from leaderboard.submissions.models import Submission

DEAD_BROKER = "redis://127.0.0.1:1/0"


@pytest.fixture
def real_broker(settings, redis_url):
    """Sends really go to the test Redis, to a queue of this test only (no worker consumes it)."""
    from leaderboard.celery import app

    settings.EVAL_QUEUE_CPU = f"eval-lifecycle-{uuid.uuid4().hex[:8]}"
    settings.EVAL_GPU_TRACKS = []
    queue = lifecycle.queue_for("sqa3d")
    before = (app.conf.broker_url, app.conf.get("CELERY_BROKER_URL"))
    app.conf.CELERY_BROKER_URL = app.conf.broker_url = redis_url
    yield queue
    broker.client().delete(queue)
    app.conf.broker_url, app.conf.CELERY_BROKER_URL = before


def create(owner, sqa3d_files, method="MyNet") -> Submission:
    return services.check_create_submission(user=owner, track="sqa3d", split="test", method_name=method,
                                            file=io.BytesIO(sqa3d_files["predictions"].read_bytes()),
                                            file_name="predictions.json")


def queued_attempts(queue: str) -> list[tuple[int, int]]:
    return [broker._score_request(raw) for raw in broker.client().lrange(queue, 0, -1)]


def age(submission: Submission, seconds: float, **fields) -> None:
    past = timezone.now() - timedelta(seconds=seconds)
    Submission.objects.filter(pk=submission.pk).update(**{f: past for f in fields or ("queued_at", "sent_at")})


def test_a_broker_outage_during_an_upload_is_no_error_and_the_sweeper_sends_it_later(
        client, owner, sqa3d_split, sqa3d_files, real_broker, redis_url, settings, monkeypatch,
        django_capture_on_commit_callbacks):
    """Narrow: the send fails as kombu fails when Redis is down (the fault tests stop a real one)."""
    from kombu.exceptions import OperationalError

    from leaderboard.celery import app

    real_send = app.send_task

    def down(*args, **kwargs):
        raise OperationalError("Error 111 connecting to 127.0.0.1:6379. Connection refused.")

    monkeypatch.setattr(app, "send_task", down)
    settings.CELERY_BROKER_URL = DEAD_BROKER
    headers = {"Authorization": f"Token {do_create_token(owner)}"}
    with django_capture_on_commit_callbacks(execute=True), open(sqa3d_files["predictions"], "rb") as f:
        response = client.post("/api/v1/submissions", {"track": "sqa3d", "split": "test", "method_name": "Net",
                                                      "file": f}, headers=headers)
    assert response.status_code == 201, response.content
    submission = Submission.objects.get(pk=response.json()["id"])
    assert submission.status == "queued" and submission.sent_at is None

    monkeypatch.setattr(app, "send_task", real_send)
    settings.CELERY_BROKER_URL = redis_url
    assert sweeper.do_sweep()["sent"] == 0  # not yet: the request may still be sending it
    age(submission, 60, queued_at=True)
    assert sweeper.do_sweep()["sent"] == 1
    submission.refresh_from_db()
    assert submission.sent_at is not None and submission.attempt == 1
    assert queued_attempts(real_broker) == [(submission.pk, 1)]


def test_a_message_waiting_for_a_busy_worker_is_never_failed_for_waiting(owner, sqa3d_split, sqa3d_files,
                                                                        real_broker,
                                                                        django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        submission = create(owner, sqa3d_files)
    age(submission, 3600)
    counts = sweeper.do_sweep()
    assert counts["waiting"] == 1 and counts["requeued"] == 0
    submission.refresh_from_db()
    assert submission.status == "queued" and submission.attempt == 1


def test_a_lost_message_is_sent_again_as_a_new_attempt(owner, sqa3d_split, sqa3d_files, real_broker,
                                                       django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        submission = create(owner, sqa3d_files)
    broker.client().delete(real_broker)  # a broker that lost its data
    age(submission, 3600)
    with django_capture_on_commit_callbacks(execute=True):
        assert sweeper.do_sweep()["requeued"] == 1
    submission.refresh_from_db()
    assert submission.status == "queued" and submission.attempt == 2 and submission.lost_attempts == 0
    assert queued_attempts(real_broker) == [(submission.pk, 2)]
    assert int(broker.client().get(contracts.attempt_key(submission.pk))) == 2


def test_a_message_held_by_a_worker_that_died_before_its_first_heartbeat_counts_as_lost(
        owner, sqa3d_split, sqa3d_files, real_broker, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        submission = create(owner, sqa3d_files)
    redis = broker.client()
    raw = redis.lpop(real_broker)  # delivered, as kombu keeps it: [message, exchange, routing key]
    redis.hset("unacked", f"tag-{submission.pk}", json.dumps([json.loads(raw), "", real_broker]))
    try:
        age(submission, 3600)
        with django_capture_on_commit_callbacks(execute=True):
            assert sweeper.do_sweep()["requeued"] == 1
        submission.refresh_from_db()
        assert submission.attempt == 2 and submission.lost_attempts == 1
    finally:
        redis.hdel("unacked", f"tag-{submission.pk}")


def test_a_worker_that_stops_beating_is_replaced_then_the_submission_fails_as_the_platforms_fault(
        owner, sqa3d_split, sqa3d_files, real_broker, settings, django_capture_on_commit_callbacks):
    settings.SWEEP_MAX_LOST_ATTEMPTS = 2
    owner.email = "alice@example.org"
    owner.save()
    with django_capture_on_commit_callbacks(execute=True):
        submission = create(owner, sqa3d_files)
    for attempt in (1, 2):
        lifecycle.record_heartbeat(submission_id=submission.pk, attempt=attempt, worker="w1")
        age(submission, 3600, heartbeat_at=True)
        with django_capture_on_commit_callbacks(execute=True):
            sweeper.do_sweep()
    submission.refresh_from_db()
    assert submission.status == "failed" and submission.failure_kind == "platform_error"
    assert "stopped unexpectedly 2 times" in submission.status_detail
    assert submission.quota == "refunded"
    assert [m.to for m in mail.outbox] == [["alice@example.org"]]
    assert int(broker.client().get(contracts.attempt_key(submission.pk))) == 0  # a late copy is skipped


def test_a_lost_pool_process_report_sends_a_new_attempt_and_stale_reports_change_nothing(
        owner, sqa3d_split, sqa3d_files, real_broker, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        submission = create(owner, sqa3d_files)
    lifecycle.record_progress(submission_id=submission.pk, attempt=1, fraction=0.3)
    with django_capture_on_commit_callbacks(execute=True):
        lifecycle.record_lost(submission_id=submission.pk, attempt=1, reason="the scoring process was killed")
    lifecycle.record_lost(submission_id=submission.pk, attempt=1, reason="a duplicate report")
    submission.refresh_from_db()
    assert (submission.status, submission.attempt, submission.lost_attempts) == ("queued", 2, 1)
    assert sorted(queued_attempts(real_broker)) == [(submission.pk, 1), (submission.pk, 2)]


def test_submissions_left_behind_by_a_dead_request_are_rescued(owner, sqa3d_split, sqa3d_files, real_broker,
                                                               django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        submitted = create(owner, sqa3d_files, "A")
    Submission.objects.filter(pk=submitted.pk).update(status="submitted", attempt=0)
    stalled = services.do_create_counted(user=owner, team=submitted.team, split=sqa3d_split,
                                         method_name="B", file_name="b.json")
    Submission.objects.filter(pk__in=[submitted.pk, stalled.pk]).update(
        updated_at=timezone.now() - timedelta(hours=2), created_at=timezone.now() - timedelta(hours=2))
    with django_capture_on_commit_callbacks(execute=True):
        counts = sweeper.do_sweep()
    assert counts["submitted"] == 1 and counts["abandoned"] == 1
    submitted.refresh_from_db()
    stalled.refresh_from_db()
    assert submitted.status == "queued"
    assert stalled.status == "failed" and stalled.quota == "refunded" and stalled.failure_kind == "platform_error"


def test_a_validator_that_breaks_leaves_the_check_to_the_worker_instead_of_a_500(
        client, owner, sqa3d_split, sqa3d_files, sent_tasks, monkeypatch, django_capture_on_commit_callbacks):
    from leaderboard.benchmarks import models

    real = models.get_track

    def broken(name):
        def boom(*args):
            raise RuntimeError("validator bug")
        return dataclasses.replace(real(name), validate=boom)

    monkeypatch.setattr(models, "get_track", broken)
    client.force_login(owner)
    with django_capture_on_commit_callbacks(execute=True), open(sqa3d_files["predictions"], "rb") as f:
        response = client.post("/api/v1/submissions", {"track": "sqa3d", "split": "test", "method_name": "N",
                                                      "file": f})
    assert response.status_code == 201
    assert response.json()["status"] == "queued" and len(sent_tasks) == 1


def test_a_store_that_fails_is_a_503_and_the_submission_counts_nothing(client, owner, sqa3d_split,
                                                                       sqa3d_files, monkeypatch):
    from leaderboard.lib import storage

    def broken(*args):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(storage, "_store", broken)
    client.force_login(owner)
    with open(sqa3d_files["predictions"], "rb") as f:
        response = client.post("/api/v1/submissions", {"track": "sqa3d", "split": "test", "method_name": "N",
                                                      "file": f})
    assert response.status_code == 503
    assert "No space" not in response.content.decode() and "/" not in json.dumps(response.json()["error"])
    [submission] = Submission.objects.all()
    assert submission.status == "failed" and submission.quota == "refunded"


def test_a_maintainer_can_requeue_a_stuck_submission_from_the_desk(client, maintainer, owner, sqa3d_split,
                                                                   sqa3d_files, sent_tasks,
                                                                   django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        submission = create(owner, sqa3d_files)
    lifecycle.record_progress(submission_id=submission.pk, attempt=1, fraction=0.5)
    client.force_login(maintainer)
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(f"/moderation/submissions/{submission.pk}/rescore/", {"reason": "stuck"})
    assert response.status_code == 302
    submission.refresh_from_db()
    assert submission.status == "queued" and submission.attempt == 2
    assert [c["kwargs"]["attempt"] for c in sent_tasks] == [1, 2]


def test_a_token_request_writes_the_token_at_most_once_a_minute(client, owner, sqa3d_split):
    headers = {"Authorization": f"Token {do_create_token(owner)}"}
    assert client.get("/api/v1/me", headers=headers).status_code == 200
    with CaptureQueriesContext(connection) as queries:
        assert client.get("/api/v1/me", headers=headers).status_code == 200
    assert not [q for q in queries.captured_queries if q["sql"].lstrip().upper().startswith("UPDATE")]


def test_the_desk_shows_where_queued_and_running_work_is(client, maintainer, owner, sqa3d_split, sqa3d_files,
                                                          real_broker, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        waiting, running = create(owner, sqa3d_files, "W"), create(owner, sqa3d_files, "R")
    lifecycle.record_heartbeat(submission_id=running.pk, attempt=1, worker="gpu-host:42")
    client.force_login(maintainer)
    page = client.get("/moderation/?queue=running").content.decode()
    assert f"waiting on <code>{real_broker}</code>" in page
    assert "gpu-host:42, heard from" in page
    assert f"<code>{real_broker}</code> 2" in page  # both messages still in the broker
    assert page.count("Re-queue") == 2 and waiting.pk != running.pk


def test_replacing_a_lost_attempt_never_touches_one_that_finished_meanwhile(owner, sqa3d_split, sqa3d_files,
                                                                            sent_tasks):
    """The sweeper reads the database, then the broker: a result recorded between the two must stand."""
    submission = create(owner, sqa3d_files)
    result = get_result(sqa3d_files)
    lifecycle.record_result(submission_id=submission.pk, attempt=1, result=result)
    assert lifecycle.do_enqueue(submission.pk, lost=1) is None
    submission.refresh_from_db()
    assert (submission.status, submission.attempt) == ("finished", 1)
    assert lifecycle.do_enqueue(submission.pk, lost=1) is None


def get_result(sqa3d_files):
    from evaluation_workers.tracks import get_track

    return get_track("sqa3d").score(sqa3d_files["labels"], sqa3d_files["predictions"], lambda f, m="": None)
