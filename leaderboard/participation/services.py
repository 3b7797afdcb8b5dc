"""Writes of participation: a user accepting terms or asking to join; the maintainers' decisions,
invitations and bans (audited by ``moderation.participation_actions``, which calls these)."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.utils import timezone

from leaderboard.benchmarks.models import Benchmark
from leaderboard.participation.gate import terms_url
from leaderboard.participation.models import Ban, Participant, Registration
from leaderboard.participation.selectors import rules_of
from leaderboard.participation.terms import short


class ParticipationError(Exception):
    """A request about taking part that cannot be done as asked; ``status`` and ``code`` for the API."""

    status = 400
    code: str | None = None

    def __init__(self, message: str, **fields: str) -> None:
        super().__init__(message)
        self.fields = fields


class TermsMismatch(ParticipationError):
    status = 409
    code = "terms_version_mismatch"



def do_accept(user: Any, benchmark: Benchmark, version: str | None = None, join: bool = False) -> Participant:
    """Accept the benchmark's current terms (``version`` must be theirs) and, under ``registration:
    approval``, ask to join (``join`` asks without terms, where there are none). Idempotent."""
    rules = rules_of(benchmark)
    terms = rules.terms if rules else None
    version = (version or "").strip()
    if terms is None and version:
        raise ParticipationError(f"{benchmark.title} has no terms of use to accept.")
    if terms is not None:
        if not version:
            raise ParticipationError(f"Expected the version of the terms you accept: {{\"accept_terms\": "
                                     f"\"{terms.version}\"}} (read them at {terms_url(benchmark)}).",
                                     terms_url=terms_url(benchmark), terms_version=terms.version)
        if version not in {terms.version, short(terms.version)}:
            raise TermsMismatch(f"The terms of {benchmark.title} you accept ({version[:12]}) are not the current "
                                f"ones ({short(terms.version)}): read them again at {terms_url(benchmark)} and "
                                f"accept version {terms.version}.",
                                terms_url=terms_url(benchmark), terms_version=terms.version)
    elif not join:
        raise ParticipationError(f"Expected {{\"join\": true}}: {benchmark.title} has no terms of use to accept.")
    now = timezone.now()
    with transaction.atomic():
        participant, _ = Participant.objects.select_for_update().get_or_create(user=user, benchmark=benchmark)
        fields: dict[str, Any] = {}
        if terms is not None and participant.terms_version != terms.version:
            fields |= {"terms_version": terms.version, "terms_accepted_at": now}
        if rules and rules.registration == Registration.APPROVAL and participant.state == Participant.State.NONE:
            fields |= {"state": Participant.State.PENDING, "requested_at": now}
        if fields:
            Participant.objects.filter(pk=participant.pk).update(**fields)
            participant.refresh_from_db()
    return participant


def do_decide(by: Any, participant: Participant, approve: bool, reason: str = "") -> Participant:
    """Approve or deny a request (a denial says why: the user reads it in the refusal)."""
    state = Participant.State.APPROVED if approve else Participant.State.DENIED
    Participant.objects.filter(pk=participant.pk).update(state=state, decided_at=timezone.now(), decided_by=by,
                                                         reason=reason.strip())
    participant.refresh_from_db()
    return participant


def do_invite(by: Any, benchmark: Benchmark, user: Any) -> Participant:
    """Let ``user`` take part (approved, invited), whatever the registration."""
    with transaction.atomic():
        participant, _ = Participant.objects.select_for_update().get_or_create(user=user, benchmark=benchmark)
        Participant.objects.filter(pk=participant.pk).update(invited=True, state=Participant.State.APPROVED,
                                                             decided_at=timezone.now(), decided_by=by, reason="")
    participant.refresh_from_db()
    return participant


def do_refresh_rows_of(user: Any, benchmark: Benchmark | None) -> int:
    """Rewrite the board rows of what ``user`` published (on ``benchmark``, or everywhere): a ban hides
    them, a lifted one shows them again. Returns how many were rewritten."""
    from leaderboard.rankings.services import refresh_entry
    from leaderboard.submissions.models import Submission

    published = Submission.objects.filter(created_by=user, is_published=True).select_related(
        "method", "split__benchmark")
    if benchmark is not None:
        published = published.filter(split__benchmark=benchmark)
    for submission in published:
        refresh_entry(submission.method, submission.split)
    return len(published)


def do_ban(by: Any, user: Any, benchmark: Benchmark | None, reason: str) -> Ban:
    """Ban ``user`` from ``benchmark`` (None: every benchmark); their rows go at once."""
    with transaction.atomic():
        ban = Ban.objects.create(user=user, benchmark=benchmark, reason=reason.strip(), created_by=by)
        do_refresh_rows_of(user, benchmark)
    return ban


def do_lift_ban(by: Any, ban: Ban, reason: str = "") -> Ban:
    """Lift a ban; the user's published rows come back (unless another ban still holds them)."""
    with transaction.atomic():
        Ban.objects.filter(pk=ban.pk).update(lifted_at=timezone.now(), lifted_by=by, lift_reason=reason.strip())
        do_refresh_rows_of(ban.user, ban.benchmark)
    ban.refresh_from_db()
    return ban
