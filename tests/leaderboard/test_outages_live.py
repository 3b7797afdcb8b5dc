"""The real site (gunicorn, deploy settings) under real outages: a full disk, a database cut and back (issue 26).

- A full disk: the site's UPLOADS_DIR on a small tmpfs (needs root to mount it;
  skipped otherwise: tests/leaderboard/test_unavailable.py injects ENOSPC instead),
  filled to the last byte.
- PostgreSQL (DATABASE_URL=postgres://..., as CI has; skipped on SQLite): the
  site's pooled connection terminated under it, then the database refusing
  connections and coming back.
- gunicorn's processes summed at /metrics.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import fill, small_tmpfs
from tests.faults.service import drop_postgres, postgres_url
from tests.leaderboard.live_site import live_site
from tests.leaderboard.test_ops import samples


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    yield from small_tmpfs(tmp_path / "disk", "48m")


def test_a_full_disk_is_503_with_retry_after_and_passes_once_space_is_back(small_disk, redis_url, tmp_path):
    """The uploads' volume full (the database elsewhere): an upload is 503 saying so, counted as disk_full;
    /readyz stays 200 ("degraded"), since everything but uploads still works; all passes once space is back."""
    with live_site(tmp_path / "data", redis_url, UPLOADS_DIR=str(small_disk / "uploads"),
                   READYZ_MIN_FREE_BYTES=str(2**20)) as site:
        assert site.upload("Before").status_code == 201
        filler = fill(small_disk)
        refused = site.upload("Full")
        assert refused.status_code == 503, refused.text
        assert int(refused.headers["Retry-After"]) > 0 and refused.json()["error"]["code"] == "unavailable"
        assert refused.json()["error"]["message"].startswith("The server's disk is full; the file was not stored")
        ready = site.get("/readyz")
        assert ready.status_code == 200 and ready.json()["status"] == "degraded", ready.text
        assert ready.json()["checks"]["storage"]["status"] == "fail"
        assert ready.json()["checks"]["database"]["status"] == "ok"
        assert site.get("/healthz").status_code == 200
        counted = samples(site.metrics())
        assert counted[("leaderboard_unavailable_responses_total", (("cause", "disk_full"),))] == 1
        assert counted[("leaderboard_readiness", (("state", "degraded"),))] == 1
        filler.unlink()
        assert site.upload("After").status_code == 201
        ready = site.get("/readyz")
        assert ready.status_code == 200 and ready.json()["status"] == "ok"


@pytest.fixture
def postgres() -> Iterator[str]:
    base = os.environ.get("DATABASE_URL", "")
    if not base.startswith("postgres"):
        pytest.skip("needs DATABASE_URL=postgres://... (CI sets it)")
    url = postgres_url(base)
    try:
        yield url
    finally:
        drop_postgres(url)


def admin(url: str, sql: str) -> None:
    import psycopg

    server, name = url.rsplit("/", 1)
    with psycopg.connect(f"{server}/postgres", autocommit=True) as conn:
        conn.execute(sql.replace("{db}", name))


CUT = "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{db}' AND pid <> pg_backend_pid()"


def test_a_returning_database_costs_no_request_and_a_missing_one_is_503(postgres, redis_url, tmp_path):
    with live_site(tmp_path / "data", redis_url, database_url=postgres, threads=1, CONN_MAX_AGE="600") as site:
        for _ in range(3):  # each time the pooled connection is cut under the site, the next request succeeds
            assert site.api("GET", "/api/v1/me").status_code == 200
            admin(postgres, CUT)
            assert site.api("GET", "/api/v1/me").status_code == 200
        admin(postgres, 'ALTER DATABASE "{db}" ALLOW_CONNECTIONS false')
        admin(postgres, CUT)
        api = site.api("GET", "/api/v1/me")
        assert api.status_code == 503 and int(api.headers["Retry-After"]) > 0
        assert api.json()["error"] == {"code": "unavailable", "message": api.json()["error"]["message"],
                                       "retry_at": api.json()["error"]["retry_at"]}
        assert api.json()["error"]["message"].startswith("The database is unavailable")
        page = site.get(f"/benchmarks/sqa3d/?uncached={uuid.uuid4().hex}")
        assert page.status_code == 503 and "Briefly unavailable" in page.text and "Retry-After" in page.headers
        assert site.get("/readyz").json()["checks"]["database"]["status"] == "fail"
        admin(postgres, 'ALTER DATABASE "{db}" ALLOW_CONNECTIONS true')
        assert site.api("GET", "/api/v1/me").status_code == 200  # the first request after it is back
        assert "Traceback" not in site.log.read_text()


def test_metrics_sum_every_web_process(redis_url, tmp_path):
    with live_site(tmp_path / "data", redis_url, workers=2, threads=1) as site:
        for _ in range(20):
            site.get("/benchmarks/sqa3d/", headers={"Connection": "close"})
        counted = samples(site.metrics())
        requests = sum(v for (name, labels), v in counted.items() if name == "leaderboard_page_cache_requests_total")
        assert requests == 20
        assert counted[("leaderboard_page_cache_requests_total", (("result", "hit"),))] >= 18
