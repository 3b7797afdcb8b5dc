"""Sending the participation tasks to the site's own queue (``tasks.py``), by name.

A broker that is down loses nothing: what was not sent is found by Celery beat's
``participation.deliver_due`` (every minute), which sends due webhook deliveries and
unfinished mailings itself.
"""

from __future__ import annotations

import logging
from typing import Any

from django.conf import settings
from django.db import transaction

log = logging.getLogger(__name__)

DELIVER_WEBHOOK = "participation.deliver_webhook"
MAIL_ANNOUNCEMENT = "participation.mail_announcement"
DELIVER_DUE = "participation.deliver_due"


def send(name: str, countdown: float | None = None, **kwargs: Any) -> bool:
    """Send the site task ``name`` now (after ``countdown`` seconds); False (logged) if the broker is down."""
    from leaderboard.celery import app

    try:
        app.send_task(name, kwargs=kwargs, queue=settings.SITE_QUEUE, countdown=countdown, retry=True,
                      retry_policy=settings.SEND_RETRY_POLICY)
    except Exception as exc:  # noqa: BLE001 - the broker's errors are many; beat finds the work later
        log.warning("Could not send %s %s (%s); Celery beat's %s will", name, kwargs, exc, DELIVER_DUE)
        return False
    return True


def send_after_commit(name: str, **kwargs: Any) -> None:
    transaction.on_commit(lambda: send(name, **kwargs), robust=True)
