"""Site-side tasks of the rankings: the reveal at a deadline and the archive at a challenge's end
(Celery beat), and paired-test answers from the scoring workers (queue SITE_QUEUE)."""

from __future__ import annotations

import logging
from typing import Any

from celery import shared_task
from django.db import DatabaseError, InterfaceError

from evaluation_workers import contracts
from leaderboard.ops.outages import Streak
from leaderboard.rankings import archive, paired_tests, services

_reveals_failing = Streak(logging.getLogger(__name__), "Revealing the boards due")
_archives_failing = Streak(logging.getLogger(__name__), "Archiving the challenges that ended")


@shared_task(name="rankings.reveal_due", ignore_result=True)
def reveal_due() -> int:
    """Reveal the boards of splits whose deadline passed (``CELERY_BEAT_SCHEDULE``, every minute); while the
    database is down, one line of the log a minute (the first with its traceback)."""
    try:
        revealed = services.do_reveal_due()
    except Exception as exc:
        if not _reveals_failing.failed(exc):
            raise
        return 0
    _reveals_failing.succeeded()
    return revealed


@shared_task(name="rankings.archive_due", ignore_result=True)
def archive_due() -> int:
    """Archive the final boards of challenges whose last phase ended (``CELERY_BEAT_SCHEDULE``, every minute);
    while the database is down, one line of the log a minute, as the reveal."""
    try:
        archived = archive.do_archive_due()
    except Exception as exc:
        if not _archives_failing.failed(exc):
            raise
        return 0
    _archives_failing.succeeded()
    return archived


@shared_task(name=contracts.RECORD_PAIRED_TEST, autoretry_for=(DatabaseError, InterfaceError), retry_backoff=1,
             retry_backoff_max=60, retry_jitter=True, max_retries=20, acks_late=True, reject_on_worker_lost=True,
             ignore_result=True)
def record_paired_test(**report: Any) -> None:
    paired_tests.record_paired_test(**report)
