"""/healthz, /readyz and /metrics (issue 26): what an operator's probes and Prometheus read."""

from __future__ import annotations

import io
import types
import uuid

import pytest
from django.test import Client
from prometheus_client.parser import text_string_to_metric_families

from leaderboard.celery import app
from leaderboard.submissions import lifecycle, services
from tests.conftest import free_port

TOKEN = "metrics-token-" + "x" * 20


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of a scrape, by name and sorted labels."""
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def scrape(client: Client, settings) -> dict:
    settings.METRICS_TOKEN = TOKEN
    response = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    assert response.status_code == 200 and response["Content-Type"].startswith("text/plain")
    return samples(response.content.decode())


def dead_broker(settings) -> None:
    settings.CELERY_BROKER_URL = f"redis://127.0.0.1:{free_port()}/0"


def test_healthz_answers_without_any_io_whatever_the_host(client, db, settings, django_assert_num_queries):
    dead_broker(settings)
    with django_assert_num_queries(0):
        response = client.get("/healthz", HTTP_HOST="10.9.8.7:8000")
    assert response.status_code == 200 and response.json() == {"status": "ok"}
    assert response["Cache-Control"] == "no-store"


def test_readyz_reports_each_check_with_its_latency(client, db):
    response = client.get("/readyz", HTTP_HOST="10.9.8.7:8000")
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "ok" and set(body["checks"]) == {"database", "broker", "storage"}
    for check in body["checks"].values():
        assert check["status"] == "ok" and check["latency_ms"] >= 0
    assert {name: check["required"] for name, check in body["checks"].items()} == {
        "database": True, "broker": False, "storage": False}


def test_readyz_is_degraded_not_failed_when_the_broker_is_down(client, db, settings):
    """Pages and uploads still work without the broker (uploads wait queued): a load balancer must keep
    the process in rotation, and the operator still sees it, in the JSON and the metrics."""
    dead_broker(settings)
    response = client.get("/readyz")
    assert response.status_code == 200 and "Retry-After" not in response
    body = response.json()
    assert body["status"] == "degraded"
    assert body["checks"]["broker"]["status"] == "fail" and body["checks"]["database"]["status"] == "ok"
    assert body["checks"]["broker"]["error"] == "The message broker is unavailable (ConnectionError)"
    after = scrape(client, settings)
    assert after[("leaderboard_readiness", (("state", "degraded"),))] == 1.0
    assert after[("leaderboard_readiness", (("state", "ok"),))] == 0.0
    assert after[("leaderboard_ready", (("check", "broker"),))] == 0.0


def test_readyz_reports_storage_degraded_without_room_for_the_largest_upload(client, db, settings, sqa3d_split):
    from leaderboard.ops import health

    settings.READYZ_MIN_FREE_BYTES = 2**62
    response = client.get("/readyz")
    assert response.status_code == 200 and response.json()["status"] == "degraded"
    storage = response.json()["checks"]["storage"]
    assert storage["status"] == "fail" and "MiB free for uploads (expected at least" in storage["error"]
    # Unset, the room wanted is what the largest upload of a split needs (the track's limit, or less).
    from evaluation_workers.tracks import all_tracks
    from leaderboard.benchmarks.models import Benchmark

    settings.READYZ_MIN_FREE_BYTES = 0
    settings.UPLOAD_MAX_BYTES = {**{t.name: 1000 for t in all_tracks()}, "sqa3d": 12345}
    health._largest = None
    assert health.needed_free_bytes() == 12345
    settings.UPLOAD_MAX_BYTES = {}
    Benchmark.objects.exclude(track="sqa3d").update(is_active=False)  # only the benchmarks hosted count
    health._largest = None
    assert health.needed_free_bytes() == sqa3d_split.benchmark.spec.max_upload_bytes
    health._largest = None


def test_readyz_answers_within_its_deadline_whatever_hangs(client, db, settings, monkeypatch):
    """A check that never returns (a narrow stand-in: the real hung services are in tests/faults/) is
    reported failed at the deadline, and the next call waits on the same check instead of starting another."""
    import threading
    import time

    from leaderboard.ops import health

    release, calls = threading.Event(), []

    def hangs() -> None:
        calls.append(1)
        release.wait(10)

    settings.READYZ_TIMEOUT = 0.3
    monkeypatch.setitem(health.CHECKS, "broker", hangs)
    try:
        for _ in range(2):
            started = time.monotonic()
            response = client.get("/readyz")
            assert time.monotonic() - started < 1
            assert response.status_code == 200 and response.json()["status"] == "degraded"
            assert response.json()["checks"]["broker"]["error"] == ("The message broker is unavailable "
                                                                    "(no answer within 0.3 s)")
        assert len(calls) == 1
        monkeypatch.setitem(health.CHECKS, "database", hangs)
        response = client.get("/readyz")
        assert response.status_code == 503 and response.json()["status"] == "fail"
        assert response.json()["checks"]["database"]["error"] == ("The database is unavailable "
                                                                  "(no answer within 0.3 s)")
    finally:
        release.set()


def test_metrics_answer_no_one_by_default(client, db):
    response = client.get("/metrics")
    assert response.status_code == 403 and b"METRICS_TOKEN" in response.content
    assert b"leaderboard_" not in response.content


def test_metrics_answer_the_token_or_an_allowed_address(client, db, settings):
    import ipaddress

    settings.METRICS_TOKEN = TOKEN
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer wrong").status_code == 403
    assert client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}").status_code == 200
    settings.METRICS_TOKEN = ""
    settings.METRICS_ALLOWED_NETWORKS = [ipaddress.ip_network("10.0.0.0/8")]
    assert client.get("/metrics", REMOTE_ADDR="10.1.2.3").status_code == 200
    assert client.get("/metrics", REMOTE_ADDR="11.1.2.3").status_code == 403


@pytest.fixture
def own_queues(settings, redis_url):
    """Queue names of this test only, in the session's Redis, so that no worker takes its messages."""
    tag = uuid.uuid4().hex[:8]
    settings.EVAL_QUEUE_CPU, settings.EVAL_QUEUE_GPU = f"eval-cpu-m{tag}", f"eval-gpu-m{tag}"
    settings.SITE_QUEUE = f"site-m{tag}"
    return lifecycle.all_queues()


