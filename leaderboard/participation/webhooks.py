"""A benchmark's webhook: a signed JSON POST to its host's service on each announcement, phase change
and newly published row, retried until it is answered with a 2xx.

Each event is a ``WebhookDelivery`` row written in the transaction of the change, then sent by
the site task ``participation.deliver_webhook`` once it commits. An attempt that fails (no answer
within ``WEBHOOK_TIMEOUT``, a refused connection, a status other than 2xx, a redirect) is tried
again after ``WEBHOOK_RETRY_SECONDS`` x 2^(attempts - 1), at most an hour later, up to
``WEBHOOK_MAX_ATTEMPTS`` attempts; Celery beat's minute round delivers what is due and was never
sent (the broker was down). An attempt claims its row first, so two never post one delivery at once.

The request::

    POST <url>
    Content-Type: application/json
    X-Leaderboard-Event: announcement | phase_changed | row_published | ping
    X-Leaderboard-Delivery: <id>          (the same on every attempt: a receiver drops repeats)
    X-Leaderboard-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>." + body under the secret>

A receiver recomputes v1 with the secret the desk shows (``/moderation/tracks/<track>/announcements/``),
compares in constant time, and refuses a t far from its clock (replays). Payloads hold what the
public pages show, never more: no hidden labels, and no score while the split's results are
embargoed.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import secrets
import time
from datetime import timedelta
from typing import Any

import requests
from django.conf import settings
from django.db import transaction
from django.urls import reverse
from django.utils import timezone

from leaderboard.benchmarks.models import Benchmark, Split
from leaderboard.benchmarks.phases import phase_of
from leaderboard.participation import dispatch
from leaderboard.participation.models import Webhook, WebhookDelivery

log = logging.getLogger(__name__)

SIGNATURE_HEADER = "X-Leaderboard-Signature"
MAX_RETRY_SECONDS = 3600


def new_secret() -> str:
    return "whsec_" + secrets.token_urlsafe(32)


def sign(secret: str, body: bytes, timestamp: int) -> str:
    """The signature header's value of ``body`` sent at ``timestamp``."""
    digest = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()
    return f"t={timestamp},v1={digest}"


def verify(secret: str, body: bytes, header: str, tolerance: int = 300, now: float | None = None) -> bool:
    """What a receiver does (and the tests): the header's v1 matches and its t is within ``tolerance`` s."""
    parts = dict(item.split("=", 1) for item in header.split(",") if "=" in item)
    try:
        timestamp = int(parts.get("t", ""))
    except ValueError:
        return False
    if abs((now or time.time()) - timestamp) > tolerance:
        return False
    return hmac.compare_digest(sign(secret, body, timestamp), f"t={timestamp},v1={parts.get('v1', '')}")


def board_url(benchmark: Benchmark, split: Split | None = None) -> str:
    url = settings.SITE_URL + reverse("rankings:leaderboard", args=[benchmark.track])
    return f"{url}?split={split.name}" if split is not None else url


def do_queue_event(benchmark: Benchmark, event: str, data: dict[str, Any]) -> WebhookDelivery | None:
    """Record ``event`` for the benchmark's webhook (None without one); it is sent once the transaction commits."""
    webhook = Webhook.objects.filter(benchmark=benchmark).first()
    if webhook is None:
        return None
    payload = {"event": event, "track": benchmark.track, "benchmark": benchmark.title, "site": settings.SITE_URL,
               "sent_for": timezone.now().isoformat(), **data}
    delivery = WebhookDelivery.objects.create(webhook=webhook, event=event, payload=payload)
    dispatch.send_after_commit(dispatch.DELIVER_WEBHOOK, delivery_id=delivery.pk)
    return delivery


def on_row_published(sender: Any, entry: Any, **_: Any) -> None:
    """``rankings.signals.row_published``: a row is new on a public board."""
    split = entry.split
    now = timezone.now()
    embargoed = bool(split.results_visible_after and now < split.results_visible_after)
    primary = split.benchmark.spec.primary_metric
    do_queue_event(split.benchmark, "row_published", {
        "split": split.name, "entry_id": entry.pk, "method": entry.name,
        "team": None if entry.is_anonymous else entry.team_name, "anonymous": entry.is_anonymous,
        "primary_metric": primary, "score": None if embargoed else entry.scores.get(primary),
        "scores_visible_after": split.results_visible_after.isoformat() if embargoed else None,
        "url": board_url(split.benchmark, split)})


def do_check_phases(now: Any = None) -> int:
    """Tell each webhook of the splits whose phase changed since it last looked; returns how many events."""
    sent = 0
    for webhook in Webhook.objects.select_related("benchmark"):
        seen, changed = dict(webhook.phases_seen), False
        for split in webhook.benchmark.splits.all():
            phase, before = phase_of(split, now), seen.get(str(split.pk))
            if before == phase:
                continue
            with transaction.atomic():
                if before is not None:
                    do_queue_event(webhook.benchmark, "phase_changed", {
                        "split": split.name, "from": before, "to": phase, "url": board_url(webhook.benchmark, split),
                        "starts_at": _iso(split.starts_at), "freeze_at": _iso(split.freeze_at),
                        "deadline": _iso(split.deadline)})
                    sent += 1
            seen[str(split.pk)], changed = phase, True
        if changed:
            Webhook.objects.filter(pk=webhook.pk).update(phases_seen=seen)
    return sent


