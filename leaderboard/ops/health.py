"""The readiness checks behind ``/readyz``: can this web process serve, and what works less well?

- ``database`` (required): a ``SELECT 1`` on this process's connection (each wait
  bounded by ``DATABASE_QUERY_TIMEOUT`` in a web process, connecting by
  ``DATABASE_CONNECT_TIMEOUT``). Without it nothing but cached pages can be served:
  ``/readyz`` fails, and a load balancer takes the process out of rotation.
- ``broker`` (not required): a ``PING`` to the broker. Without it pages and uploads
  still work (uploads stay queued and the sweeper sends them once it answers): the
  process is *degraded*, not out of rotation.
- ``storage`` (not required): local uploads (``UPLOADS_DIR``): a probe file written
  and removed, and room for the largest upload a split accepts (or
  ``READYZ_MIN_FREE_BYTES`` when set); S3: a ``HeadBucket`` with short timeouts and no
  retries. Without it uploads answer 503 but everything else works: degraded.

``readiness`` runs each check on a thread of its own and waits ``READYZ_TIMEOUT``
seconds (2) for all of them, whatever hangs: a check still running then is reported
failed ("no answer within 2 s"), and the next call waits for that same check rather
than starting another, so a hung service never piles up threads.

Each check's error says what failed in words (``outages.WHAT``) and the
exception's type, never a host, path or password; the detail goes to the log.
The page cache is not checked: pages render without it.
"""

from __future__ import annotations

import logging
import os
import shutil
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django import db
from django.conf import settings
from django.db import connection

from leaderboard.lib import storage
from leaderboard.ops.outages import BROKER, DATABASE, STORAGE, WHAT, outage

log = logging.getLogger(__name__)

OK, DEGRADED, FAIL = "ok", "degraded", "fail"
# The checks whose failure means this process cannot serve (the others only degrade it).
REQUIRED = frozenset({"database"})
# How long the largest split's upload limit is trusted before it is read from the database again.
LIMIT_SECONDS = 300.0


@dataclass(frozen=True)
class Check:
    ok: bool
    seconds: float
    error: str = ""
    required: bool = False

    def as_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"status": "ok" if self.ok else "fail", "latency_ms": round(self.seconds * 1000, 1),
                               "required": self.required}
        if self.error:
            out["error"] = self.error
        return out


class NotReady(Exception):
    """A check's own finding (too little free space), in words."""


def check_database() -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
        cursor.fetchone()


def check_broker() -> None:
    from leaderboard.submissions import broker

    broker.client().ping()


def _s3_errors() -> tuple[type[BaseException], ...]:
    from botocore.exceptions import BotoCoreError, ClientError

    return (BotoCoreError, ClientError)


def _s3_probe_client() -> Any:
    import boto3
    from botocore.config import Config

    return boto3.client(
        "s3", endpoint_url=settings.S3_ENDPOINT_URL or None, region_name=settings.S3_REGION or None,
        aws_access_key_id=settings.S3_ACCESS_KEY_ID or None, aws_secret_access_key=settings.S3_SECRET_ACCESS_KEY or None,
        config=Config(connect_timeout=2, read_timeout=3, retries={"max_attempts": 1},
                      s3={"addressing_style": settings.S3_ADDRESSING_STYLE}))


_largest: tuple[float, int] | None = None  # (when it was read, bytes)


def needed_free_bytes() -> int:
    """Free space the uploads' disk must have: ``READYZ_MIN_FREE_BYTES`` when set, else the largest file
    a split accepts (read from the database every ``LIMIT_SECONDS``; the last value while it is down)."""
    global _largest
    if settings.READYZ_MIN_FREE_BYTES > 0:
        return int(settings.READYZ_MIN_FREE_BYTES)
    if _largest is not None and time.monotonic() - _largest[0] < LIMIT_SECONDS:
        return _largest[1]
    from leaderboard.benchmarks.selectors import largest_upload_limit

    try:
        _largest = (time.monotonic(), largest_upload_limit())
    except Exception as exc:
        if outage(exc) is None or _largest is None:
            raise  # a bug, or the database down with nothing read before: the check says so
    return _largest[1]


def check_storage() -> None:
    if storage.is_s3():
        _s3_probe_client().head_bucket(Bucket=settings.S3_BUCKET)
        return
    folder = Path(settings.UPLOADS_DIR)
    folder.mkdir(parents=True, exist_ok=True)
    probe = folder / f".readyz-{os.getpid()}"
    try:
        probe.write_bytes(b"ok")  # a full disk refuses even this (ENOSPC)
    finally:
        probe.unlink(missing_ok=True)
    free, needed = shutil.disk_usage(folder).free, needed_free_bytes()
    if free < needed:
        raise NotReady(f"only {free // 2**20:,} MiB free for uploads (expected at least {needed // 2**20:,} MiB: "
                       "the largest upload a split accepts, or READYZ_MIN_FREE_BYTES)")


CHECKS: dict[str, Callable[[], None]] = {"database": check_database, "broker": check_broker,
                                         "storage": check_storage}
CAUSES = {"database": DATABASE, "broker": BROKER, "storage": STORAGE}


def _run(name: str, check: Callable[[], None]) -> Check:
    started = time.monotonic()
    required = name in REQUIRED
    try:
        # The check's thread keeps its database connection between runs, as a request's thread does; as
        # between requests, one that failed (a deadline closed it) or grew too old is replaced.
        db.close_old_connections()
        check()
    except NotReady as exc:
        return Check(False, time.monotonic() - started, str(exc), required)
    except Exception as exc:
        cause = outage(exc)
        if cause is None and name == "storage" and isinstance(exc, (OSError, *_s3_errors())):
            cause = STORAGE  # an unwritable uploads folder, a bucket refused or missing: not ready either
        if cause is None:
            raise  # a bug in the check: /readyz fails loudly
        log.warning("Readiness check %s failed: %s: %s", name, type(exc).__name__, exc)
        return Check(False, time.monotonic() - started, f"{WHAT[cause]} ({type(exc).__name__})", required)
    return Check(True, time.monotonic() - started, required=required)


_threads: dict[str, ThreadPoolExecutor] = {}
_running: dict[str, tuple[Future[Check], float]] = {}
_lock = threading.Lock()


def _started(name: str, check: Callable[[], None]) -> tuple[Future[Check], float]:
    """The check ``name`` as it runs now on its thread: the one still running, or a new one."""
    with _lock:
        running = _running.get(name)
        if running is None or running[0].done():
            if name not in _threads:
                _threads[name] = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"readyz-{name}")
            running = _running[name] = (_threads[name].submit(_run, name, check), time.monotonic())
        return running


def readiness() -> dict[str, Check]:
    """Each check, in order, within ``READYZ_TIMEOUT`` seconds in all."""
    deadline = time.monotonic() + settings.READYZ_TIMEOUT
    started = {name: _started(name, check) for name, check in CHECKS.items()}
    checks = {}
    for name, (future, since) in started.items():
        try:
            checks[name] = future.result(timeout=max(0.0, deadline - time.monotonic()))
        except FutureTimeout:
            checks[name] = Check(False, time.monotonic() - since, f"{WHAT[CAUSES[name]]} (no answer within "
                                 f"{settings.READYZ_TIMEOUT:g} s)", name in REQUIRED)
    return checks


def verdict(checks: dict[str, Check]) -> str:
    """``ok``; ``degraded`` when only checks that are not required fail; ``fail`` when a required one does."""
    if all(check.ok for check in checks.values()):
        return OK
    return FAIL if any(not check.ok and check.required for check in checks.values()) else DEGRADED
