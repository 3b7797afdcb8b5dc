"""A PostgreSQL that hangs under the running site (gunicorn as the README runs it: 2 processes x 4 threads).

The server of the test's own (``private_postgres``) is stopped with SIGSTOP while
the site holds pooled connections to it: the kernel still acknowledges, nothing
answers. Every read that needs it must answer 503 with Retry-After (not hang),
``/healthz`` and the cached board must still answer at once, and once the server
continues everything works again without a restart, and nothing accepted before
is lost. The bounds are generous; the times measured are printed (``-s``).
"""

from __future__ import annotations

import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests

from tests.leaderboard.live_site import live_site

pytestmark = pytest.mark.live

WORKERS, THREADS = 2, 4


def timed(call):
    started = time.monotonic()
    try:
        response = call()
    except requests.RequestException as exc:
        return exc, time.monotonic() - started
    return response, time.monotonic() - started


def test_a_hung_database_holds_at_most_the_threads_less_one_and_the_site_recovers(private_postgres, redis_url,
                                                                                  tmp_path):
    database = private_postgres.create_database(f"lb_hung_{uuid.uuid4().hex[:8]}")
    # Pooled connections as deployed (the test run's own CONN_MAX_AGE is 0).
    with live_site(tmp_path / "data", redis_url, database_url=database, workers=WORKERS, threads=THREADS,
                   CONN_MAX_AGE="60") as site:
        before = site.upload("Before the hang")
        assert before.status_code == 201, before.text
        assert site.get("/benchmarks/sqa3d/").status_code == 200
        assert site.get("/benchmarks/sqa3d/").headers["X-Page-Cache"] == "hit"
        # Threads of both processes hold pooled connections, as on a site in use.
        with ThreadPoolExecutor(2 * WORKERS * THREADS) as pool:
            warm = list(pool.map(lambda i: site.get(f"/api/v1/tracks?warm={i}").status_code,
                                 range(8 * WORKERS * THREADS)))
        assert set(warm) == {200}
        pooled = private_postgres.connections(database)

        reads: list = [None] * (3 * WORKERS * THREADS)  # three times the threads' worth, uncached
        def read(i: int) -> None:
            reads[i] = timed(lambda: site.get(f"/api/v1/tracks?hung={i}", timeout=60))

        with private_postgres.hung():
            readers = [threading.Thread(target=read, args=(i,)) for i in range(len(reads))]
            for t in readers:
                t.start()
            time.sleep(0.5)  # all of them in flight
            healthz, healthz_s = timed(lambda: site.get("/healthz", timeout=10))
            board, board_s = timed(lambda: site.get("/benchmarks/sqa3d/", timeout=10))
            ready, ready_s = timed(lambda: site.get("/readyz", timeout=20))
            refused, refused_s = timed(lambda: site.upload("During the hang"))
            for t in readers:
                t.join(60)
        back_s, back = None, None
        resumed = time.monotonic()
        while time.monotonic() - resumed < 30:
            back = site.get(f"/api/v1/tracks?after={uuid.uuid4().hex}", timeout=30)
            if back.status_code == 200:
                back_s = time.monotonic() - resumed
                break
            time.sleep(0.1)
        after = site.upload("After the hang")
        kept = site.api("GET", f"/api/v1/submissions/{before.json()['id']}")
        mine = site.api("GET", "/api/v1/submissions").json()["submissions"]

    read_s = sorted(round(s, 2) for _, s in reads)
    print(f"\nhung PostgreSQL ({pooled} pooled connections), {len(reads)} uncached reads on {WORKERS}x{THREADS} "
          f"threads: /healthz {healthz_s:.2f} s, "
          f"cached board {board_s:.2f} s, /readyz {ready_s:.2f} s, upload {refused_s:.2f} s, "
          f"reads' 503 in {read_s} s; first read served {back_s} s after SIGCONT")
    assert healthz.status_code == 200 and healthz_s < 1, (healthz, healthz_s)
    assert board.status_code == 200 and board.headers["X-Page-Cache"] == "hit" and board_s < 1, (board, board_s)
    for response, seconds in reads:
        assert isinstance(response, requests.Response) and seconds < 15, (response, seconds)
        assert response.status_code == 503 and int(response.headers["Retry-After"]) > 0, response.text
        assert response.json()["error"]["message"].startswith("The database is unavailable")
    assert ready.status_code == 503 and ready_s < 3, (ready, ready_s)
    assert ready.json()["checks"]["database"]["status"] == "fail"
    assert refused.status_code == 503 and refused_s < 15, (refused, refused_s)
    # Back without a restart; what was accepted is there, what was refused was never counted.
    assert back_s is not None and back_s < 10, back
    assert after.status_code == 201, after.text
    assert kept.status_code == 200 and kept.json()["status"] == "queued"
    assert sorted(s["method"] for s in mine) == ["After the hang", "Before the hang"], mine
    assert "Traceback" not in site.log.read_text()
