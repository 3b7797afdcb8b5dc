"""Replays change nothing, and a rotated key keeps work in flight going: every kind of signed message,
captured as it crossed the real Redis between a scoring worker process and a site worker, sent again.

The site sends score requests, intervals requests, paired-test requests and prune requests (captured
as its app hands them to the broker); the scoring worker sends progress, heartbeats, results,
failures, intervals, paired-test answers and a request for a sweep; a lost attempt's report and Celery
beat's jobs come too (captured as the site worker runs them). Sent again by anyone with the broker,
each is refused by its nonce (counted under ``contracts.refused_key``); with the receivers' memory
wiped (a broker restarted without its file, or a week later), each is refused by the state it names:
nothing a page shows changes, and an answer for a result revision that moved on is dropped and counted.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import uuid
from collections import Counter
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest
import redis
from celery.signals import before_task_publish, task_postrun, task_prerun
from django.db.models import F

from evaluation_workers import contracts, signing
from evaluation_workers.worker.app import SigningCelery
from leaderboard.rankings.models import LeaderboardEntry, PairedTest
from leaderboard.submissions import services
from leaderboard.submissions.models import Result, Submission
from tests.leaderboard.conftest import describe_method, scoring_worker
from tests.leaderboard.test_signed_reports import app_on, wait_for

pytestmark = pytest.mark.live

NEW_KEY = "the-rotated-in-key-" + "n" * 32
# What the site sends to the workers (the rest, the workers send to the site).
TO_WORKERS = {contracts.SCORE_SUBMISSION, contracts.COMPUTE_INTERVALS, contracts.PAIRED_TEST,
              contracts.PRUNE_OUTCOMES}


@pytest.fixture(scope="module")
def worker(redis_url: str, storage_dirs: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A scoring worker process holding the new key and the old one (the session's, ``default``), beating
    every 0.2 s while each scoring is held 0.5 s, deferring every result's intervals; its own queues."""
    tag = uuid.uuid4().hex[:8]
    folder = tmp_path_factory.mktemp("replays")
    (folder / "hold-scoring").write_text("0.5")
    found = SimpleNamespace(base=f"eval-cpu-replays-{tag}", site=f"site-replays-{tag}", hold=f"eval-cpu-held-{tag}",
                            log=folder / "worker.log", old=os.environ["RESULTS_SIGNING_KEY"])
    with scoring_worker(redis_url, storage_dirs, found.base, found.log, EVAL_RESULTS_SIGNING_KEY="",
                        EVAL_RESULTS_SIGNING_KEYS=f"2026:{NEW_KEY},default:{found.old}", EVAL_HEARTBEAT_SECONDS="0.2",
                        EVAL_FAULT_DIR=str(folder), EVAL_BOOTSTRAP_INLINE_MAX="1", EVAL_SITE_QUEUE=found.site,
                        EVAL_OUTCOMES_DIR=str(folder / "outcomes")):
        yield found
    client = redis.Redis.from_url(redis_url)
    for key in client.scan_iter(match=f"*-{tag}*"):
        client.delete(key)


@pytest.fixture
def site(worker: Any, transactional_db: None, settings: Any, redis_url: str) -> Any:
    """The site on the worker's queues; ``site.running()`` runs a site worker in this process meanwhile."""
    from celery.contrib.testing.worker import start_worker

    from leaderboard.celery import app

    settings.SITE_QUEUE, settings.EVAL_QUEUE_CPU, settings.EVAL_GPU_TRACKS = worker.site, worker.base, []
    settings.VALIDATE_AT_UPLOAD_MAX_BYTES = 0  # a bad file reaches the worker, which reports its failure
    settings.QUOTA_IN_FLIGHT, settings.QUOTA_PER_DAY = 10, 10
    app.conf.CELERY_BROKER_URL = app.conf.broker_url = redis_url
    settings.RESULTS_SIGNING_KEYS = signing.parse_keys(f"2026:{NEW_KEY},default:{worker.old}", "TEST")

    @contextlib.contextmanager
    def running() -> Iterator[None]:
        with start_worker(app, pool="solo", perform_ping_check=False, queues=[worker.site], shutdown_timeout=20):
            yield

    return SimpleNamespace(running=running, app=app, redis=redis.Redis.from_url(redis_url))


