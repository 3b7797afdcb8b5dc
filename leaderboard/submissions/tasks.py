"""Site-side tasks: where scoring workers' reports arrive (queue SITE_QUEUE).

Names come from ``evaluation_workers.contracts``; each task only hands its
keyword arguments to the service that records them.
"""

from __future__ import annotations

from typing import Any

from celery import shared_task

from evaluation_workers import contracts
from leaderboard.submissions import services


@shared_task(name=contracts.RECORD_PROGRESS, ignore_result=True)
def record_progress(**report: Any) -> None:
    services.record_progress(**report)


@shared_task(name=contracts.RECORD_RESULT, ignore_result=True, acks_late=True)
def record_result(**report: Any) -> None:
    services.record_result(**report)


@shared_task(name=contracts.RECORD_FAILURE, ignore_result=True, acks_late=True)
def record_failure(**report: Any) -> None:
    services.record_failure(**report)


@shared_task(name="submissions.expire_uploads", ignore_result=True)
def expire_uploads() -> int:
    """Run by Celery beat (``CELERY_BEAT_SCHEDULE``); ``manage.py expire_uploads`` does the same."""
    from leaderboard.submissions.uploads import do_expire_uploads

    return do_expire_uploads()
