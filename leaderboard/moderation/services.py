"""Maintainer actions. Each checks permission, acts through the owning app's
services, and appends to the audit log in the same transaction."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.conf import settings
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.utils import timezone

from leaderboard.benchmarks import phases
from leaderboard.benchmarks.challenge_plans import archived_refusal
from leaderboard.benchmarks.models import Benchmark, Split
from leaderboard.benchmarks.permissions import is_maintainer
from leaderboard.lib.pagecache import bump
from leaderboard.moderation.finals import Finals, finals_of
from leaderboard.moderation.models import AuditEntry
from leaderboard.rankings.services import do_refresh_split, do_reveal, refresh_entry
from leaderboard.submissions import lifecycle
from leaderboard.submissions import services as submission_services
from leaderboard.submissions.models import Submission

Action = AuditEntry.Action
# Flag name, reason field, and the action for on / off.
TOGGLES = {
    "verify": ("is_verified", None, Action.VERIFY, Action.UNVERIFY),
    "hide": ("is_hidden", "hidden_reason", Action.HIDE, Action.UNHIDE),
    "flag": ("is_flagged", "flag_reason", Action.FLAG, Action.UNFLAG),
    "disqualify": ("is_disqualified", "disqualified_reason", Action.DISQUALIFY, Action.REQUALIFY),
}
# Actions whose reason is shown publicly or to the submitter must give one.
NEEDS_REASON = {Action.HIDE, Action.DISQUALIFY, Action.FLAG, Action.RESCORE_ALL, Action.PAUSE,
                Action.SET_LABELS_PUBLIC, Action.PUBLISH_FOR_TEAM, Action.WITHDRAW_FOR_TEAM}


class ModerationError(Exception):
    """An action that cannot be done as asked; the text is shown to the maintainer."""


def check_maintainer(user: Any, benchmark: Benchmark) -> None:
    if not is_maintainer(user, benchmark):
        raise PermissionDenied("You do not maintain this track.")


def _audit(user: Any, action: str, *, split: Split, target: str, reason: str,
           submission: Submission | None = None, **details: Any) -> AuditEntry:
    if action in NEEDS_REASON and not reason.strip():
        raise ModerationError(f"A reason is required to {action.replace('_', ' ')}.")
    return AuditEntry.objects.create(actor=user, actor_name=user.get_username(), action=action,
                                     track=split.benchmark.track, split=split.name,
                                     submission_id=submission.pk if submission else None, target=target,
                                     reason=reason.strip(), details=details)


def check_toggle(user: Any, submission: Submission, kind: str, on: bool, reason: str = "") -> None:
    """Verify, hide, flag or disqualify a submission (or undo it), and refresh its row."""
    check_maintainer(user, submission.split.benchmark)
    flag, reason_field, on_action, off_action = TOGGLES[kind]
    with transaction.atomic():
        _audit(user, on_action if on else off_action, split=submission.split, submission=submission,
               target=f"submission #{submission.pk} ({submission.method.name})", reason=reason)
        fields = {flag: on}
        if reason_field:
            fields[reason_field] = reason.strip() if on else ""
        Submission.objects.filter(pk=submission.pk).update(**fields)
        refresh_entry(submission.method, submission.split)


def check_publish_for_team(user: Any, submission: Submission, publish: bool, reason: str) -> None:
    """Publish a submission as its method's row (or withdraw it) on its team's behalf, once the team's
    selection is locked (``benchmarks.phases``); with a reason, audited.

    Before the lock, what goes public is the team's own decision; hiding and disqualifying stay the
    desk's tools for rows that must go. ``details.was_published``: the method's row before.
    """
    check_maintainer(user, submission.split.benchmark)
    split = submission.split
    if phases.selection_locked_since(split) is None:
        raise ModerationError(f"The selection on {split} is not locked (it locks at the freeze, or at the reveal "
                              "of a split without dates): until then the team publishes and withdraws its own "
                              "submissions.")
    with transaction.atomic():
        submission = (Submission.objects.select_for_update().select_related("method", "team", "split__benchmark")
                      .get(pk=submission.pk))
        was = submission_services.published_ids(submission)
        if was == ([submission.pk] if publish else []) or (not publish and not submission.is_published):
            raise ModerationError(f"Submission #{submission.pk} is {'already' if publish else 'not'} published.")
        if publish:
            try:
                submission_services.check_publishable(submission)
            except submission_services.SubmissionRejected as exc:
                raise ModerationError(str(exc)) from None
        _audit(user, Action.PUBLISH_FOR_TEAM if publish else Action.WITHDRAW_FOR_TEAM, split=split,
               submission=submission, target=f"submission #{submission.pk} ({submission.method.name}) of team "
                                             f"{submission.team.name}",
               reason=reason, team=submission.team.slug, method=submission.method.name, was_published=was)
        submission_services.do_publish(submission, publish)


def check_rescore(user: Any, submission: Submission, reason: str = "") -> None:
    """Queue a submission again (a new attempt); its earlier results stay, the new one carries the
    scorer version. A queued or running one is re-queued: the way to rescue a stuck submission."""
    check_maintainer(user, submission.split.benchmark)
    if submission.file_deleted_at is not None:
        raise ModerationError(f"Submission #{submission.pk} cannot be re-scored: its predictions file was deleted "
                              f"on {submission.file_deleted_at:%Y-%m-%d %H:%M} UTC by the retention policy.")
    with transaction.atomic():
        _audit(user, Action.RESCORE, split=submission.split, submission=submission,
               target=f"submission #{submission.pk}", reason=reason, was=submission.status)
        if lifecycle.do_enqueue(submission.pk, requeue=True) is None:
            raise ModerationError(f"Submission #{submission.pk} is {submission.status}; it cannot be re-scored now.")


def check_rescore_split(user: Any, split: Split, reason: str) -> int:
    """Re-score every finished or failed submission of a split that still has its file; returns how many
    were queued. They go to the bulk queue, which workers serve only when no new submission waits."""
    check_maintainer(user, split.benchmark)
    with transaction.atomic():
        ids = list(Submission.objects.filter(split=split, status__in=["finished", "failed"],
                                             file_deleted_at__isnull=True)
                   .exclude(file_key="").values_list("pk", flat=True))
        _audit(user, Action.RESCORE_ALL, split=split, target=str(split), reason=reason, count=len(ids))
        return sum(lifecycle.do_enqueue(pk, bulk=True) is not None for pk in ids)


def check_cancel(user: Any, submission: Submission, reason: str = "") -> None:
    check_maintainer(user, submission.split.benchmark)
    with transaction.atomic():
        _audit(user, Action.CANCEL, split=submission.split, submission=submission,
               target=f"submission #{submission.pk}", reason=reason)
        done = lifecycle.do_cancel(submission.pk, f"Cancelled by a maintainer{': ' + reason if reason else ''}.")
        if done is None:
            raise ModerationError(f"Submission #{submission.pk} is {submission.status}; only queued or running "
                                  "submissions can be cancelled.")


def check_pause(user: Any, benchmark: Benchmark, paused: bool, reason: str = "") -> None:
    """Stop (or resume) accepting submissions on every split of a track."""
    check_maintainer(user, benchmark)
    with transaction.atomic():
        for split in benchmark.splits.all():
            _audit(user, Action.PAUSE if paused else Action.RESUME, split=split, target=str(split), reason=reason)
        benchmark.splits.update(accepting_submissions=not paused)
        bump(benchmark.track)  # update() sends no signal


def check_set_visible_after(user: Any, split: Split, when: datetime | None, reason: str = "") -> None:
    check_maintainer(user, split.benchmark)
    with transaction.atomic():
        _audit(user, Action.SET_VISIBLE_AFTER, split=split, target=str(split), reason=reason,
               when=when.isoformat() if when else None)
        Split.objects.filter(pk=split.pk).update(results_visible_after=when)
        bump(split.benchmark.track)  # embargoed pages show only paper rows


def check_set_phases(user: Any, split: Split, *, starts_at: datetime | None, freeze_at: datetime | None,
                     deadline: datetime | None, reveal_at_deadline: bool, reason: str = "") -> None:
    """Set a split's challenge schedule and rebuild its board for it.

    A deadline moved into the future un-reveals the split (the challenge goes on). Refused once the
    board of the split's challenge is archived: the archive was taken of these phases.
    """
    check_maintainer(user, split.benchmark)
    # The desk's fields hold minutes: a moment given as the minute it already is keeps its exact value.
    minute = lambda m: m.replace(second=0, microsecond=0) if m else None  # noqa: E731
    starts_at, freeze_at, deadline = (old if minute(old) == minute(new) else new for old, new in (
        (split.starts_at, starts_at), (split.freeze_at, freeze_at), (split.deadline, deadline)))
    asked = {"starts_at": starts_at, "freeze_at": freeze_at, "deadline": deadline,
             "reveal_at_deadline": reveal_at_deadline}
    if refusal := archived_refusal(split, {k for k, v in asked.items() if getattr(split, k) != v}):
        raise ModerationError(f"The schedule of {split} was not changed: {refusal}.")
    moments = [(n, m) for n, m in (("start", starts_at), ("freeze", freeze_at), ("deadline", deadline)) if m]
    for (a, first), (b, second) in zip(moments, moments[1:]):
        if second < first:
            raise ModerationError(f"Expected the {a} before the {b}, but got {first:%Y-%m-%d %H:%M} and "
                                  f"{second:%Y-%m-%d %H:%M} UTC.")
    iso = lambda m: m.isoformat() if m else None  # noqa: E731
    with transaction.atomic():
        _audit(user, Action.SET_PHASES, split=split, target=str(split), reason=reason, starts_at=iso(starts_at),
               freeze_at=iso(freeze_at), deadline=iso(deadline), reveal_at_deadline=reveal_at_deadline)
        fields: dict[str, Any] = dict(asked)
        if deadline and deadline > timezone.now():
            fields["revealed_at"] = None
        Split.objects.filter(pk=split.pk).update(**fields)
        do_refresh_split(Split.objects.select_related("benchmark").get(pk=split.pk))


def check_reveal(user: Any, split: Split, reason: str = "") -> None:
    """Reveal the full board now: private scores, and the rows held back since the freeze."""
    check_maintainer(user, split.benchmark)
    with transaction.atomic():
        _audit(user, Action.REVEAL, split=split, target=str(split), reason=reason)
        do_reveal(split)


def check_reopen(user: Any, split: Split, reopened: bool, reason: str = "") -> None:
    """Accept submissions again after the deadline (or stop)."""
    check_maintainer(user, split.benchmark)
    with transaction.atomic():
        _audit(user, Action.REOPEN, split=split, target=str(split), reason=reason, reopened=reopened)
        Split.objects.filter(pk=split.pk).update(reopened=reopened)
        bump(split.benchmark.track)
def check_set_labels_public(user: Any, split: Split, public: bool, reason: str) -> None:
    """Say whether a split's labels are public: then pages show per-class results with their counts."""
    check_maintainer(user, split.benchmark)
    with transaction.atomic():
        _audit(user, Action.SET_LABELS_PUBLIC, split=split, target=str(split), reason=reason, public=public)
        Split.objects.filter(pk=split.pk).update(labels_public=public)
        bump(split.benchmark.track)  # update() sends no signal


def check_export_finals(user: Any, split: Split) -> Finals:
    """The finals' export of ``split`` (``finals.py``), for its maintainers; recorded in the audit log
    with the submissions it holds."""
    check_maintainer(user, split.benchmark)
    finals = finals_of(split)
    _audit(user, Action.EXPORT_FINALS, split=split, target=f"finals of {split} ({len(finals.submissions)} "
                                                            f"selected submissions)", reason="",
           submissions=[s.pk for s in finals.submissions], storage=settings.STORAGE_BACKEND)
    return finals
