"""Submission quotas on a split, per team and per user.

A submission counts from the moment it is created (``Submission.quota``):
against the UTC day's quota, the total, the minimum interval and, until it is
done, the in-flight limit. Format rejections move to a separate, larger daily
cap (per team), as do files sent in one request and refused by their name or
size before they were stored (``RefusedUpload``: no submission, no method);
failures of the platform, cancellations and uploads that never complete are
refunded, for the team and for the user alike.

Team limits: the defaults (``QUOTA_*``), then the team's override for all
splits, then the split's own team limits (``SplitLimit``), then the team's
override for this split. User limits (the team's, or ``QUOTA_USER_*``, then
the split's user limits) count every submission the user made on the split,
whichever team it was for, so that making a new team does not buy new
submissions.

``check_quota`` must run inside the transaction that creates the submission,
after ``lock``: the row locks make concurrent requests of one team (or one
user) take turns, so that no race lets an extra submission through.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import UTC, datetime, time, timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db.models import Count, Max, Q
from django.utils import timezone

from leaderboard.accounts.models import Team
from leaderboard.benchmarks.models import Split
from leaderboard.submissions.models import QuotaOverride, RefusedUpload, SplitLimit, Submission

Status, Quota = Submission.Status, Submission.Quota
IN_FLIGHT = [Status.UPLOADING, Status.SUBMITTED, Status.QUEUED, Status.RUNNING]
LIMIT_FIELDS = ("per_day", "total", "in_flight", "min_interval")


class QuotaExceeded(Exception):
    """No submission may be made now; the text says which limit, its value and when one is allowed.

    ``retry_at`` is that moment when it is known (None: when a submission finishes, or never).
    """

    def __init__(self, message: str, retry_at: datetime | None = None) -> None:
        super().__init__(message)
        self.retry_at = retry_at


@dataclass(frozen=True)
class Limits:
    per_day: int
    total: int
    in_flight: int
    rejected_per_day: int
    min_interval: int = 0


@dataclass(frozen=True)
class Usage:
    limits: Limits
    today: int
    total: int
    in_flight: int
    rejected_today: int
    resets_at: datetime
    last_at: datetime | None = None

    @property
    def next_at(self) -> datetime | None:
        """When the minimum interval lets the next submission in (None: no interval, or nothing counted yet)."""
        if not self.limits.min_interval or self.last_at is None:
            return None
        return self.last_at + timedelta(seconds=self.limits.min_interval)

    def as_json(self) -> dict[str, object]:
        next_at = self.next_at
        return {"per_day": {"used": self.today, "limit": self.limits.per_day},
                "total": {"used": self.total, "limit": self.limits.total},
                "in_flight": {"used": self.in_flight, "limit": self.limits.in_flight},
                "rejected_per_day": {"used": self.rejected_today, "limit": self.limits.rejected_per_day},
                "min_interval": {"seconds": self.limits.min_interval,
                                 "next_at": next_at.isoformat() if next_at and next_at > timezone.now() else None},
                "resets_at": self.resets_at.isoformat()}


def day_start(now: datetime | None = None) -> datetime:
    now = (now or timezone.now()).astimezone(UTC)
    return datetime.combine(now.date(), time.min, tzinfo=UTC)


def _apply(values: dict[str, Any], row: Any) -> None:
    for name in values:
        if getattr(row, name, None) is not None:
            values[name] = getattr(row, name)


def limits_for(team: Team, split: Split) -> Limits:
    """The team's limits on ``split`` (the order of precedence is in the module's docstring)."""
    values = {"per_day": settings.QUOTA_PER_DAY, "total": settings.QUOTA_TOTAL,
              "in_flight": settings.QUOTA_IN_FLIGHT, "rejected_per_day": settings.QUOTA_REJECTED_PER_DAY,
              "min_interval": settings.QUOTA_MIN_INTERVAL}
    overrides = {o.split_id is not None: o
                 for o in QuotaOverride.objects.filter(Q(split__isnull=True) | Q(split=split), team=team)}
    _apply(values, overrides.get(False))
    _apply(values, SplitLimit.objects.filter(split=split, scope=SplitLimit.Scope.TEAM).first())
    _apply(values, overrides.get(True))
    return Limits(**values)


def user_limits_for(split: Split, team_limits: Limits) -> Limits:
    """A user's limits on ``split``, over all their teams, when submitting with a team of ``team_limits``.

    Unset (``QUOTA_USER_*`` 0, no ``SplitLimit`` per user), each is the team's:
    a new team then starts with the user's count, not at zero. No rejection
    cap per user: that one is the team's.
    """
    values = {"per_day": settings.QUOTA_USER_PER_DAY or team_limits.per_day,
              "total": settings.QUOTA_USER_TOTAL or team_limits.total,
              "in_flight": settings.QUOTA_USER_IN_FLIGHT or team_limits.in_flight,
              "min_interval": team_limits.min_interval}
    _apply(values, SplitLimit.objects.filter(split=split, scope=SplitLimit.Scope.USER).first())
    return Limits(rejected_per_day=0, **values)


def _count(submissions: Any, limits: Limits) -> Usage:
    start = day_start()
    counted = Q(quota=Quota.COUNTED)
    counts = submissions.aggregate(
        today=Count("pk", filter=counted & Q(created_at__gte=start)),
        total=Count("pk", filter=counted),
        in_flight=Count("pk", filter=counted & Q(status__in=IN_FLIGHT)),
        rejected_today=Count("pk", filter=Q(quota=Quota.REJECTED, created_at__gte=start)),
        last_at=Max("created_at", filter=counted))
    return Usage(limits=limits, resets_at=start + timedelta(days=1), **counts)


def usage(team: Team, split: Split) -> Usage:
    used = _count(Submission.objects.filter(team=team, split=split), limits_for(team, split))
    # Files refused by their name or size before they were stored are no submissions, but count as rejected.
    refused = RefusedUpload.objects.filter(team=team, split=split, created_at__gte=day_start()).count()
    return replace(used, rejected_today=used.rejected_today + refused)


def user_usage(user: Any, split: Split, team_limits: Limits) -> Usage:
    return _count(Submission.objects.filter(created_by=user, split=split), user_limits_for(split, team_limits))


def lock(team: Team, user: Any = None) -> None:
    """Serialise quota checks of ``team`` and of ``user`` until the transaction ends (row locks on PostgreSQL).

    Always the user first, then the team, so that two requests never wait for each other crosswise.
    """
    if user is not None:
        get_user_model().objects.select_for_update().filter(pk=user.pk).first()
    Team.objects.select_for_update().filter(pk=team.pk).first()


def lock_team(team: Team) -> None:
    lock(team)


def _when(moment: datetime) -> str:
    return f"{moment.astimezone(UTC):%Y-%m-%d %H:%M} UTC"


def _check(used: Usage, where: str, *, rejections: bool) -> None:
    limits = used.limits
    reset = f"the count resets at {_when(used.resets_at)}, when the next one is allowed"
    if used.total >= limits.total:
        raise QuotaExceeded(f"Quota reached: {used.total} of {limits.total} submissions in total {where}; "
                            "refunded submissions (failures on our side, cancellations) do not count.")
    if used.today >= limits.per_day:
        raise QuotaExceeded(f"Quota reached: {used.today} of {limits.per_day} submissions today {where}; "
                            f"{reset}.", used.resets_at)
    if rejections and used.rejected_today >= limits.rejected_per_day:
        raise QuotaExceeded(f"Quota reached: {used.rejected_today} files rejected today {where} (at most "
                            f"{limits.rejected_per_day}); check files with `lb validate` first; {reset}.",
                            used.resets_at)
    next_at = used.next_at
    if next_at is not None and timezone.now() < next_at:
        raise QuotaExceeded(f"Quota reached: at most one submission every {limits.min_interval} s {where}; "
                            f"the last one was at {_when(used.last_at)}, the next one is allowed at "  # type: ignore[arg-type]
                            f"{_when(next_at)}.", next_at)
    if used.in_flight >= limits.in_flight:
        raise QuotaExceeded(f"Quota reached: {used.in_flight} submissions {where} are still uploading or "
                            f"being scored (at most {limits.in_flight} at once); the next one is allowed when "
                            "one of them finishes.")


def check_quota(team: Team, split: Split, user: Any = None) -> Usage:
    """Raise ``QuotaExceeded`` unless ``team`` (and ``user``, when given) may make one more submission."""
    used = usage(team, split)
    _check(used, f"for team {team.name} on {split}", rejections=True)
    if user is not None:
        _check(user_usage(user, split, used.limits), f"by user {user.get_username()} on {split} (a limit per user, over all "
                                        "their teams)", rejections=False)
    return used
