"""The readiness checks behind ``/readyz``: can this web process reach what a request needs?

- ``database``: a ``SELECT 1`` on this process's connection (PostgreSQL gives
  up connecting after ``DATABASE_CONNECT_TIMEOUT`` seconds);
- ``broker``: a ``PING`` to the broker (Redis, 2-second timeouts);
- ``storage``: local uploads (``UPLOADS_DIR``): a probe file written and
  removed, and at least ``READYZ_MIN_FREE_BYTES`` free on its disk; S3: a
  ``HeadBucket`` with short timeouts and no retries.

Each check's error says what failed in words (``outages.WHAT``) and the
exception's type, never a host, path or password; the detail goes to the log.
The page cache is not checked: pages render without it.
"""

from __future__ import annotations

import logging
import os
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import connection

from leaderboard.lib import storage
from leaderboard.ops.outages import WHAT, outage

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Check:
    ok: bool
    seconds: float
    error: str = ""

    def as_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"status": "ok" if self.ok else "fail", "latency_ms": round(self.seconds * 1000, 1)}
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
    free = shutil.disk_usage(folder).free
    if free < settings.READYZ_MIN_FREE_BYTES:
        raise NotReady(f"only {free // 2**20:,} MiB free for uploads (expected at least "
                       f"{settings.READYZ_MIN_FREE_BYTES // 2**20:,} MiB)")


CHECKS: dict[str, Callable[[], None]] = {"database": check_database, "broker": check_broker,
                                         "storage": check_storage}


def _run(name: str, check: Callable[[], None]) -> Check:
    started = time.monotonic()
    try:
        check()
    except NotReady as exc:
        return Check(False, time.monotonic() - started, str(exc))
    except Exception as exc:
        cause = outage(exc)
        if cause is None and name == "storage" and isinstance(exc, (OSError, *_s3_errors())):
            cause = "storage"  # an unwritable uploads folder, a bucket refused or missing: not ready either
        if cause is None:
            raise  # a bug in the check: /readyz fails loudly
        log.warning("Readiness check %s failed: %s: %s", name, type(exc).__name__, exc)
        return Check(False, time.monotonic() - started, f"{WHAT[cause]} ({type(exc).__name__})")
    return Check(True, time.monotonic() - started)


def readiness() -> dict[str, Check]:
    """Each check, in order; ready when every one is ``ok``."""
    return {name: _run(name, check) for name, check in CHECKS.items()}
