"""Faults injected into the real local service (run_local: Redis, gunicorn, site worker with
the sweeper, a scoring worker), on the embedded set-up (SQLite, its own Redis) and on PostgreSQL.

Every submission must end ``finished`` with exactly the offline scorer's numbers, or ``failed``
with a platform-error reason and its quota refunded; no result is written twice. The service runs
with the deploy's default clocks, and work resumes within ``BOUND`` seconds of the fault (or of
the restart, once the service answers again).
"""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import pytest
import requests

from evaluation_workers.tracks import get_track
from tests.faults.service import LocalService, drop_postgres, postgres_url

pytestmark = pytest.mark.live

BOUND = 30  # seconds for every submission of a scenario to end once the fault is over


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def service(request, tmp_path_factory):
    database_url = None
    if request.param == "postgres":
        base = os.environ.get("DATABASE_URL", "")
        if not base.startswith("postgres"):
            pytest.skip("PostgreSQL runs of the fault tests need DATABASE_URL=postgres://... (CI sets it)")
        database_url = postgres_url(base)
    svc = LocalService(tmp_path_factory.mktemp(f"faults-{request.param}"), database_url)
    try:
        svc.start()
        yield svc
    finally:
        svc.stop()
        if database_url:
            drop_postgres(database_url)


@pytest.fixture
def one_database(request):
    """For a fault of the broker or of a worker's host, which the database plays no part in: run once,
    on PostgreSQL where the run has it (CI), else on SQLite (each run costs 25-30 s of the suite)."""
    backend = request.node.callspec.params["service"]
    if backend == "sqlite" and os.environ.get("DATABASE_URL", "").startswith("postgres"):
        pytest.skip("a broker or worker-host fault: run on PostgreSQL only")


@pytest.fixture(scope="module")
def demo(service):
    """The demo SQA3D labels and predictions that load_demo wrote, and their offline score."""
    folder = service.data_dir / "demo" / "sqa3d"
    expected = get_track("sqa3d").score(folder / "labels", folder / "predictions.json", lambda f, m="": None)
    return {"predictions": folder / "predictions.json", "expected": expected}


def submit_many(service, demo, n, tag):
    ids = []
    for i in range(n):
        response = service.submit(demo["predictions"], f"{tag}-{i}")
        assert response.status_code == 201, response.text
        ids.append(response.json()["id"])
    return ids


def assert_exact_and_once(service, demo, ids, done):
    rows = service.rows(ids)
    for pk in ids:
        assert done[pk]["status"] == "finished", done[pk]
        assert done[pk]["result"]["metrics"] == demo["expected"]["metrics"]
        assert done[pk]["result"]["breakdown"] == demo["expected"]["breakdown"]
        assert rows[pk]["results"] == 1, rows[pk]
        assert rows[pk]["quota"] == "counted"


def test_token_polling_and_concurrent_uploads_on_the_default_set_up_lose_nothing(service, demo):
    """8 threads poll /api/v1/me with a token (each request used to write the token) while 12
    uploads arrive at once and are scored: no 500, nothing stuck."""
    stop = threading.Event()
    errors: list[int] = []

    def poll():
        while not stop.is_set():
            status = service.api("GET", "me").status_code
            if status != 200:
                errors.append(status)

    pollers = [threading.Thread(target=poll) for _ in range(8)]
    for t in pollers:
        t.start()
    results: list[requests.Response] = []
    uploaders = [threading.Thread(target=lambda i=i: results.append(service.submit(demo["predictions"], f"c-{i}")))
                 for i in range(12)]
    try:
        for t in uploaders:
            t.start()
        for t in uploaders:
            t.join(120)
        assert [r.status_code for r in results] == [201] * 12, [r.text[:200] for r in results if r.status_code != 201]
        ids = [r.json()["id"] for r in results]
        done = service.wait_done(ids, BOUND)
    finally:
        stop.set()
        for t in pollers:
            t.join(30)
    assert errors == []
    assert_exact_and_once(service, demo, ids, done)


