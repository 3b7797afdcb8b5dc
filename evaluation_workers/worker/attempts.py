"""Which attempt a worker may score, and its sign of life while it does (the broker's Redis).

The site notes each submission's current attempt under ``contracts.attempt_key``
(0 once it is done or cancelled). Before scoring, a worker checks it, so a
message of an older attempt (redelivered after a crash, or sent twice by the
sweeper) is dropped unscored; and it holds ``contracts.running_key`` with an
expiry that its heartbeat renews, so a second delivery of the same attempt
while the first is alive is dropped too. Where the keys cannot be read (the
broker is briefly away) the worker scores: the site drops stale reports anyway.
"""

from __future__ import annotations

import functools
import logging
from typing import Any

from evaluation_workers import contracts

log = logging.getLogger(__name__)


@functools.lru_cache(maxsize=2)
def _client(url: str) -> Any:
    import redis

    return redis.Redis.from_url(url, socket_timeout=3, socket_connect_timeout=3)


def _redis() -> Any | None:
    from evaluation_workers.worker.app import app

    url = str(app.conf.broker_url or "")
    return _client(url) if url.startswith(("redis://", "rediss://", "redis+socket://")) else None


def claim(submission_id: int, attempt: int, hold_seconds: float) -> str:
    """"ok" to score; "stale" (not the current attempt) or "busy" (another worker scores it) to drop."""
    client = _redis()
    if client is None:
        return "ok"
    try:
        current = client.get(contracts.attempt_key(submission_id))
        if current is not None and int(current) != attempt:
            return "stale"
        taken = client.set(contracts.running_key(submission_id, attempt), "1", nx=True,
                           ex=max(1, int(hold_seconds)))
        return "ok" if taken else "busy"
    except Exception as exc:  # noqa: BLE001 - scoring anyway is safe (attempts make reports idempotent)
        log.warning("Could not check attempt %s of submission %s: %s", attempt, submission_id, exc)
        return "ok"


def renew(submission_id: int, attempt: int, hold_seconds: float) -> None:
    client = _redis()
    if client is not None:
        try:
            client.set(contracts.running_key(submission_id, attempt), "1", ex=max(1, int(hold_seconds)))
        except Exception as exc:  # noqa: BLE001 - the next heartbeat tries again
            log.warning("Could not renew attempt %s of submission %s: %s", attempt, submission_id, exc)


def release(submission_id: int, attempt: int) -> None:
    client = _redis()
    if client is not None:
        try:
            client.delete(contracts.running_key(submission_id, attempt))
        except Exception:  # noqa: BLE001 - it expires by itself
            pass
