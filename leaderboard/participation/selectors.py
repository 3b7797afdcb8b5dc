"""Reads of participation: bans, rules, participants, the announcements shown now."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db.models import Q, QuerySet
from django.utils import timezone

from leaderboard.benchmarks.models import Benchmark
from leaderboard.participation.models import Announcement, Ban, Participant, Rules


def rules_of(benchmark: Benchmark) -> Rules | None:
    """The benchmark's participation rules; None: no ``participation`` section (anyone may submit)."""
    return Rules.objects.select_related("terms").filter(benchmark=benchmark).first()


def names_of(user: Any) -> set[str]:
    """How a bundle may name ``user``: their username, and their address (lower-case)."""
    names = {user.get_username()}
    if getattr(user, "email", ""):
        names.add(user.email.strip().lower())
    return names


def active_ban(user: Any, benchmark: Benchmark) -> Ban | None:
    """The desk's ban of ``user`` on ``benchmark`` or everywhere (the site-wide one first), if any."""
    if user is None or not getattr(user, "pk", None):
        return None
    return (Ban.objects.filter(user=user, lifted_at__isnull=True)
            .filter(Q(benchmark__isnull=True) | Q(benchmark=benchmark)).order_by("benchmark_id").first())


def banned_by_bundle(user: Any, rules: Rules | None) -> bool:
    return bool(rules and rules.banned and names_of(user) & set(rules.banned))


def is_banned(user: Any, benchmark: Benchmark) -> bool:
    """Whether ``user``'s uploads to ``benchmark`` are refused and their rows on it hidden."""
    if user is None or not getattr(user, "pk", None):
        return False
    return active_ban(user, benchmark) is not None or banned_by_bundle(user, rules_of(benchmark))


def active_bans(benchmark: Benchmark | None) -> Any:
    """The active bans of ``benchmark`` (with the site-wide ones), or only the site-wide ones (None)."""
    bans = Ban.objects.filter(lifted_at__isnull=True).select_related("user", "benchmark", "created_by")
    return bans.filter(benchmark__isnull=True) if benchmark is None else bans.filter(
        Q(benchmark=benchmark) | Q(benchmark__isnull=True))


def participant_of(user: Any, benchmark: Benchmark) -> Participant | None:
    return Participant.objects.filter(user=user, benchmark=benchmark).first()


def banners(benchmark: Benchmark, now: datetime | None = None) -> tuple[list[Announcement], datetime | None]:
    """The announcements the benchmark's pages show now (newest first), and when that changes by itself
    next (one starts or ends: cached pages end then); one query."""
    now = now or timezone.now()
    coming = list(Announcement.objects.filter(benchmark=benchmark, shows_until__gt=now))
    moments = [m for a in coming for m in (a.shows_from, a.shows_until) if m > now]
    return [a for a in coming if a.shows_from <= now], min(moments, default=None)


def current_announcements(benchmark: Benchmark, now: datetime | None = None) -> list[Announcement]:
    return banners(benchmark, now)[0]


def participant_users(benchmark: Benchmark) -> QuerySet[Any]:
    """Everyone who takes part: accepted its terms, asked to join, was invited, or submitted to it."""
    from django.contrib.auth import get_user_model

    return get_user_model().objects.filter(
        Q(participations__benchmark=benchmark) | Q(submissions__split__benchmark=benchmark)).distinct()


def recipients(benchmark: Benchmark) -> QuerySet[Any]:
    """Who an announcement is mailed to: participants who accepted its terms or submitted to it, with an
    address, not banned from it, not denied, ordered by id (a mailing resumes by id)."""
    from django.contrib.auth import get_user_model

    accepted = Participant.objects.filter(benchmark=benchmark, terms_accepted_at__isnull=False) \
        .exclude(state=Participant.State.DENIED).values("user_id")
    submitted = get_user_model().objects.filter(submissions__split__benchmark=benchmark).values("pk")
    banned = Ban.objects.filter(lifted_at__isnull=True).filter(
        Q(benchmark__isnull=True) | Q(benchmark=benchmark)).values("user_id")
    users = (get_user_model().objects.filter(Q(pk__in=accepted) | Q(pk__in=submitted), is_active=True)
             .exclude(email="").exclude(pk__in=banned).order_by("pk"))
    rules = rules_of(benchmark)
    if rules and rules.banned:
        users = users.exclude(username__in=rules.banned).exclude(email__in=rules.banned)
    return users