def test_sigkill_of_the_scoring_worker_main_process_mid_scoring(service, demo):
    service.hold("hold-scoring", 3)
    try:
        ids = submit_many(service, demo, 3, "kill-eval")
        service.wait_status(ids[0], "running")
        ready = service.ready_count()
        old = service.kill("scoring-worker")
        service.wait_restarted("scoring-worker", old, ready)
    finally:
        service.hold("hold-scoring", 0)
    done = service.wait_done(ids, BOUND)
    assert_exact_and_once(service, demo, ids, done)
    assert service.rows(ids)[ids[0]]["attempt"] >= 1


def test_the_scoring_process_killed_as_the_oom_killer_would_is_reported_lost_and_scored_again(service, demo):
    service.hold("hold-scoring", 3)
    try:
        [pk] = submit_many(service, demo, 1, "oom")
        service.wait_status(pk, "running")
        main = service.pid("scoring-worker")
        [child] = [int(p) for p in Path(f"/proc/{main}/task/{main}/children").read_text().split()]
        os.kill(child, signal.SIGKILL)  # the pool process, not the worker: its main process sees it die
        deadline = time.monotonic() + 30
        while service.rows([pk])[pk]["lost"] < 1:
            assert time.monotonic() < deadline, "the lost attempt was never reported"
            time.sleep(0.5)
    finally:
        service.hold("hold-scoring", 0)
    done = service.wait_done([pk], BOUND)
    assert_exact_and_once(service, demo, [pk], done)
    assert service.rows([pk])[pk]["attempt"] == 2


def test_sigkill_of_the_site_worker_inside_record_result(service, demo):
    service.hold("record-result", 3)
    try:
        [pk] = submit_many(service, demo, 1, "kill-site")
        # The result is being recorded when the worker's heartbeats stop and progress says 100 %.
        deadline = time.monotonic() + 60
        while service.api("GET", f"submissions/{pk}").json()["progress"] < 1.0:
            assert time.monotonic() < deadline, "never reached recording"
            time.sleep(0.2)
        time.sleep(1)
        ready = service.ready_count()
        old = service.kill("site-worker")
    finally:
        service.hold("record-result", 0)
    service.wait_restarted("site-worker", old, ready)
    done = service.wait_done([pk], BOUND)
    assert_exact_and_once(service, demo, [pk], done)


def test_redis_stopped_and_started_again_with_submissions_queued_and_running(service, demo):
    service.hold("hold-scoring", 2)
    try:
        ids = submit_many(service, demo, 4, "redis")
        service.wait_status(ids[0], "running")
        old = service.kill("redis")
        service.wait_restarted("redis", old)
    finally:
        service.hold("hold-scoring", 0)
    done = service.wait_done(ids, BOUND)
    assert_exact_and_once(service, demo, ids, done)


def test_an_upload_while_redis_hangs_is_accepted_and_sent_once_redis_answers(service, demo, one_database):
    """SIGSTOP: the broker accepts connections but never answers (worse than refusing them). Every call of
    a request to it shares REDIS_REQUEST_TIMEOUT (2 s): the upload answers and stays queued, and /readyz
    keeps the process in rotation (degraded). The times measured are printed (``-s``)."""
    redis = service.pid("redis")

    def timed(call):
        started = time.monotonic()
        return call(), time.monotonic() - started

    os.kill(redis, signal.SIGSTOP)
    try:
        response, took = timed(lambda: service.submit(demo["predictions"], "hung-broker"))
        ready, ready_s = timed(lambda: requests.get(f"{service.url}/readyz", timeout=30))
        page, page_s = timed(lambda: requests.get(f"{service.url}/benchmarks/sqa3d/?hung=1", timeout=30))
    finally:
        os.kill(redis, signal.SIGCONT)
    print(f"\nhung Redis: upload {took:.2f} s, /readyz {ready_s:.2f} s ({ready.json()['status']}), "
          f"uncached board {page_s:.2f} s")
    assert response.status_code == 201, response.text
    assert response.json()["status"] == "queued"
    assert took < 5, took
    assert ready.status_code == 200 and ready_s < 3, (ready.text, ready_s)
    assert ready.json()["status"] == "degraded" and ready.json()["checks"]["broker"]["status"] == "fail"
    assert ready.json()["checks"]["database"]["status"] == "ok"
    assert page.status_code == 200 and page_s < 5, page_s
    pk = response.json()["id"]
    scored, scored_s = timed(lambda: service.wait_done([pk], BOUND))
    print(f"hung Redis: the upload scored {scored_s:.1f} s after SIGCONT")
    assert_exact_and_once(service, demo, [pk], scored)