def test_metrics_count_submissions_queues_sweeps_and_the_page_cache(
        client, owner, sqa3d_split, sqa3d_files, sent_tasks, settings, redis_url, own_queues, monkeypatch):
    before = scrape(client, settings)
    # Submissions: one queued (sending is recorded, not done), one refused for its format.
    for name, content in (("Good", sqa3d_files["predictions"].read_bytes()), ("Bad", b"{not json")):
        services.check_create_submission(user=owner, track="sqa3d", split="test", method_name=name,
                                         file=io.BytesIO(content), file_name="p.json")
    # Two messages in one scoring queue, sent at known times (the oldest waits at the right end).
    queue = own_queues[0]
    clock = types.SimpleNamespace(time=lambda: 1000.0)
    monkeypatch.setattr("leaderboard.celery.time", clock)
    with app.connection_for_write(redis_url) as connection:
        for sent in (1000.0, 2000.0):
            clock.time = lambda sent=sent: sent
            # The app's own send_task (``sent_tasks`` records the submissions' sends instead).
            type(app).send_task(app, "evaluation.score_submission", kwargs={"submission_id": 0}, queue=queue,
                                connection=connection)
    # Sweeps, a cached page read twice.
    from leaderboard.ops.metrics import count_sweep

    count_sweep({"sent": 2, "requeued": 1, "waiting": 7})
    count_sweep({"sent": 1})
    # A signed message refused (forged, or sent again): counted in the broker by whichever side refused it.
    from leaderboard.celery import count_refused

    count_refused("submissions.record_progress", "replay")
    monkeypatch.setattr(app.conf, "broker_url", redis_url)
    anonymous = Client()
    assert anonymous.get("/benchmarks/sqa3d/")["X-Page-Cache"] == "miss"
    assert anonymous.get("/benchmarks/sqa3d/")["X-Page-Cache"] == "hit"

    after = scrape(client, settings)

    def delta(name: str, **labels: str) -> float:
        key = (name, tuple(sorted(labels.items())))
        return after.get(key, 0.0) - before.get(key, 0.0)

    assert after[("leaderboard_submissions", (("failure_kind", ""), ("status", "queued")))] == 1
    assert after[("leaderboard_submissions", (("failure_kind", "invalid_input"), ("status", "failed")))] == 1
    assert after[("leaderboard_queue_messages", (("queue", queue),))] == 2
    import time

    age = after[("leaderboard_queue_oldest_message_age_seconds", (("queue", queue),))]
    assert abs(age - (time.time() - 1000.0)) < 120
    assert after[("leaderboard_queue_messages", (("queue", settings.SITE_QUEUE),))] == 0
    assert delta("leaderboard_sweeper_actions_total", action="sent") == 3
    assert delta("leaderboard_sweeper_actions_total", action="requeued") == 1
    assert not [k for k in after if k[0].startswith("leaderboard_sweeper") and ("action", "waiting") in k[1]]
    assert delta("leaderboard_refused_messages_total", task="submissions.record_progress", reason="replay") == 1
    assert delta("leaderboard_page_cache_requests_total", result="hit") == 1
    assert delta("leaderboard_page_cache_requests_total", result="miss") == 1
    assert {after[("leaderboard_ready", (("check", c),))] for c in ("database", "broker", "storage")} == {1.0}


def test_a_broker_that_is_down_leaves_only_its_part_of_the_scrape_out(client, db, settings):
    dead_broker(settings)
    after = scrape(client, settings)
    assert not [k for k in after if k[0] in ("leaderboard_queue_messages", "leaderboard_sweeper_actions_total",
                                             "leaderboard_refused_messages_total")]
    assert after[("leaderboard_ready", (("check", "broker"),))] == 0.0
    assert after[("leaderboard_ready", (("check", "database"),))] == 1.0
    assert [k for k in after if k[0] == "leaderboard_page_cache_requests_total"]


def test_readyz_checks_the_bucket_when_uploads_go_to_s3(client, db, settings, s3_storage):
    assert client.get("/readyz").json()["checks"]["storage"]["status"] == "ok"
    settings.S3_BUCKET = "no-such-bucket"
    response = client.get("/readyz")
    assert response.status_code == 200 and response.json()["status"] == "degraded"
    assert response.json()["checks"]["storage"]["error"] == "File storage is unavailable (ClientError)"
