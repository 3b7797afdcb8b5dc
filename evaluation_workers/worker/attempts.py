"""Which attempt a worker may score, and who took it (the broker's Redis).

The site notes each submission's current attempt under ``contracts.attempt_key``
(0 once it is done or cancelled) before it sends the attempt. Before scoring, a
worker checks it, so a message of an older attempt (redelivered after a crash,
sent twice by the sweeper, or replayed) is dropped unscored, and so is one of an
attempt the site has not noted (its note expired a week after the attempt ended,
or could not be written: the sweeper then finds the message gone and sends a new
attempt). It claims the attempt under ``contracts.running_key``
(``contracts.Claim``: its node name and ``INSTANCE``), so a second delivery of the
same attempt is dropped too. When it has reported, the claim holds the signed
report as well (``report``).

The site's sweeper reads the claims: one taken by an instance of a node that
has started again since, or by a worker that stopped announcing itself
(``presence``), is lost and sent again at once, without waiting for heartbeats
to stop; one holding a report that never reached the site (the site worker died
with it) is recorded from there. Where the keys cannot be read (the broker is
briefly away) the worker scores: the site drops stale reports anyway.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from typing import Any

from evaluation_workers import contracts
from evaluation_workers.worker import app as app_module

log = logging.getLogger(__name__)

# This start of the worker: pool processes inherit it (they are forked from the main process after
# this module is imported), and ``presence`` announces it.
INSTANCE = uuid.uuid4().hex[:16]
# Long enough for any scoring (the hard time limit) and for the site to read the report after a day's
# outage; the attempt key (the site's) outlives it.
CLAIM_SECONDS = 2 * 24 * 3600


_client = app_module._client


def _redis() -> Any | None:
    return app_module.broker_redis()


def claim(submission_id: int, attempt: int, node: str) -> str:
    """"ok" to score; "stale" (not the current attempt), "unnoted" (the site has not noted it as current)
    or "busy" (another delivery took it) to drop."""
    client = _redis()
    if client is None:
        return "ok"
    try:
        current = client.get(contracts.attempt_key(submission_id))
        if current is None:
            return "unnoted"
        if int(current) != attempt:
            return "stale"
        taken = client.set(contracts.running_key(submission_id, attempt),
                           json.dumps(contracts.Claim(node=node, instance=INSTANCE, since=time.time())), nx=True,
                           ex=CLAIM_SECONDS)
        return "ok" if taken else "busy"
    except Exception as exc:  # noqa: BLE001 - scoring anyway is safe (attempts make reports idempotent)
        log.warning("Could not check attempt %s of submission %s: %s", attempt, submission_id, exc)
        return "ok"


def keep_report(submission_id: int, attempt: int, node: str, task: str, signed: dict[str, Any]) -> None:
    """Put the attempt's report (``signed``: the keyword arguments of ``task`` with their signature) in its claim."""
    client = _redis()
    if client is None:
        return
    value = contracts.Claim(node=node, instance=INSTANCE, since=time.time(), report=task, kwargs=signed)
    try:
        client.set(contracts.running_key(submission_id, attempt), json.dumps(value), ex=CLAIM_SECONDS)
    except Exception as exc:  # noqa: BLE001 - the report message goes anyway; only the sweeper's copy is lost
        log.warning("Could not keep the report of attempt %s of submission %s: %s", attempt, submission_id, exc)


def release(submission_id: int, attempt: int) -> None:
    """Drop the claim of an attempt that ends without a report (the site's heartbeat timeout takes it from there)."""
    client = _redis()
    if client is not None:
        try:
            client.delete(contracts.running_key(submission_id, attempt))
        except Exception:  # noqa: BLE001 - it expires by itself
            pass
