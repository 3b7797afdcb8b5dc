"""Site-side tasks of participation (queue SITE_QUEUE): webhook deliveries and their retries,
announcement mailings, and Celery beat's minute round (``CELERY_BEAT_SCHEDULE``)."""

from __future__ import annotations

from celery import shared_task
from django.db import DatabaseError, InterfaceError

from leaderboard.participation import announcements, dispatch, webhooks

_RETRY = {"autoretry_for": (DatabaseError, InterfaceError), "retry_backoff": 1, "retry_backoff_max": 60,
          "retry_jitter": True, "max_retries": 20, "acks_late": True, "ignore_result": True}


@shared_task(name=dispatch.DELIVER_WEBHOOK, **_RETRY)
def deliver_webhook(delivery_id: int) -> None:
    """One attempt; a failed one sends itself again after the back-off (``webhooks.do_deliver``)."""
    delay = webhooks.do_deliver(delivery_id)
    if delay is not None:
        dispatch.send(dispatch.DELIVER_WEBHOOK, countdown=delay, delivery_id=delivery_id)


@shared_task(name=dispatch.MAIL_ANNOUNCEMENT, **_RETRY)
def mail_announcement(announcement_id: int) -> int:
    return announcements.do_mail(announcement_id)


@shared_task(name=dispatch.DELIVER_DUE, **_RETRY)
def deliver_due() -> dict[str, int]:
    """Every minute: phase changes to tell webhooks, deliveries due (or never sent), mailings not done."""
    return {"phase_events": webhooks.do_check_phases(), "delivered": webhooks.do_deliver_due(),
            "mailed": announcements.do_mail_due()}
