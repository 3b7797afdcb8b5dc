"""Site-side tasks of the rankings: the reveal at a deadline and the archive at a challenge's end
(Celery beat), and paired-test answers from the scoring workers (queue SITE_QUEUE)."""

from __future__ import annotations

from typing import Any

from celery import shared_task
from django.db import DatabaseError, InterfaceError

from evaluation_workers import contracts
from leaderboard.rankings import archive, paired_tests, services


@shared_task(name="rankings.reveal_due", ignore_result=True)
def reveal_due() -> int:
    """Reveal the boards of splits whose deadline passed (``CELERY_BEAT_SCHEDULE``, every minute)."""
    return services.do_reveal_due()


@shared_task(name="rankings.archive_due", ignore_result=True)
def archive_due() -> int:
    """Archive the final boards of challenges whose last phase ended (``CELERY_BEAT_SCHEDULE``, every minute)."""
    return archive.do_archive_due()


@shared_task(name=contracts.RECORD_PAIRED_TEST, autoretry_for=(DatabaseError, InterfaceError), retry_backoff=1,
             retry_backoff_max=60, retry_jitter=True, max_retries=20, acks_late=True, reject_on_worker_lost=True,
             ignore_result=True)
def record_paired_test(**report: Any) -> None:
    paired_tests.record_paired_test(**report)
