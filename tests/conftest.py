"""Fixtures shared by all tests: array backends, users and teams."""

from __future__ import annotations

import importlib
import os
import socket
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
# This session's broker keys of attempts (evaluation_workers.contracts): each session, and each
# earlier run on the same Redis database, numbers its submissions from 1 again; a claim left by one
# would make the workers of another drop its submission as taken. Workers inherit it.
os.environ["BROKER_KEY_PREFIX"] = f"lb-test-{os.getpid()}-{os.urandom(4).hex()}"


def _xp_params() -> list:
    params = [pytest.param("numpy", id="numpy"), pytest.param("array_api_strict", id="strict")]
    params.append(pytest.param("cupy", id="cupy", marks=pytest.mark.gpu))
    return params


@pytest.fixture(params=_xp_params())
def xp(request):
    """The array namespace under test: numpy (array-api-compat), array_api_strict, cupy."""
    name = request.param
    if name == "numpy":
        from array_api_compat import numpy as compat_numpy

        return compat_numpy
    if name == "cupy":
        cupy = pytest.importorskip("cupy")
        try:
            if cupy.cuda.runtime.getDeviceCount() < 1:
                pytest.skip("no GPU")
        except Exception as exc:  # no driver
            pytest.skip(f"no GPU: {exc}")
        from array_api_compat import cupy as compat_cupy

        return compat_cupy
    return importlib.import_module(name)


@pytest.fixture(autouse=True, scope="session")
def _private_scorer_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """The scorer's user cache (``EVAL_CACHE_DIR``) in a folder of this session, never ~/.cache."""
    previous = os.environ.get("EVAL_CACHE_DIR")
    os.environ["EVAL_CACHE_DIR"] = str(tmp_path_factory.mktemp("scorer-cache"))
    yield
    if previous is None:
        os.environ.pop("EVAL_CACHE_DIR", None)
    else:
        os.environ["EVAL_CACHE_DIR"] = previous


# PostgreSQL: each run has its own test database (``test_<name>_<pid>``, leaderboard/settings.py).


@pytest.fixture(scope="session")
def django_db_setup(django_db_setup: None, django_db_blocker: Any) -> Iterator[None]:
    """pytest-django's test database; on PostgreSQL, dropped at the end even when worker or
    live-server threads left connections to it open (pytest-django's DROP DATABASE would fail
    with "being accessed by other users" and leave it behind). Only this run's database is
    touched: a run beside it on the same server may be in another process namespace."""
    from django.db import connection

    yield
    if connection.vendor != "postgresql":
        return
    ours = connection.settings_dict["NAME"]
    with django_db_blocker.unblock():
        connection.close()
        with connection._nodb_cursor() as cursor:
            cursor.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                           "WHERE datname = %s AND pid <> pg_backend_pid()", [ours])


@pytest.fixture(scope="session")
def private_postgres() -> Iterator[Any]:
    """A PostgreSQL server of this session's own (tests/faults/postgres.py), for tests that stop it."""
    from tests.faults.postgres import private_postgres as server

    yield from server()


# A real Redis for every test that needs one: REDIS_URL when it answers, else one started here.


def stop(proc: Any, seconds: float = 15) -> None:
    """End a process the test started: SIGTERM, then SIGKILL if it is still there after ``seconds``."""
    import subprocess

    proc.terminate()
    try:
        proc.wait(seconds)
    except subprocess.TimeoutExpired:
        proc.kill()


def small_tmpfs(mount: Path, size: str) -> Iterator[Path]:
    """A tmpfs of ``size`` (e.g. "8m") mounted at ``mount`` while the generator runs (a fixture's
    body: ``yield from``); skips the test without root."""
    import subprocess

    mount.mkdir()
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mount)],
                                           capture_output=True).returncode != 0:
        pytest.skip("mounting a small tmpfs needs root")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def fill(disk: Path) -> Path:
    """Write until the disk refuses another byte; returns the file that holds it all."""
    filler = disk / "filler"
    with open(filler, "wb", buffering=0) as f:
        for size in (2**20, 4096, 1):
            try:
                while f.write(b"\0" * size):
                    pass
            except OSError:
                pass
    return filler


def free_port(address: str = "127.0.0.1") -> int:
    """A port free on ``address`` now (the kernel's choice), for a server about to bind it there: a
    random one could be taken, and a server that cannot bind exits while a test talks to whatever
    holds the port."""
    with socket.socket() as probe:
        probe.bind((address, 0))
        return int(probe.getsockname()[1])


def _reachable(url: str) -> bool:
    from urllib.parse import urlparse

    parsed = urlparse(url)
    try:
        with socket.create_connection((parsed.hostname or "127.0.0.1", parsed.port or 6379), timeout=1):
            return True
    except OSError:
        return False


@pytest.fixture(scope="session")
def redis_url() -> Iterator[str]:
    """REDIS_URL when it answers, else a Redis started for this test session."""
    url = os.environ.get("REDIS_URL")
    if url and _reachable(url):
        yield url
        return
    sys.path.insert(0, str(ROOT / "deploy"))
    import local_redis

    proc, url = local_redis.start(Path(os.environ.get("TMPDIR", "/tmp")) / f"lb-test-redis-{os.getpid()}")
    try:
        yield url
    finally:
        proc.terminate()
        proc.wait(10)
