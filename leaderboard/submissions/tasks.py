"""Site-side tasks: where scoring workers' reports arrive (queue SITE_QUEUE), and the sweeper.

Names come from ``evaluation_workers.contracts``; each task only hands its
keyword arguments to ``lifecycle``. Reports are idempotent (attempt numbers),
so they are acknowledged only once recorded (``acks_late``), redelivered if the
site worker dies, and retried with back-off when the database is busy or down.
Each runs only a report a worker signed (``leaderboard.celery.SignedTask``, the
base of every task of the site's app): a forged one is refused before it gets here,
and so is one the site already acted on (``evaluation_workers.replays``).
"""

from __future__ import annotations

import logging
from typing import Any

from celery import shared_task
from celery.signals import worker_ready
from django.db import DatabaseError, InterfaceError

from evaluation_workers import contracts
from leaderboard.ops import metrics
from leaderboard.ops.outages import Streak
from leaderboard.submissions import lifecycle, retention, sweeper
from leaderboard.submissions.uploads import do_expire_uploads

# A locked SQLite file or a restarting PostgreSQL: wait and try again, never drop the report.
_RETRY = {"autoretry_for": (DatabaseError, InterfaceError), "retry_backoff": 1, "retry_backoff_max": 60,
          "retry_jitter": True, "max_retries": 20, "acks_late": True, "reject_on_worker_lost": True,
          "ignore_result": True}


@shared_task(name=contracts.RECORD_PROGRESS, **_RETRY)
def record_progress(**report: Any) -> None:
    lifecycle.record_progress(**report)


@shared_task(name=contracts.RECORD_HEARTBEAT, **_RETRY)
def record_heartbeat(**report: Any) -> None:
    lifecycle.record_heartbeat(**report)


@shared_task(name=contracts.RECORD_RESULT, **_RETRY)
def record_result(**report: Any) -> None:
    lifecycle.record_result(**report)


@shared_task(name=contracts.RECORD_INTERVALS, **_RETRY)
def record_intervals(**report: Any) -> None:
    lifecycle.record_intervals(**report)


@shared_task(name=contracts.RECORD_FAILURE, **_RETRY)
def record_failure(**report: Any) -> None:
    lifecycle.record_failure(**report)


@shared_task(name=contracts.RECORD_LOST, **_RETRY)
def record_lost(**report: Any) -> None:
    lifecycle.record_lost(**report)


# A database or broker down for an hour would otherwise log a traceback every SWEEP_INTERVAL seconds.
_sweeps_failing = Streak(logging.getLogger(__name__), "The sweep")


@shared_task(name=contracts.SWEEP, ignore_result=True)
def sweep() -> dict[str, int]:
    """Run by Celery beat every ``SWEEP_INTERVAL`` seconds, and sent by the site worker and each scoring
    worker when they start; ``manage.py sweep`` does the same. While a service it needs is down, each
    failed sweep is one line of the log (the first with its traceback); the next beat tries again."""
    try:
        counts = sweeper.do_sweep()
    except Exception as exc:
        if not _sweeps_failing.failed(exc):
            raise  # a bug: Celery logs it with its traceback, every time
        return {}
    _sweeps_failing.succeeded()
    metrics.count_sweep(counts)  # leaderboard_sweeper_actions_total on every site's /metrics
    return counts


@worker_ready.connect
def _sweep_at_start(sender: Any = None, **_: Any) -> None:
    """The site worker has started: what was lost while it was down is sent again now, not at the next beat.

    Sent to its own queue, so that it runs after the reports that waited there meanwhile.
    """
    from django.conf import settings

    from leaderboard.celery import app

    if getattr(sender, "app", None) is not app:
        return
    try:
        app.send_task(contracts.SWEEP, kwargs={}, queue=settings.SITE_QUEUE, retry=True,
                      retry_policy=settings.SEND_RETRY_POLICY)
    except Exception:  # noqa: BLE001 - Celery beat sends the next one anyway
        pass


@shared_task(name="submissions.expire_uploads", ignore_result=True)
def expire_uploads() -> int:
    """Run by Celery beat (``CELERY_BEAT_SCHEDULE``); ``manage.py expire_uploads`` does the same."""
    return do_expire_uploads()


@shared_task(name="submissions.apply_retention", ignore_result=True)
def apply_retention() -> int:
    """Run by Celery beat (``RETENTION_INTERVAL``): prunes the workers' per-unit outcomes, and deletes
    prediction files only if ``RETENTION_DAYS`` is set."""
    retention.do_prune_outcomes()
    return retention.do_apply_retention()
