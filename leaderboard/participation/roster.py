"""The participants' list of a benchmark (the maintainers' CSV): who takes part, with their terms, their
registration state and their counted submissions."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db.models import Count, Q

from leaderboard.accounts.models import VerifiedEmail
from leaderboard.benchmarks.models import Benchmark
from leaderboard.participation.gate import state_of
from leaderboard.participation.models import Ban, Participant
from leaderboard.participation.selectors import banned_by_bundle, participant_users, rules_of
from leaderboard.submissions.models import Submission


@dataclass(frozen=True)
class ParticipantRow:
    """One line of the participants' CSV."""

    user: Any
    teams: str
    participant: Participant | None
    state: str
    submissions: int
    banned: bool
    email_verified: bool


def participant_rows(benchmark: Benchmark) -> list[ParticipantRow]:
    """Every participant of ``benchmark`` with the teams they submitted with, their terms, their
    registration state (``gate.state_of``) and their counted submissions; by username."""
    rules = rules_of(benchmark)
    users = list(participant_users(benchmark).order_by("username"))
    ids = [u.pk for u in users]
    participants = {p.user_id: p for p in Participant.objects.filter(benchmark=benchmark, user_id__in=ids)}
    submitted = Submission.objects.filter(split__benchmark=benchmark, created_by_id__in=ids)
    counted = dict(submitted.filter(quota=Submission.Quota.COUNTED).values_list("created_by_id")
                   .annotate(n=Count("pk")))
    teams: dict[int, set[str]] = {}
    for user_id, slug in submitted.values_list("created_by_id", "team__slug").distinct():
        teams.setdefault(user_id, set()).add(slug)
    verified = set(VerifiedEmail.objects.filter(user_id__in=ids).values_list("user_id", "email"))
    banned = set(Ban.objects.filter(user_id__in=ids, lifted_at__isnull=True)
                 .filter(Q(benchmark__isnull=True) | Q(benchmark=benchmark)).values_list("user_id", flat=True))
    return [ParticipantRow(user=u, teams=";".join(sorted(teams.get(u.pk, ()))), participant=participants.get(u.pk),
                           state=state_of(u, rules, participants.get(u.pk)), submissions=counted.get(u.pk, 0),
                           banned=u.pk in banned or banned_by_bundle(u, rules),
                           email_verified=(u.pk, (u.email or "").lower()) in verified)
            for u in users]