def phases_now(benchmark: Benchmark) -> dict[str, str]:
    """Each split's phase now, as ``Webhook.phases_seen`` keeps it (a new webhook starts from here)."""
    return {str(split.pk): phase_of(split) for split in benchmark.splits.all()}


def _iso(moment: Any) -> str | None:
    return moment.isoformat() if moment else None


def _claim(delivery_id: int) -> WebhookDelivery | None:
    """Take a due delivery for one attempt (its next try moves past the attempt's end); None if it is not
    due, done, or another attempt holds it."""
    now = timezone.now()
    with transaction.atomic():
        delivery = (WebhookDelivery.objects.select_for_update().select_related("webhook")
                    .filter(pk=delivery_id, next_try_at__lte=now + timedelta(seconds=1)).first())
        if delivery is None:
            return None
        lease = now + timedelta(seconds=float(settings.WEBHOOK_TIMEOUT) + 30)
        WebhookDelivery.objects.filter(pk=delivery.pk).update(next_try_at=lease, attempts=delivery.attempts + 1)
        delivery.attempts += 1
    return delivery


def _post(delivery: WebhookDelivery) -> tuple[int | None, str]:
    body = json.dumps(delivery.payload, sort_keys=True).encode()
    headers = {"Content-Type": "application/json", "User-Agent": "leaderboard-webhook/1",
               "X-Leaderboard-Event": delivery.event, "X-Leaderboard-Delivery": str(delivery.pk),
               SIGNATURE_HEADER: sign(delivery.webhook.secret, body, int(time.time()))}
    try:
        response = requests.post(delivery.webhook.url, data=body, headers=headers,
                                 timeout=float(settings.WEBHOOK_TIMEOUT), allow_redirects=False)
    except requests.RequestException as exc:
        return None, f"{type(exc).__name__}: {exc}"[:300]
    if 200 <= response.status_code < 300:
        return response.status_code, ""
    return response.status_code, f"answered HTTP {response.status_code}"


def do_deliver(delivery_id: int) -> float | None:
    """One attempt at a due delivery. Returns the seconds until the next attempt after a failure, or None
    (delivered, given up, or not this attempt's to make)."""
    delivery = _claim(delivery_id)
    if delivery is None:
        return None
    status, error = _post(delivery)
    now = timezone.now()
    fields: dict[str, Any] = {"last_status": status, "last_error": error}
    delay = None
    if not error:
        fields |= {"delivered_at": now, "next_try_at": None}
    elif delivery.attempts >= int(settings.WEBHOOK_MAX_ATTEMPTS):
        fields["next_try_at"] = None
        log.warning("Webhook delivery %s (%s to %s) given up after %s attempts: %s", delivery.pk, delivery.event,
                    delivery.webhook.url, delivery.attempts, error)
    else:
        delay = min(float(settings.WEBHOOK_RETRY_SECONDS) * 2 ** (delivery.attempts - 1), MAX_RETRY_SECONDS)
        fields["next_try_at"] = now + timedelta(seconds=delay)
        log.info("Webhook delivery %s failed (%s); attempt %s in %.0f s", delivery.pk, error,
                 delivery.attempts + 1, delay)
    WebhookDelivery.objects.filter(pk=delivery.pk).update(**fields)
    return delay


def do_deliver_due() -> int:
    """Attempt every delivery that is due now (Celery beat: those the broker never carried, or whose
    attempt was lost); returns how many were delivered."""
    due = WebhookDelivery.objects.filter(next_try_at__lte=timezone.now()).values_list("pk", flat=True)[:200]
    delivered = 0
    for pk in list(due):
        do_deliver(pk)
        delivered += WebhookDelivery.objects.filter(pk=pk, delivered_at__isnull=False).exists()
    return delivered


def do_set_webhook(benchmark: Benchmark, url: str | None) -> Webhook | None:
    """Create, re-point or (``url`` None) remove the benchmark's webhook; a new one gets a new secret and
    starts from the splits' phases now."""
    if url is None:
        Webhook.objects.filter(benchmark=benchmark).delete()
        return None
    webhook, created = Webhook.objects.get_or_create(
        benchmark=benchmark, defaults={"url": url, "secret": new_secret(), "phases_seen": phases_now(benchmark)})
    if not created and webhook.url != url:
        Webhook.objects.filter(pk=webhook.pk).update(url=url)
        webhook.refresh_from_db()
    return webhook


def do_rotate_secret(webhook: Webhook) -> Webhook:
    Webhook.objects.filter(pk=webhook.pk).update(secret=new_secret())
    webhook.refresh_from_db()
    return webhook
