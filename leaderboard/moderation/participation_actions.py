"""The desk's actions on who takes part and on reaching them. Each checks permission, acts through
``leaderboard.participation`` and appends to the audit log in the same transaction.

A benchmark's maintainers approve, deny, invite and ban on it; a ban from every benchmark is for
staff only. Downloading the participants' list is audited too (it holds their addresses).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied
from django.db import transaction

from leaderboard.benchmarks.models import Benchmark
from leaderboard.moderation.models import AuditEntry
from leaderboard.moderation.services import ModerationError, check_maintainer
from leaderboard.participation import announcements, services, webhooks
from leaderboard.participation.models import Announcement, Ban, Participant, Webhook

Action = AuditEntry.Action


def _audit(user: Any, action: str, track: str, target: str, reason: str = "", **details: Any) -> AuditEntry:
    return AuditEntry.objects.create(actor=user, actor_name=user.get_username(), action=action, track=track,
                                     target=target[:300], reason=reason.strip(), details=details)


def _needs_reason(reason: str, what: str) -> None:
    if not reason.strip():
        raise ModerationError(f"A reason is required to {what}: the user reads it.")


def find_user(username: str) -> Any:
    user = get_user_model().objects.filter(username=username.strip()).first()
    if user is None:
        raise ModerationError(f"No user {username.strip()!r}.")
    return user


def check_decide(by: Any, participant: Participant, approve: bool, reason: str = "") -> Participant:
    """Approve or deny a request to take part (a denial needs a reason: the user reads it in the refusal)."""
    check_maintainer(by, participant.benchmark)
    if not approve:
        _needs_reason(reason, "deny a request")
    with transaction.atomic():
        _audit(by, Action.APPROVE if approve else Action.DENY, participant.benchmark.track,
               f"{participant.user.get_username()} in {participant.benchmark.track}", reason,
               user_id=participant.user_id, was=participant.state)
        return services.do_decide(by, participant, approve, reason)


def check_invite(by: Any, benchmark: Benchmark, username: str) -> Participant:
    check_maintainer(by, benchmark)
    user = find_user(username)
    with transaction.atomic():
        _audit(by, Action.INVITE, benchmark.track, f"{user.get_username()} in {benchmark.track}", user_id=user.pk)
        return services.do_invite(by, benchmark, user)


def check_ban(by: Any, username: str, benchmark: Benchmark | None, reason: str) -> Ban:
    """Ban a user from ``benchmark`` (its maintainers), or from every benchmark (``None``: staff only)."""
    if benchmark is None:
        if not by.is_staff:
            raise PermissionDenied("Only staff ban a user from every benchmark; a track's maintainers ban from "
                                   "their track.")
    else:
        check_maintainer(by, benchmark)
    _needs_reason(reason, "ban a user")
    user = find_user(username)
    if user.pk == by.pk:
        raise ModerationError("You cannot ban yourself.")
    where = benchmark.track if benchmark else ""
    if Ban.objects.filter(user=user, benchmark=benchmark, lifted_at__isnull=True).exists():
        title = benchmark.title if benchmark else "every benchmark"
        raise ModerationError(f"{user.get_username()} is banned from {title} already.")
    with transaction.atomic():
        _audit(by, Action.BAN, where, f"{user.get_username()} from {where or 'every benchmark'}", reason,
               user_id=user.pk)
        return services.do_ban(by, user, benchmark, reason)


def check_lift_ban(by: Any, ban: Ban, reason: str = "") -> Ban:
    if ban.benchmark is None:
        if not by.is_staff:
            raise PermissionDenied("Only staff lift a ban from every benchmark.")
    else:
        check_maintainer(by, ban.benchmark)
    if ban.lifted_at is not None:
        raise ModerationError("This ban was lifted already.")
    where = ban.benchmark.track if ban.benchmark else ""
    with transaction.atomic():
        _audit(by, Action.UNBAN, where, f"{ban.user.get_username()} from {where or 'every benchmark'}", reason,
               user_id=ban.user_id, ban_id=ban.pk)
        return services.do_lift_ban(by, ban, reason)


def check_export_participants(by: Any, benchmark: Benchmark, rows: int) -> None:
    """Record that ``by`` downloaded the participants' list of ``benchmark`` (``rows`` lines)."""
    check_maintainer(by, benchmark)
    _audit(by, Action.EXPORT_PARTICIPANTS, benchmark.track, f"participants of {benchmark.track}", rows=rows)


def check_announce(by: Any, benchmark: Benchmark, *, title: str, body: str, shows_until: datetime,
                   email: bool, shows_from: datetime | None = None) -> Announcement:
    check_maintainer(by, benchmark)
    try:
        with transaction.atomic():
            announcement = announcements.do_announce(benchmark, title=title, body=body, shows_until=shows_until,
                                                     shows_from=shows_from, email=email, by=by)
            _audit(by, Action.ANNOUNCE, benchmark.track, f"announcement #{announcement.pk}: {announcement.title}",
                   announcement_id=announcement.pk, email=email, shows_until=shows_until.isoformat())
    except announcements.AnnouncementError as exc:
        raise ModerationError(str(exc)) from None
    return announcement


def check_rotate_webhook_secret(by: Any, webhook: Webhook) -> Webhook:
    """A new signing secret (the old one leaked): deliveries from now on are signed with it."""
    check_maintainer(by, webhook.benchmark)
    with transaction.atomic():
        _audit(by, Action.WEBHOOK_SECRET, webhook.benchmark.track, f"webhook of {webhook.benchmark.track}",
               url=webhook.url)
        return webhooks.do_rotate_secret(webhook)


def check_ping_webhook(by: Any, webhook: Webhook) -> None:
    """Send a ``ping`` event, to try the receiver."""
    check_maintainer(by, webhook.benchmark)
    with transaction.atomic():
        webhooks.do_queue_event(webhook.benchmark, "ping", {"by": by.get_username()})
