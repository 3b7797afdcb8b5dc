"""What the site reads and notes in the broker (Redis) beside Celery's own messages.

- ``note_attempt`` / ``forget_attempt``: the current attempt of a submission,
  under ``contracts.attempt_key``. A scoring worker skips a message whose
  attempt is not the current one (a redelivered message of a lost attempt, or
  of a cancelled submission), so re-sending never costs a second scoring.
- ``pending_attempts``: which (submission, attempt) messages are still waiting
  in a queue or held unacknowledged by a worker (and since when); the sweeper
  tells a message that waits for a busy worker from one that was lost.
- ``claims``: who took each attempt, and what it reported
  (``evaluation_workers.worker.attempts``); ``instances``: which start of each
  scoring worker announces itself now; ``uptime``: the broker's, so that the
  sweeper gives workers time to announce themselves again after it restarted.
- ``queue_lengths``: for the moderation desk.
- ``workers_seen``: the scoring workers announcing themselves
  (``evaluation_workers.worker.presence``), for the health page and a queued
  submission's page (``serving``: those that consume one queue).

Kombu's Redis transport keeps a queue as a list under the queue's name and
messages delivered but not yet acknowledged in the hash ``unacked``; each
message is JSON whose base64 ``body`` is ``[args, kwargs, embed]``.
"""

from __future__ import annotations

import base64
import json
from typing import Any

from django.conf import settings

from evaluation_workers import contracts
from leaderboard.lib import broker_redis

_UNACKED = "unacked"
_UNACKED_INDEX = "unacked_index"  # delivery tag -> when a worker took the message (its clock)
# Attempt keys outlive any redelivery of their messages (the visibility timeout is 4 hours).
_ATTEMPT_TTL = 7 * 24 * 3600


_client = broker_redis.client  # one client per URL, shared with the site's Celery app (leaderboard.celery)


def client() -> Any:
    return _client(settings.CELERY_BROKER_URL)


def note_attempt(submission_id: int, attempt: int) -> None:
    client().set(contracts.attempt_key(submission_id), attempt, ex=_ATTEMPT_TTL)


def forget_attempt(submission_id: int) -> None:
    """The submission is done: no message of it should be scored any more."""
    try:
        client().set(contracts.attempt_key(submission_id), 0, ex=_ATTEMPT_TTL)
    except Exception:  # noqa: BLE001 - a stale message is also dropped by the site; nothing to undo here
        pass


def _score_request(raw: bytes | str) -> tuple[int, int] | None:
    try:
        message = json.loads(raw)
        if isinstance(message, list):  # unacked entries are [message, exchange, routing_key]
            message = message[0]
        if message.get("headers", {}).get("task") != contracts.SCORE_SUBMISSION:
            return None
        body = message["body"]
        if message.get("properties", {}).get("body_encoding") == "base64":
            body = base64.b64decode(body)
        _, kwargs, _ = json.loads(body)
        return int(kwargs["submission_id"]), int(kwargs["attempt"])
    except (ValueError, KeyError, TypeError, IndexError):
        return None


def pending_attempts(queues: set[str]) -> dict[tuple[int, int], tuple[str, float]]:
    """(submission id, attempt) of every score message still in ``queues`` (``("queued", 0.0)``) or held
    by a worker that has not acknowledged it (``("unacked", <when it took it, seconds since the epoch>)``)."""
    redis = client()
    found: dict[tuple[int, int], tuple[str, float]] = {}
    held = [(tag, ids) for tag, raw in redis.hscan_iter(_UNACKED) if (ids := _score_request(raw)) is not None]
    if held:
        pipe = redis.pipeline(transaction=False)
        for tag, _ in held:
            pipe.zscore(_UNACKED_INDEX, tag)
        for (_, ids), taken in zip(held, pipe.execute()):
            found[ids] = ("unacked", float(taken or 0.0))
    for queue in queues:
        for raw in redis.lrange(queue, 0, -1):
            if (ids := _score_request(raw)) is not None:
                found[ids] = ("queued", 0.0)
    return found


def claims(attempts: list[tuple[int, int]]) -> dict[tuple[int, int], dict[str, Any]]:
    """The ``contracts.Claim`` of each of ``attempts`` that a worker took (absent: none, or not readable)."""
    if not attempts:
        return {}
    found: dict[tuple[int, int], dict[str, Any]] = {}
    for ids, raw in zip(attempts, client().mget([contracts.running_key(*ids) for ids in attempts])):
        try:
            value = json.loads(raw) if raw is not None else None
        except ValueError:
            continue
        if isinstance(value, dict) and isinstance(value.get("node"), str) and isinstance(value.get("instance"), str):
            found[ids] = value  # an older worker's claim ("1") names nobody: the heartbeats decide
    return found


def instances() -> dict[str, str]:
    """Node name -> the instance it announces now, for every scoring worker announcing one."""
    return {str(w["name"]): str(w["instance"]) for w in _announced(client()) if w.get("instance")}


def uptime() -> float:
    """Seconds since the broker started."""
    return float(client().info("server")["uptime_in_seconds"])


def queue_lengths(queues: list[str]) -> dict[str, int | None]:
    """Messages waiting in each queue; None where the broker cannot be read."""
    try:
        redis = client()
        return {q: int(redis.llen(q)) for q in queues}
    except Exception:  # noqa: BLE001 - shown as "unknown" on the desk
        return dict.fromkeys(queues)


def workers_seen() -> list[dict[str, Any]] | None:
    """The scoring workers whose announcement has not expired, by name; None where the broker cannot be read."""
    try:
        return _announced(client())
    except Exception:  # noqa: BLE001 - shown as "unknown" on the health page
        return None


def _announced(redis: Any) -> list[dict[str, Any]]:
    keys = sorted(redis.scan_iter(match=f"{contracts.WORKER_KEY_PREFIX}*", count=200))
    raw = redis.mget(keys) if keys else []
    workers = []
    for value in raw:
        try:
            info = json.loads(value)
        except (TypeError, ValueError):
            continue  # expired between SCAN and MGET, or not ours
        if isinstance(info, dict) and "name" in info:
            workers.append(info)
    return sorted(workers, key=lambda w: str(w["name"]))


def serving(workers: list[dict[str, Any]], queue: str) -> list[dict[str, Any]]:
    """The announced workers (``workers_seen``) that consume ``queue``."""
    return [w for w in workers if queue in w.get("queues", [])]