@contextlib.contextmanager
def captured() -> Iterator[tuple[list[tuple[str, dict[str, Any], str]], list[tuple[str, dict[str, Any]]]]]:
    """(what the site hands the broker for the workers: name, signed kwargs, queue; what the site worker
    runs: name, kwargs as they came), while the block runs."""
    sent: list[tuple[str, dict[str, Any], str]] = []
    ran: list[tuple[str, dict[str, Any]]] = []

    def on_publish(sender: str = "", body: Any = None, routing_key: str = "", **_: Any) -> None:
        if sender in TO_WORKERS:
            sent.append((sender, json.loads(json.dumps(body[1])), routing_key))

    def on_run(task: Any = None, kwargs: dict[str, Any] | None = None, **_: Any) -> None:
        ran.append((task.name, json.loads(json.dumps(kwargs))))

    before_task_publish.connect(on_publish, weak=False)
    task_prerun.connect(on_run, weak=False)
    try:
        yield sent, ran
    finally:
        before_task_publish.disconnect(on_publish)
        task_prerun.disconnect(on_run)


@contextlib.contextmanager
def counting_runs() -> Iterator[list[str]]:
    """The names of the tasks the site worker finishes (refused or not) while the block runs."""
    done: list[str] = []

    def on_done(task: Any = None, **_: Any) -> None:
        done.append(task.name)

    task_postrun.connect(on_done, weak=False)
    try:
        yield done
    finally:
        task_postrun.disconnect(on_done)


def refusals(client: redis.Redis) -> Counter[str]:
    return Counter({k.decode(): int(v) for k, v in client.hgetall(contracts.refused_key()).items()})


def submit(owner: Any, name: str, content: bytes) -> Submission:
    return services.check_create_submission(user=owner, track="sqa3d", split="test", method_name=name,
                                            file=io.BytesIO(content), file_name="p.json")


def flipped(predictions: bytes, n: int) -> bytes:
    answers = json.loads(predictions)
    for row in answers[:n]:
        row["answer"] = "definitely not the answer"
    return json.dumps(answers).encode()


def state(pks: list[int]) -> tuple[list[Any], ...]:
    """Everything a replay could change: the submissions, their results, the paired tests and board rows."""
    return (list(Submission.objects.filter(pk__in=pks).order_by("pk").values(
                "pk", "status", "attempt", "lost_attempts", "progress", "heartbeat_at", "status_detail", "quota",
                "failure_kind", "worker", "updated_at")),
            list(Result.objects.filter(submission_id__in=pks).order_by("pk").values(
                "pk", "revision", "metrics", "intervals", "bootstrap", "warnings", "updated_at")),
            list(PairedTest.objects.order_by("pk").values("pk", "findings", "resamples", "error", "computed_at",
                                                          "sent_at")),
            list(LeaderboardEntry.objects.filter(submission_id__in=pks).order_by("pk").values(
                "pk", "result_id", "scores", "intervals")))


def settled(pks: list[int]) -> bool:
    subs = Submission.objects.filter(pk__in=pks)
    return (all(s.status in {"finished", "failed"} for s in subs)
            and not Result.objects.filter(submission_id__in=pks, bootstrap__deferred=True).exists()
            and not PairedTest.objects.filter(computed_at__isnull=True).exists())


def once(messages: list[Any]) -> list[Any]:
    """Each message once (by its nonce), in the order first seen."""
    return list({m[1][signing.NONCE]: m for m in reversed(messages)}.values())[::-1]


