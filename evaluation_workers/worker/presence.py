"""A scoring worker announces itself in the broker while it runs.

The worker's main process rewrites ``contracts.worker_key(<node name>)`` every
``EVAL_ANNOUNCE_SECONDS`` (default 5) with an expiry of three times that: its
host, device, the queues it consumes, the scorer version of every track it
serves and this start's ``instance`` (``contracts.WorkerInfo``). A worker that
dies simply expires; one that stops cleanly deletes its key. The site's health
page reads these keys to show who serves what, and which waiting work no live
worker consumes; the site's sweeper, to find attempts whose worker is gone
(``attempts``): announced by another instance of the same node (it started
again), or not announced at all (it vanished; 15 s by default).

When it is ready, a worker announces itself and asks the site for a sweep
(``contracts.SWEEP`` on ``EVAL_SITE_QUEUE``, default ``site``), so that what its
earlier start was scoring is sent again at once.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
from typing import Any

from celery.signals import worker_ready, worker_shutdown

from evaluation_workers import contracts

log = logging.getLogger(__name__)

ANNOUNCE_SECONDS = float(os.environ.get("EVAL_ANNOUNCE_SECONDS", 5))
SEND_RETRY = {"max_retries": 3, "interval_start": 0, "interval_step": 0.5, "interval_max": 1}
_stop = threading.Event()
_state: dict[str, Any] = {}


def describe(name: str, queues: list[str]) -> contracts.WorkerInfo:
    from evaluation_workers._xp import device_name
    from evaluation_workers.queues import bases, queue_name
    from evaluation_workers.tracks import all_tracks
    from evaluation_workers.worker.attempts import INSTANCE

    versions = {t.name: t.scorer_version for t in all_tracks()
                if any(queue_name(b, t.name, t.scorer_version, bulk=bulk) in queues
                       for b in bases().values() for bulk in (False, True))}
    now = time.time()
    return contracts.WorkerInfo(name=name, host=socket.gethostname(), pid=os.getpid(), device=device_name(),
                                queues=sorted(queues), versions=versions, started_at=now, seen_at=now,
                                instance=INSTANCE)


def announce(info: contracts.WorkerInfo) -> bool:
    """Write the announcement once; whether it was written."""
    from evaluation_workers.worker.attempts import _redis

    client = _redis()
    if client is None:
        return False
    try:
        info["seen_at"] = time.time()
        client.set(contracts.worker_key(info["name"]), json.dumps(info), ex=max(1, int(3 * ANNOUNCE_SECONDS)))
    except Exception as exc:  # noqa: BLE001 - the next beat tries again; the key expires meanwhile
        log.warning("Could not announce worker %s: %s", info["name"], exc)
        return False
    return True


def _announce(info: contracts.WorkerInfo) -> None:
    while not _stop.wait(ANNOUNCE_SECONDS):
        announce(info)


def ask_for_sweep(name: str) -> None:
    """Ask the site's sweeper to look now: attempts an earlier start of this node took are lost."""
    from evaluation_workers.worker.app import app

    try:
        app.send_task(contracts.SWEEP, kwargs={}, queue=os.environ.get("EVAL_SITE_QUEUE") or "site",
                      retry=True, retry_policy=SEND_RETRY)
    except Exception as exc:  # noqa: BLE001 - the site sweeps every few seconds anyway
        log.warning("Worker %s could not ask the site for a sweep: %s", name, exc)


def _warn_about_stores() -> None:
    from evaluation_workers import outcomes

    if os.environ.get("EVAL_LABELS_S3_BUCKET") and not outcomes.bucket():
        log.warning("Labels come from a bucket but the per-unit outcomes stay in %s, on this host only: a paired "
                    "test or deferred intervals taken by another host will not find them. Set "
                    "EVAL_OUTCOMES_S3_BUCKET on every worker that shares the labels.", outcomes.where())


@worker_ready.connect
def _start(sender: Any = None, **_: Any) -> None:
    name = str(getattr(sender, "hostname", "") or socket.gethostname())
    queues = [str(q) for q in sender.app.amqp.queues.consume_from] if sender is not None else []
    info = describe(name, queues)
    log.info("Scoring worker %s (instance %s) on %s serves %s", name, info["instance"], info["device"],
             ", ".join(info["queues"]))
    _warn_about_stores()
    _state["info"] = info
    # First the announcement of this instance, then the sweep that reads it.
    if announce(info):
        ask_for_sweep(name)
    threading.Thread(target=_announce, args=(info,), name="announce", daemon=True).start()


@worker_shutdown.connect
def _stop_announcing(**_: Any) -> None:
    _stop.set()
    info = _state.get("info")
    if info is None:
        return
    from evaluation_workers.worker.attempts import _redis

    client = _redis()
    try:
        if client is not None:
            client.delete(contracts.worker_key(info["name"]))
    except Exception:  # noqa: BLE001 - it expires by itself
        pass
