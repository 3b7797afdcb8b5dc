"""What a receiver remembers of the signed messages it acted on, so that a second delivery changes nothing
(stdlib only; the broker's Redis client is handed in).

Every signed message carries a nonce (``signing``). The task base classes of the
site (``leaderboard/celery.py``) and of the workers (``worker/app.py``) run a
verified message only when its nonce is not remembered, and remember it once the
message has taken effect, under ``contracts.seen_key`` with an expiry: for as long
as the state the message names can still take it (``memory_seconds``). A refused
message is logged (task and id, never its data), counted under
``contracts.refused_key`` and acknowledged.

Two guards, each enough for what it guards:

- **The state itself, for good.** Every message names its state, and its handler
  acts only while that state can take it: a report of an attempt that is not
  current, or of one already finished, failed or lost, changes nothing
  (``lifecycle``); a score request of an attempt the site has not noted as
  current is dropped unscored (``worker.attempts``); an answer (intervals, a
  paired test) of a result revision that is not the result's current one, or for
  a result or test already answered, is dropped. None of this expires.
- **The nonce, for as long as the state could take the message again.** Some
  messages stay welcome while their state lasts: a running attempt's progress
  and heartbeats (a replay would move its progress back, or keep a dead attempt
  looking alive), a score request until its attempt is done. Those are refused
  by nonce for as long as their attempt may run; every message naming a state is
  remembered a week (as long as the site's note of an attempt lives); one that
  names none (Celery beat's periodic jobs, the sweeper's nudge, a prune of
  outcomes) only repeats what the next periodic run does, and is remembered an hour.

Why Redis with an expiry, not the database: both sides read it (the workers have no
database), a running attempt may send two progress messages a second, and a key
that expires needs no sweeping; the lasting guarantee is the database's state, so a
broker that loses this memory (restarted without its file) costs only the cheap guard.

Why only once it has taken effect, not when it arrives: a task that raised is sent
again by Celery with the same arguments (the same nonce), and a message whose site
worker died mid-way is delivered again; both must still run. Two deliveries at the
same moment can both run: every handler takes a row lock on the state it changes
and is idempotent on it. Where the broker cannot be read, the message runs (logged):
the state decides.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from evaluation_workers import contracts, signing

log = logging.getLogger(__name__)
T = TypeVar("T")

# A message that names a state: remembered as long as the site's note of an attempt lives.
STATE_SECONDS = 7 * 24 * 3600
# One that names none only repeats what the next periodic run does.
STATELESS_SECONDS = 3600
_STATE_FIELDS = ("submission_id", "test_id", "result_id")
# Reports of a running attempt: welcome only while it runs (the receiver says how long that can be).
RUNNING_REPORTS = frozenset({contracts.RECORD_PROGRESS, contracts.RECORD_HEARTBEAT})


def memory_seconds(name: str, kwargs: Mapping[str, Any], running_seconds: float) -> int:
    """How long a receiver remembers the message ``name(kwargs)`` it acted on: ``running_seconds`` (the
    longest an attempt can run and be taken for running) for progress and heartbeats, a week for any
    other message that names a state, an hour for one that names none."""
    if name in RUNNING_REPORTS:
        return int(running_seconds)
    return STATE_SECONDS if any(field in kwargs for field in _STATE_FIELDS) else STATELESS_SECONDS


def count_refused(client: Any | None, name: str, reason: str) -> None:
    """Count a refused message of task ``name`` in the broker: ``reason`` "signature" (unsigned, forged, or
    signed with a key the receiver does not hold), "replay" (acted on before) or "stale" (an answer for a
    state that has moved on)."""
    if client is None:
        return
    try:
        client.hincrby(contracts.refused_key(), f"{name}|{reason}", 1)
    except Exception as exc:  # noqa: BLE001 - a lost count costs a metric, never the message's fate
        log.warning("Could not count a refused %s (%s): %s", name, reason, exc)


def acted_on(client: Any | None, nonce: str) -> bool:
    """Whether a receiver acted on the message with ``nonce`` (False where the broker cannot be read)."""
    if client is None:
        return False
    try:
        return bool(client.exists(contracts.seen_key(nonce)))
    except Exception as exc:  # noqa: BLE001 - the state still refuses what cannot be taken twice
        log.warning("Could not look up a message's nonce (it runs; its state decides): %s", exc)
        return False


def remember(client: Any | None, nonce: str, seconds: int) -> None:
    """Note that the message with ``nonce`` took effect, for ``seconds``."""
    if client is None:
        return
    try:
        client.set(contracts.seen_key(nonce), 1, ex=max(1, int(seconds)))
    except Exception as exc:  # noqa: BLE001 - a later copy is then refused by its state alone
        log.warning("Could not remember a message's nonce: %s", exc)


def run_once(client: Any | None, name: str, kwargs: Mapping[str, Any], seconds: int, run: Callable[[], T]) -> T | None:
    """``run()`` unless the message ``name(kwargs)`` (verified: ``kwargs`` hold its nonce) was acted on
    before; then remember it for ``seconds``. None, logged and counted, for a message acted on before."""
    nonce = str(kwargs.get(signing.NONCE))
    if acted_on(client, nonce):
        log.warning("Refused %s for %s: it was delivered before (a replay, or the broker delivering it again); "
                    "nothing was changed", name, signing.about(kwargs))
        count_refused(client, name, "replay")
        return None
    outcome = run()
    remember(client, nonce, seconds)
    return outcome
