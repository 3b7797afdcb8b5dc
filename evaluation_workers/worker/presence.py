"""A scoring worker announces itself in the broker while it runs.

The worker's main process rewrites ``contracts.worker_key(<node name>)`` every
``EVAL_ANNOUNCE_SECONDS`` (default 15) with an expiry of three times that: its
host, device, the queues it consumes and the scorer version of every track it
serves (``contracts.WorkerInfo``). A worker that dies simply expires; one that
stops cleanly deletes its key. The site's health page reads these keys to show
who serves what, and which waiting work no live worker consumes.
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

ANNOUNCE_SECONDS = float(os.environ.get("EVAL_ANNOUNCE_SECONDS", 15))
_stop = threading.Event()
_state: dict[str, Any] = {}


def describe(name: str, queues: list[str]) -> contracts.WorkerInfo:
    from evaluation_workers._xp import device_name
    from evaluation_workers.queues import bases, queue_name
    from evaluation_workers.tracks import all_tracks

    versions = {t.name: t.scorer_version for t in all_tracks()
                if any(queue_name(b, t.name, t.scorer_version, bulk=bulk) in queues
                       for b in bases().values() for bulk in (False, True))}
    now = time.time()
    return contracts.WorkerInfo(name=name, host=socket.gethostname(), pid=os.getpid(), device=device_name(),
                                queues=sorted(queues), versions=versions, started_at=now, seen_at=now)


def _announce(info: contracts.WorkerInfo) -> None:
    from evaluation_workers.worker.attempts import _redis

    client = _redis()
    if client is None:
        return
    while True:
        try:
            info["seen_at"] = time.time()
            client.set(contracts.worker_key(info["name"]), json.dumps(info), ex=max(1, int(3 * ANNOUNCE_SECONDS)))
        except Exception as exc:  # noqa: BLE001 - the next beat tries again; the key expires meanwhile
            log.warning("Could not announce worker %s: %s", info["name"], exc)
        if _stop.wait(ANNOUNCE_SECONDS):
            return


@worker_ready.connect
def _start(sender: Any = None, **_: Any) -> None:
    name = str(getattr(sender, "hostname", "") or socket.gethostname())
    queues = [str(q) for q in sender.app.amqp.queues.consume_from] if sender is not None else []
    info = describe(name, queues)
    log.info("Scoring worker %s on %s serves %s", name, info["device"], ", ".join(info["queues"]))
    _state["info"] = info
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