def test_an_upload_taken_away_before_scoring_fails_as_the_platforms_fault_and_is_refunded(service, demo):
    service.hold("hold-scoring", 3)
    try:
        [pk] = submit_many(service, demo, 1, "storage")
        service.wait_status(pk, "running")
        for path in (service.data_dir / "uploads").rglob(f"{pk}/*"):
            path.unlink()
    finally:
        service.hold("hold-scoring", 0)
    done = service.wait_done([pk], BOUND)[pk]
    assert done["status"] == "failed"
    assert done["error"]["kind"] == "platform_error"
    assert "could not be read from storage" in done["error"]["message"]
    assert "/" not in done["error"]["message"] and "Errno" not in done["error"]["message"]
    assert service.rows([pk])[pk]["quota"] == "refunded"


def test_the_web_server_keeps_serving_while_a_worker_is_dead(service):
    old = service.kill("scoring-worker", signal.SIGKILL)
    assert requests.get(f"{service.url}/benchmarks/sqa3d/", timeout=10).status_code == 200
    service.wait_restarted("scoring-worker", old)


def test_everything_killed_with_20_in_flight_and_started_again(service, demo):
    # Long enough that the cut falls inside the first attempt's scoring even when the site queue
    # records its "running" seconds late (a loaded machine): an attempt whose report was already
    # sent at the cut is recorded as it is, not sent again. Free: nothing scores before the cut.
    service.hold("hold-scoring", 15)
    try:
        ids = submit_many(service, demo, 20, "power-cut")
        service.wait_status(ids[0], "running")
        service.kill_everything()
    finally:
        service.hold("hold-scoring", 0)
    service.start()
    done = service.wait_done(ids, BOUND)
    assert_exact_and_once(service, demo, ids, done)
    assert service.rows(ids)[ids[0]]["attempt"] == 2, "the attempt running at the cut was sent again"


def test_a_scoring_worker_that_vanishes_mid_scoring_is_replaced_by_another(service, demo, one_database):
    """SIGSTOP of the whole worker, as a host that drops off the network: it neither dies (nobody
    starts it again) nor announces itself any more. The other worker scores the attempt."""
    with service.spare_worker() as spare:
        service.hold("hold-scoring", 3)
        try:
            [pk] = submit_many(service, demo, 1, "vanished")
            service.wait_status(pk, "running")
            taken_by = service.rows([pk])[pk]["worker"]
            main = spare.pid if taken_by.startswith("spare@") else service.pid("scoring-worker")
            group = [main, *[int(p) for p in Path(f"/proc/{main}/task/{main}/children").read_text().split()]]
            for pid in group:
                os.kill(pid, signal.SIGSTOP)
            service.hold("hold-scoring", 0)
            try:
                done = service.wait_done([pk], BOUND)
            finally:
                for pid in group:
                    os.kill(pid, signal.SIGCONT)
        finally:
            service.hold("hold-scoring", 0)
        assert_exact_and_once(service, demo, [pk], done)
        rows = service.rows([pk])[pk]
        assert (rows["attempt"], rows["lost"]) == (2, 1) and rows["worker"].split("@")[0] != taken_by.split("@")[0]
        time.sleep(4)  # the stopped worker goes on with the old attempt: its report changes nothing
        assert_exact_and_once(service, demo, [pk], service.wait_done([pk], BOUND))
        assert service.rows([pk])[pk]["attempt"] == 2
