"""Submission quotas per team and split.

A submission counts from the moment it is created (``Submission.quota``):
against the UTC day's quota, the total and, until it is done, the in-flight
limit. Format rejections move to a separate, larger daily cap; failures of the
platform, cancellations and uploads that never complete are refunded.

``check_quota`` must run inside the transaction that creates the submission,
after ``lock_team``: the lock makes concurrent requests of one team take turns,
so that no race lets an extra submission through.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, time, timedelta

from django.conf import settings
from django.db.models import Count, Q
from django.utils import timezone

from leaderboard.accounts.models import Team
from leaderboard.benchmarks.models import Split
from leaderboard.submissions.models import QuotaOverride, Submission

Status, Quota = Submission.Status, Submission.Quota
IN_FLIGHT = [Status.UPLOADING, Status.SUBMITTED, Status.QUEUED, Status.RUNNING]


class QuotaExceeded(Exception):
    """No submission may be made now; the text says which limit and when it frees up."""


@dataclass(frozen=True)
class Limits:
    per_day: int
    total: int
    in_flight: int
    rejected_per_day: int


@dataclass(frozen=True)
class Usage:
    limits: Limits
    today: int
    total: int
    in_flight: int
    rejected_today: int
    resets_at: datetime

    def as_json(self) -> dict[str, object]:
        return {"per_day": {"used": self.today, "limit": self.limits.per_day},
                "total": {"used": self.total, "limit": self.limits.total},
                "in_flight": {"used": self.in_flight, "limit": self.limits.in_flight},
                "rejected_per_day": {"used": self.rejected_today, "limit": self.limits.rejected_per_day},
                "resets_at": self.resets_at.isoformat()}


def day_start(now: datetime | None = None) -> datetime:
    now = (now or timezone.now()).astimezone(UTC)
    return datetime.combine(now.date(), time.min, tzinfo=UTC)


def limits_for(team: Team, split: Split) -> Limits:
    """The defaults, overridden by the team's override for all splits, then for this split."""
    values = {"per_day": settings.QUOTA_PER_DAY, "total": settings.QUOTA_TOTAL,
              "in_flight": settings.QUOTA_IN_FLIGHT, "rejected_per_day": settings.QUOTA_REJECTED_PER_DAY}
    overrides = QuotaOverride.objects.filter(Q(split__isnull=True) | Q(split=split), team=team)
    for override in sorted(overrides, key=lambda o: o.split_id is not None):
        for name in values:
            if getattr(override, name) is not None:
                values[name] = getattr(override, name)
    return Limits(**values)


def usage(team: Team, split: Split) -> Usage:
    start = day_start()
    counts = Submission.objects.filter(team=team, split=split).aggregate(
        today=Count("pk", filter=Q(quota=Quota.COUNTED, created_at__gte=start)),
        total=Count("pk", filter=Q(quota=Quota.COUNTED)),
        in_flight=Count("pk", filter=Q(quota=Quota.COUNTED, status__in=IN_FLIGHT)),
        rejected_today=Count("pk", filter=Q(quota=Quota.REJECTED, created_at__gte=start)))
    return Usage(limits=limits_for(team, split), resets_at=start + timedelta(days=1), **counts)


def lock_team(team: Team) -> None:
    """Serialise quota checks of ``team`` until the transaction ends (a row lock on PostgreSQL)."""
    Team.objects.select_for_update().filter(pk=team.pk).first()


def check_quota(team: Team, split: Split) -> Usage:
    """Raise ``QuotaExceeded`` unless ``team`` may make one more submission on ``split``."""
    used = usage(team, split)
    limits, where = used.limits, f"team {team.name} on {split}"
    reset = f"the count resets at {used.resets_at:%Y-%m-%d %H:%M} UTC"
    if used.total >= limits.total:
        raise QuotaExceeded(f"Quota reached: {used.total} of {limits.total} submissions in total for {where}.")
    if used.today >= limits.per_day:
        raise QuotaExceeded(f"Quota reached: {used.today} of {limits.per_day} submissions today for {where}; "
                            f"{reset}.")
    if used.rejected_today >= limits.rejected_per_day:
        raise QuotaExceeded(f"Quota reached: {used.rejected_today} files rejected today for {where} (at most "
                            f"{limits.rejected_per_day}); check files with `lb validate` first; {reset}.")
    if used.in_flight >= limits.in_flight:
        raise QuotaExceeded(f"Quota reached: {used.in_flight} submissions of {where} are still uploading or "
                            f"being scored (at most {limits.in_flight} at once); wait for one to finish.")
    return used
