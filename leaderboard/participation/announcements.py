"""Announcements: a banner on a benchmark's pages for a set time, mailed to its participants when asked.

Written from the desk (``moderation.participation_actions.check_announce``, audited) or declared in
the bundle's ``announcements`` (audited with the load). A mailed announcement goes to every
participant (``selectors.recipients``: accepted the terms or submitted, with an address, not banned)
one message each, in batches of ``ANNOUNCEMENT_EMAIL_BATCH`` over one connection, by the site task
``participation.mail_announcement`` once the announcement commits; ``mailed_through`` records the
last user mailed, so a mailing that stopped resumes there (Celery beat finds it). At most
``ANNOUNCEMENT_EMAILS_PER_DAY`` announcements of a benchmark are mailed in 24 hours; banners alone
are not limited. The webhook hears of each one.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.core.cache import caches
from django.core.mail import EmailMessage, get_connection
from django.db import transaction
from django.template.loader import render_to_string
from django.utils import timezone

from leaderboard.benchmarks.models import Benchmark
from leaderboard.lib.pagecache import CACHE_ALIAS, CacheErrors, bump
from leaderboard.participation import dispatch, webhooks
from leaderboard.participation.models import Announcement
from leaderboard.participation.selectors import recipients

log = logging.getLogger(__name__)

# Beat takes over a mailing nobody finished after this long (its task was lost, or its worker died).
STALLED_AFTER = timedelta(minutes=2)


class AnnouncementError(Exception):
    """An announcement that cannot be made as asked; the text says why."""


def mailed_recently(benchmark: Benchmark, now: datetime | None = None) -> int:
    since = (now or timezone.now()) - timedelta(hours=24)
    return Announcement.objects.filter(benchmark=benchmark, email=True, created_at__gte=since).count()


def mail_refusal(benchmark: Benchmark | None, adding: int = 1) -> str | None:
    """Why ``adding`` more mailed announcements of ``benchmark`` would pass the daily limit, or None."""
    limit = int(settings.ANNOUNCEMENT_EMAILS_PER_DAY)
    recent = mailed_recently(benchmark) if benchmark is not None and benchmark.pk else 0
    if recent + adding <= limit:
        return None
    title = benchmark.title if benchmark is not None else "this benchmark"
    return (f"{recent} announcement{'s' * (recent != 1)} of {title} {'were' if recent != 1 else 'was'} mailed "
            f"in the last 24 hours; at most {limit} a day are (ANNOUNCEMENT_EMAILS_PER_DAY). Show it as a banner "
            "without mail, or mail it later.")


def do_announce(benchmark: Benchmark, *, title: str, body: str, shows_until: datetime,
                shows_from: datetime | None = None, email: bool = False, by: Any = None,
                key: str = "") -> Announcement:
    """Show an announcement on the benchmark's pages (and mail it when ``email``); the webhook hears of it."""
    title, body, shows_from = title.strip(), body.strip(), shows_from or timezone.now()
    if not title or not body:
        raise AnnouncementError("Expected a title and a text.")
    if shows_until <= shows_from:
        raise AnnouncementError(f"Expected the banner to end after it starts, but got {shows_from:%Y-%m-%d %H:%M} "
                                f"to {shows_until:%Y-%m-%d %H:%M} UTC.")
    if email and (refused := mail_refusal(benchmark)):
        raise AnnouncementError(refused)
    with transaction.atomic():
        announcement = Announcement.objects.create(benchmark=benchmark, key=key, title=title[:200], body=body,
                                                   shows_from=shows_from, shows_until=shows_until, email=email,
                                                   created_by=by)
        bump(benchmark.track)
        webhooks.do_queue_event(benchmark, "announcement", {
            "id": announcement.pk, "title": announcement.title, "body": announcement.body,
            "shows_from": shows_from.isoformat(), "shows_until": shows_until.isoformat(), "emailed": email,
            "url": webhooks.board_url(benchmark)})
        if email:
            dispatch.send_after_commit(dispatch.MAIL_ANNOUNCEMENT, announcement_id=announcement.pk)
    return announcement


def do_change(announcement: Announcement, **fields: Any) -> Announcement:
    """Change an announcement's text or times (a bundle loaded again); it is not mailed again."""
    with transaction.atomic():
        Announcement.objects.filter(pk=announcement.pk).update(**fields)
        bump(announcement.benchmark.track)
    announcement.refresh_from_db()
    return announcement


def _messages(announcement: Announcement, users: list[Any]) -> list[EmailMessage]:
    context = {"SITE_NAME": settings.SITE_NAME, "announcement": announcement,
               "benchmark": announcement.benchmark, "url": webhooks.board_url(announcement.benchmark)}
    subject = render_to_string("emails/announcement_subject.txt", context).strip()
    body = render_to_string("emails/announcement.txt", context)
    # One message per participant: nobody sees another's address.
    return [EmailMessage(subject, body, settings.DEFAULT_FROM_EMAIL, [user.email]) for user in users]


def do_mail(announcement_id: int) -> int:
    """Mail an announcement to the participants not mailed yet, batch by batch; returns how many this
    call mailed. Only one process mails an announcement at a time (a lock in the cache)."""
    lock = f"announcement-mail:{announcement_id}"
    cache = caches[CACHE_ALIAS]
    try:
        if not cache.add(lock, 1, timeout=int(STALLED_AFTER.total_seconds()) * 5):
            return 0
    except CacheErrors as exc:
        log.warning("Mailing announcement %s without its lock: %s", announcement_id, exc)
    mailed = 0
    try:
        while True:
            announcement = Announcement.objects.select_related("benchmark").get(pk=announcement_id)
            if not announcement.email or announcement.mailed_at is not None:
                return mailed
            batch = list(recipients(announcement.benchmark).filter(pk__gt=announcement.mailed_through)
                         [:int(settings.ANNOUNCEMENT_EMAIL_BATCH)])
            if not batch:
                Announcement.objects.filter(pk=announcement.pk).update(mailed_at=timezone.now())
                return mailed
            try:
                with get_connection() as connection:
                    connection.send_messages(_messages(announcement, batch))
            except OSError as exc:  # SMTP errors are OSErrors too: Celery beat tries again in a minute
                log.warning("Mailing announcement %s stopped after %s messages: %s", announcement_id, mailed, exc)
                return mailed
            Announcement.objects.filter(pk=announcement.pk).update(
                mailed_through=batch[-1].pk, mailed_count=announcement.mailed_count + len(batch))
            mailed += len(batch)
    finally:
        try:
            cache.delete(lock)
        except CacheErrors:
            pass


def do_mail_due() -> int:
    """Finish the mailings nobody finished (Celery beat): their task never arrived, or stopped."""
    stalled = Announcement.objects.filter(email=True, mailed_at__isnull=True,
                                          created_at__lte=timezone.now() - STALLED_AFTER)
    return sum(do_mail(pk) for pk in stalled.values_list("pk", flat=True))