def replay(client_url: str, site_queue: str, sent: list[tuple[str, dict[str, Any], str]],
           ran: list[tuple[str, dict[str, Any]]]) -> None:
    """Send every captured message again, as it was, from a plain app: what anyone with the broker can do."""
    with app_on(client_url) as anyone:
        for name, kwargs, queue in sent:
            anyone.send_task(name, kwargs=kwargs, queue=queue)
        for name, kwargs in ran:
            anyone.send_task(name, kwargs=kwargs, queue=site_queue)


def test_every_kind_of_message_sent_again_changes_nothing_by_its_nonce_and_then_by_its_state(
        site, worker, redis_url, owner, sqa3d_split, sqa3d_files, settings):
    predictions = sqa3d_files["predictions"].read_bytes()
    settings.EVAL_QUEUE_CPU = worker.hold  # D's first attempt waits where no worker looks: its worker "dies"
    lost = submit(owner, "Dropped", predictions)
    settings.EVAL_QUEUE_CPU = worker.base
    with captured() as (sent, ran), site.running():
        a = submit(owner, "Alpha", predictions)
        b = submit(owner, "Broken", b"[1, 2]")
        c = submit(owner, "Gamma", flipped(predictions, 30))
        with app_on(redis_url, SigningCelery) as worker_main:  # what a worker's main process sends
            worker_main.send_task(contracts.RECORD_LOST, queue=worker.site, kwargs={
                "submission_id": lost.pk, "attempt": 1, "reason": "the scoring process was killed"})
        pks = [a.pk, b.pk, c.pk, lost.pk]
        wait_for(lambda: Submission.objects.filter(pk__in=[a.pk, c.pk], status="finished").count() == 2,
                 "two scored submissions", worker.log)
        for one in (a, c):
            describe_method(one.method)
            services.check_publish(owner, one)  # once both are on the board, a paired test of the two is asked
        site.app.send_task("submissions.apply_retention", kwargs={}, queue=worker.site)  # as Celery beat does
        wait_for(lambda: settled(pks) and PairedTest.objects.exists(), "every answer", worker.log)
        wait_for(lambda: site.redis.llen(worker.site) == 0 and "submissions.apply_retention" in {n for n, _ in ran},
                 "the site queue drained", worker.log)
    sent, ran = once(sent), once(ran)  # a task Celery retried ran twice: one message
    names = Counter(name for name, *_ in sent) + Counter(name for name, *_ in ran)
    assert {contracts.SCORE_SUBMISSION, contracts.COMPUTE_INTERVALS, contracts.PAIRED_TEST, contracts.PRUNE_OUTCOMES,
            contracts.RECORD_PROGRESS, contracts.RECORD_HEARTBEAT, contracts.RECORD_RESULT, contracts.RECORD_FAILURE,
            contracts.RECORD_LOST, contracts.RECORD_INTERVALS, contracts.RECORD_PAIRED_TEST, contracts.SWEEP,
            "submissions.apply_retention"} <= set(names), names
    rows = {s.pk: s for s in Submission.objects.filter(pk__in=pks)}
    assert (rows[b.pk].status, rows[lost.pk].status, rows[lost.pk].attempt) == ("failed", "finished", 2)
    before = state(pks)

    # Sent again while the receivers remember them: each refused by its nonce.
    counted = refusals(site.redis)
    with site.running():
        replay(redis_url, worker.site, sent, ran)
        wait_for(lambda: refusals(site.redis) - counted == Counter({f"{n}|replay": k for n, k in names.items()}),
                 "every message refused as a replay", worker.log)
    assert state(pks) == before

    # Forgotten (a broker that lost its memory, or a week later), with A re-scored and waiting for its
    # intervals, and the paired test of A and C asked again (what a re-score does): their states refuse them.
    site.redis.delete(*site.redis.scan_iter(match=contracts.seen_key("*")))
    [a_result] = Result.objects.filter(submission=a)
    Result.objects.filter(pk=a_result.pk).update(revision=F("revision") + 1, intervals={},
                                                 bootstrap={**a_result.bootstrap, "deferred": True})
    PairedTest.objects.update(computed_at=None, findings={})
    before = state(pks)
    counted, skipped = refusals(site.redis), worker.log.read_text().count(": stale")
    with site.running(), counting_runs() as done:
        replay(redis_url, worker.site, sent, ran)
        # Every answer names a revision that moved on since (the intervals that arrived bumped A's and C's,
        # re-asking their test each time; A was bumped again above): each captured answer, and the worker's
        # answer to each request sent again, is stale.
        stale = Counter({f"{contracts.RECORD_INTERVALS}|stale": names[contracts.RECORD_INTERVALS]
                         + names[contracts.COMPUTE_INTERVALS],
                         f"{contracts.RECORD_PAIRED_TEST}|stale": names[contracts.RECORD_PAIRED_TEST]
                         + names[contracts.PAIRED_TEST]})
        scores = names[contracts.SCORE_SUBMISSION]
        # The site worker runs each message again, and the workers' answers to the requests sent again.
        wait_for(lambda: len(done) >= len(ran) + names[contracts.COMPUTE_INTERVALS] + names[contracts.PAIRED_TEST]
                 and refusals(site.redis) - counted == stale
                 and worker.log.read_text().count(": stale") == skipped + scores, "every message handled", worker.log)
    assert state(pks) == before


