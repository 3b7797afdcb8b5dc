"""The scoring workers' Celery app, configured from the environment.

    python -m evaluation_workers worker        # builds its -Q list from EVAL_TRACKS (evaluation_workers.queues)

Variables: ``EVAL_BROKER_URL`` (default ``REDIS_URL``), ``EVAL_UPLOADS_DIR`` and
``EVAL_LABELS_DIR`` (the roots that storage keys are relative to),
``EVAL_DEVICE`` (auto|cpu|gpu), ``EVAL_HEARTBEAT_SECONDS`` (default 20), ``EVAL_TRACKS``,
``EVAL_QUEUE_DEVICES``, ``EVAL_LABELS_S3_BUCKET`` (labels from a bucket, ``labels_cache``),
``EVAL_OUTCOMES_S3_BUCKET`` or ``EVAL_OUTCOMES_DIR`` (per-unit outcomes, ``outcomes``),
``EVAL_ANNOUNCE_SECONDS`` and ``EVAL_SITE_QUEUE`` (``presence``),
``EVAL_RESULTS_SIGNING_KEYS`` (``id:secret,...``, newest first) or ``EVAL_RESULTS_SIGNING_KEY``
(each or its ``_FILE``: the site's keys), ``EVAL_METRICS_PORT``
and ``EVAL_METRICS_ADDR`` (Prometheus metrics, ``worker.metrics``). The worker needs no
database credentials: it reports over the broker to the site queue named in each request.

Every message it sends is signed with its first key, and it runs only messages signed
with one of its keys (``signing``): a host that can only reach the broker can neither
report a result nor make a worker score something the site did not ask for. A message
it acted on before is refused (``replays``).
"""

from __future__ import annotations

import functools
import os
import time
from typing import Any

from celery import Celery, Task

from evaluation_workers import contracts, replays, signing


@functools.lru_cache(maxsize=2)
def _client(url: str) -> Any:
    import redis

    return redis.Redis.from_url(url, socket_timeout=3, socket_connect_timeout=3)


def broker_redis() -> Any | None:
    """The broker's Redis client (None for another broker): the site's notes of attempts, the workers'
    claims (``attempts``) and what the workers remember of the messages they ran (``replays``)."""
    url = str(app.conf.broker_url or "")
    return _client(url) if url.startswith(("redis://", "rediss://", "redis+socket://")) else None


class SignedTask(Task):  # type: ignore[misc]  # Celery's classes are untyped
    """A worker task: runs only a request signed with one of the workers' keys, once (refused ones are
    logged, counted and acknowledged)."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        request = signing.verified(self.name, args, kwargs, signing.worker_keys())
        client = broker_redis()
        if request is None:
            replays.count_refused(client, self.name, "signature")
            return None
        # No running attempt reports to a worker: a message naming a state is remembered a week.
        seconds = replays.memory_seconds(self.name, request, replays.STATE_SECONDS)
        return replays.run_once(client, self.name, kwargs, seconds, functools.partial(super().__call__, **request))


class SigningCelery(Celery):  # type: ignore[misc]
    """Signs every message the worker sends: progress, heartbeats, results, failures, lost attempts,
    intervals, paired-test answers and its request for a sweep. ``nonce=`` gives the message a nonce
    chosen before (a report kept in its claim is the message sent)."""

    def send_task(self, name: str, args: Any = None, kwargs: Any = None, nonce: str | None = None,
                  **options: Any) -> Any:
        options["headers"] = {**(options.get("headers") or {}), contracts.SENT_AT_HEADER: time.time()}
        return super().send_task(name, args, signing.signed(name, kwargs, signing.worker_keys(), nonce), **options)


app = SigningCelery("evaluation_workers", task_cls=SignedTask,
                    include=["evaluation_workers.worker.tasks", "evaluation_workers.worker.significance",
                             "evaluation_workers.worker.deferred_intervals", "evaluation_workers.worker.presence",
                             "evaluation_workers.worker.pruning", "evaluation_workers.worker.metrics"])
app.conf.update(
    broker_url=os.environ.get("EVAL_BROKER_URL") or os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0"),
    # Scoring is idempotent (a re-run overwrites the same result), so a task is
    # acknowledged only once it has run: a worker that dies whole leaves it
    # unacknowledged, and the site's sweeper sends a new attempt as soon as the
    # worker starts again or stops announcing itself (attempts, presence). When
    # only the process scoring it dies (killed, out of
    # memory) the message is acknowledged, not requeued: requeueing would loop
    # forever on a file that always runs out of memory; the main process
    # reports the attempt lost instead, and the site decides (tasks._report_lost).
    task_acks_late=True,
    task_reject_on_worker_lost=False,
    worker_prefetch_multiplier=1,
    worker_concurrency=int(os.environ.get("EVAL_CONCURRENCY", "1")),
    task_ignore_result=True,
    task_default_queue=os.environ.get("EVAL_QUEUE_CPU", "eval-cpu"),
    # Longer than the hard time limit, so a running task is not redelivered.
    # Normal queues before bulk ones, round robin among the normal (queues.NormalFirstCycle).
    broker_transport_options={"visibility_timeout": 4 * 3600, "socket_timeout": 10,
                              "socket_connect_timeout": 5,
                              "queue_order_strategy": "evaluation_workers.queues:NormalFirstCycle"},
    broker_connection_retry_on_startup=True,
    broker_connection_retry=True,
    broker_connection_max_retries=None,  # a worker outlives a broker restart, however long
    worker_hijack_root_logger=False,
)
