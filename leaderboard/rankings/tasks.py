"""Site-side tasks of the leaderboards (Celery beat)."""

from __future__ import annotations

from celery import shared_task

from leaderboard.rankings import services


@shared_task(name="rankings.reveal_due", ignore_result=True)
def reveal_due() -> int:
    """Reveal the boards of splits whose deadline passed (``CELERY_BEAT_SCHEDULE``, every minute)."""
    return services.do_reveal_due()