def test_a_request_signed_with_the_old_key_is_scored_and_recorded_after_the_rotation_and_refused_once_it_is_removed(
        site, worker, redis_url, owner, sqa3d_split, sqa3d_files, settings):
    old = signing.Keys([("default", worker.old.encode())])
    settings.RESULTS_SIGNING_KEYS = old  # before the rotation: the site holds the old key alone
    with captured() as (sent, _):
        rotated = submit(owner, "InFlight", sqa3d_files["predictions"].read_bytes())
    [(_, request, _)] = [m for m in sent if m[0] == contracts.SCORE_SUBMISSION]
    assert signing.key_id_of(request) == "default"
    # The worker already holds new,old: it scores the request and reports under the new key, which the site
    # (no worker of it running yet) learns now.
    settings.RESULTS_SIGNING_KEYS = signing.parse_keys(f"2026:{NEW_KEY},default:{worker.old}", "TEST")
    with site.running():
        wait_for(lambda: Submission.objects.filter(pk=rotated.pk, status="finished").exists() and
                 not Result.objects.filter(submission=rotated, bootstrap__deferred=True).exists(),
                 "the request in flight scored and recorded", worker.log)
    claim = json.loads(site.redis.get(contracts.running_key(rotated.pk, 1)))
    assert signing.key_id_of(claim["kwargs"]) == "2026"

    # The old key removed: a message signed with it is refused, and changes nothing.
    settings.RESULTS_SIGNING_KEYS = signing.parse_keys(f"2026:{NEW_KEY}", "TEST")
    settings.EVAL_QUEUE_CPU = worker.hold
    waiting = submit(owner, "Waiting", sqa3d_files["predictions"].read_bytes())
    counted = refusals(site.redis)
    result = json.loads(json.dumps(claim["kwargs"]["result"]))
    with site.running(), app_on(redis_url) as anyone:
        anyone.send_task(contracts.RECORD_RESULT, queue=worker.site, kwargs=signing.signed(
            contracts.RECORD_RESULT, {"submission_id": waiting.pk, "attempt": 1, "result": result, "seconds": 1.0,
                                      "device": "cpu", "worker": "old@host:1"}, old))
        wait_for(lambda: refusals(site.redis) - counted == Counter({f"{contracts.RECORD_RESULT}|signature": 1}),
                 "the old key's message refused", worker.log)
    waiting.refresh_from_db()
    assert waiting.status == "queued" and not waiting.results.exists()
