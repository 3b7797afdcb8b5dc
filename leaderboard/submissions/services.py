"""Creating submissions from one-request uploads, publishing them, and who may see them.

One submission's way: ``check_create_submission`` (quota, store, validate;
or ``uploads.check_start_upload`` … ``check_complete_upload`` for files in parts) →
``lifecycle.do_enqueue`` (send ``SCORE_SUBMISSION`` after commit) → the worker
reports through ``tasks.py`` to ``lifecycle.record_*`` → ``check_publish`` puts
it on the leaderboard (``rankings.services.refresh_entry``) once its method is
described, unless the team's selection on the split is locked (from the freeze
on: ``selection_refusal``). Status changes, sends and refunds all live in ``lifecycle``.
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import IO

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.db.models import Min
from django.http import Http404
from django.utils import timezone
from django.utils.text import get_valid_filename

from evaluation_workers import isolated
from evaluation_workers.errors import SubmissionError
from leaderboard.accounts.models import Team
from leaderboard.accounts.services import personal_team
from leaderboard.benchmarks import phases
from leaderboard.benchmarks.models import Split
from leaderboard.benchmarks.selectors import splits_of_track, upload_limit
from leaderboard.lib import storage
from leaderboard.lib.pagecache import bump
from leaderboard.moderation.models import AuditEntry
from leaderboard.participation.gate import Refusal
from leaderboard.participation.gate import refusal as participation_refusal
from leaderboard.rankings.models import ANONYMOUS_LABEL
from leaderboard.rankings.services import refresh_entry
from leaderboard.submissions import lifecycle, quotas
from leaderboard.submissions.lifecycle import PLATFORM_REFUND_NOTE, Kind, Status, do_fail
from leaderboard.submissions.methods import missing_fields
from leaderboard.submissions.models import Method, RefusedUpload, Submission
from leaderboard.submissions.phase_rules import publish_limit_refusal

log = logging.getLogger(__name__)


class SubmissionRejected(Exception):
    """The request cannot create a submission at all (unknown track, closed split)."""

    status = 400
    code: str | None = None  # the API's error code; None: the status's


class StorageUnavailable(storage.StorageError):
    """The file store failed while the upload was written: answered 503 like any failed service
    (``ops.unavailable``: counted, "the disk is full" when it is, from the error it was raised from),
    with ``detail``, what became of the upload."""

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


class QuotaExceeded(SubmissionRejected, quotas.QuotaExceeded):
    """The team's or the user's quota on this split allows no submission now (HTTP 429)."""

    status = 429


class FileRefused(SubmissionRejected):
    """The file is refused by its name or size before anything is stored: no submission, no method (HTTP 400).

    Sent in one request it counts against the team's rejection cap (``RefusedUpload``).
    """

    code = "invalid_file"


class PhaseClosed(SubmissionRejected):
    """The split's challenge phase accepts no submission now (before the start, frozen, closed; HTTP 403)."""

    status = 403
    code = "phase_closed"


class LabelsNotLoaded(SubmissionRejected):
    """The split is not open yet: its labels are not loaded, so nothing could score a file (HTTP 409)."""

    status = 409
    code = "labels_not_loaded"


class ParticipationRefused(SubmissionRejected):
    """The user may not take part in the benchmark now (``participation.gate``: banned, an address it does not
    accept, terms not accepted, approval pending or denied; HTTP 403). ``fields`` go into the API's error."""

    status = 403

    def __init__(self, refusal: Refusal) -> None:
        super().__init__(refusal.message)
        self.code = refusal.code
        self.fields = refusal.fields


class SelectionLocked(SubmissionRejected):
    """Publishing or withdrawing would change a team's final selection on a split (from the freeze on; HTTP 409)."""

    status = 409
    code = "selection_locked"


class PublishLimit(SubmissionRejected):
    """The team already has as many published rows on the split as its challenge phase allows (HTTP 409)."""

    status = 409
    code = "too_many_published"


def user_can_see(user: AbstractBaseUser, submission: Submission) -> bool:
    return bool(user.is_authenticated and (
        user.is_staff or submission.team.members.filter(pk=user.pk).exists()))


def access_submission(user: AbstractBaseUser, pk: int) -> Submission:
    """The submission if ``user`` may see it; 404 otherwise (its existence stays private)."""
    submission = (Submission.objects.select_related("team", "method", "split__benchmark")
                  .filter(pk=pk).first())
    if submission is None or not user_can_see(user, submission):
        raise Http404("No such submission.")
    return submission


def resolve_request(*, user: AbstractBaseUser, track: str, split: str, method_name: str,
                    team: Team | str | None = None) -> tuple[Split, Team, str]:
    """The split, team and cleaned method name of a submission request, or why not (the split's state first,
    then whether the user may take part in the benchmark: ``participation.gate``)."""
    splits = {s.name: s for s in splits_of_track(track)}
    split_obj = splits.get(split)
    open_now = [name for name, s in splits.items() if phases.submission_refusal(s) is None]
    elsewhere = (f" {track} takes submissions on: {', '.join(sorted(open_now))}." if open_now else
                 f" No split of {track} takes submissions now." if splits else
                 f" No active benchmark of track {track!r} takes submissions.")
    if split_obj is None:
        raise SubmissionRejected(f"Unknown track/split {track}/{split}." + elsewhere)
    if (paused := phases.pause_refusal(split_obj)) is not None:
        raise SubmissionRejected(paused)
    if (pending := phases.labels_refusal(split_obj)) is not None:
        raise LabelsNotLoaded(pending + elsewhere)
    if (closed := phases.refusal(split_obj)) is not None:
        raise PhaseClosed(closed)
    if (refused := participation_refusal(user, split_obj.benchmark)) is not None:
        raise ParticipationRefused(refused)
    method_name = (method_name or "").strip()
    if not method_name or len(method_name) > 100:
        raise SubmissionRejected("Expected a method name of 1 to 100 characters.")
    if isinstance(team, str):
        slug = team
        team = Team.objects.filter(slug=slug, membership__user=user).first()
        if team is None:
            raise SubmissionRejected(f"You are not a member of a team {slug!r}.")
    team = team or personal_team(user)
    if not team.members.filter(pk=user.pk).exists():
        raise PermissionDenied("You are not a member of this team.")
    return split_obj, team, method_name


def _check_quota(team: Team, split: Split, user: AbstractBaseUser) -> None:
    """Lock the user's and the team's rows (until the transaction ends) and check their quotas."""
    quotas.lock(team, user)
    try:
        quotas.check_quota(team, split, user)
    except quotas.QuotaExceeded as exc:
        raise QuotaExceeded(str(exc), exc.retry_at) from None


def do_create_counted(*, user: AbstractBaseUser, team: Team, split: Split, method_name: str,
                      file_name: str) -> Submission:
    """Check the quota and create an ``uploading`` submission, in one transaction.

    The user's and the team's row locks make concurrent requests take turns
    between the count and the insert; the submission counts from here on.
    """
    with transaction.atomic():
        _check_quota(team, split, user)
        method, _ = Method.objects.get_or_create(team=team, name=method_name)
        return Submission.objects.create(team=team, method=method, split=split, created_by=user,
                                         file_name=file_name, status=Status.UPLOADING)


def validate_stored(submission: Submission) -> Submission | None:
    """Check a stored file against the split's public manifest when it is small enough.

    Returns the failed submission if the file is refused, None if it passed or
    is left to the worker. Only the file is ever blamed for the file: when the
    store cannot be read, or the validator itself breaks, the check is left to
    the worker (which reports such faults as the platform's).
    """
    labels = submission.split.active_labels
    if labels is None or submission.file_size > settings.VALIDATE_AT_UPLOAD_MAX_BYTES:
        return None
    try:
        with storage.local_copy(submission.file_key) as path:
            # In a child process: whatever the file, this process does not grow (issue 26).
            isolated.validate(submission.split.benchmark.spec.name, path, labels.manifest,
                              max_memory=settings.VALIDATE_AT_UPLOAD_MAX_MEMORY,
                              timeout=settings.VALIDATE_AT_UPLOAD_TIMEOUT)
    except SubmissionError as exc:
        return do_fail(submission, Kind.INVALID_INPUT, exc.message) or submission
    except isolated.OutOfBounds as exc:
        log.warning("Submission %s not validated at upload (%s); leaving it to the worker", submission.pk, exc)
    except Exception:  # noqa: BLE001 - a storage fault or a validator bug is not the submitter's
        log.exception("Validating submission %s at upload failed; leaving it to the worker", submission.pk)
    return None


def clean_file_name(file_name: str) -> str:
    return get_valid_filename(file_name or "predictions")[-200:]


def storage_key(submission: Submission) -> str:
    return f"{submission.team.slug}/{submission.pk}/{submission.file_name}"


def size_message(submission: Submission, limit: int) -> str:
    """The refusal of a file found too large while it was stored (its size unknown before)."""
    return submission.split.benchmark.spec.size_refusal(submission.file_name, None, limit) or ""


def check_refuse_upload(*, user: AbstractBaseUser, team: Team, split: Split, method_name: str, file_name: str,
                        size: int) -> None:
    """Refuse a file sent in one request by its name or size, if the track's rules refuse it.

    Nothing is stored and no submission or method is made; the refusal counts against the team's
    daily cap of rejected files (``RefusedUpload``), after the quota check that a submission would
    have passed. Raises ``FileRefused`` (or ``QuotaExceeded``); returns when the file may be stored.
    ``size`` 0: not known before reading (the store refuses a file past the limit then).
    """
    spec = split.benchmark.spec
    reason = spec.name_refusal(file_name) or (spec.size_refusal(file_name, size, upload_limit(split))
                                              if size else None)
    if reason is None:
        return
    with transaction.atomic():
        _check_quota(team, split, user)
        RefusedUpload.objects.create(team=team, split=split, created_by=user, method_name=method_name,
                                     file_name=file_name, file_size=size, reason=reason[:5000])
    raise FileRefused(reason)


def sent_size(file: IO[bytes]) -> int:
    """The size of an upload without reading it: Django's UploadedFile knows it; a plain file is sought."""
    size = getattr(file, "size", None)
    if isinstance(size, int):
        return size
    try:
        here = file.tell()
        end = file.seek(0, 2)
        file.seek(here)
        return int(end - here)
    except (OSError, AttributeError, ValueError):
        return 0


def check_create_submission(*, user: AbstractBaseUser, track: str, split: str, method_name: str,
                            file: IO[bytes], file_name: str, team: Team | str | None = None) -> Submission:
    """Store an upload sent in one request and queue it for scoring.

    Files the track refuses by their name or size are refused before anything
    is stored (``check_refuse_upload``: ``FileRefused``, no submission, no
    method). Files refused by their content (empty, wrong format) become a
    ``failed`` submission with a message naming the problem, so the submitter
    sees it where they look for results. Raises ``SubmissionRejected`` when no
    submission is made (``QuotaExceeded`` when the quota is spent).
    """
    split_obj, team, method_name = resolve_request(user=user, track=track, split=split,
                                                   method_name=method_name, team=team)
    name = clean_file_name(file_name)
    check_refuse_upload(user=user, team=team, split=split_obj, method_name=method_name, file_name=name,
                        size=sent_size(file))
    submission = do_create_counted(user=user, team=team, split=split_obj, method_name=method_name,
                                   file_name=name)
    key, limit = storage_key(submission), upload_limit(split_obj)
    try:
        size, sha = storage.store(storage.read_chunks(file), key, limit)
    except storage.TooLarge:
        return do_fail(submission, Kind.INVALID_INPUT, size_message(submission, limit)) or submission
    except storage.StorageError as exc:
        log.warning("Storing submission %s failed: %s", submission.pk, exc)
        do_fail(submission, Kind.PLATFORM_ERROR, f"The file could not be stored. {PLATFORM_REFUND_NOTE}")
        raise StorageUnavailable("the file was not stored, and nothing was counted against your quota.") from exc
    submission.file_key, submission.file_size, submission.predictions_sha256 = key, size, sha
    submission.save(update_fields=["file_key", "file_size", "predictions_sha256"])
    return do_submit(submission)


def do_submit(submission: Submission) -> Submission:
    """A stored file: refuse it if empty or invalid, otherwise queue it."""
    if submission.file_size == 0:
        return do_fail(submission, Kind.INVALID_INPUT,
                       f"{submission.file_name}: the file is empty (0 bytes).") or submission
    failed = validate_stored(submission)
    if failed is not None:
        return failed
    lifecycle.do_transition(submission.pk, Status.SUBMITTED)
    return lifecycle.do_enqueue(submission.pk) or submission


def check_cancel(user: AbstractBaseUser, submission: Submission) -> Submission | None:
    """Cancel a submission that is not done; it is refunded (no score was seen)."""
    # Team members only, staff included: maintainers cancel others' through the audited desk.
    if not submission.team.members.filter(pk=user.pk).exists():
        raise PermissionDenied(f"Only a member of the team {submission.team.name} can cancel #{submission.pk}.")
    return lifecycle.do_cancel(submission.pk, "Cancelled by the submitter.")


def check_publish(user: AbstractBaseUser, submission: Submission, publish: bool = True,
                  anonymous: bool = False) -> None:
    """Make ``submission`` its method's public entry on its split (or withdraw it).

    From the freeze on the team's selection is final (``selection_refusal``: the
    one message the page, the API and ``lb publish`` show). ``anonymous``: publish
    it as "Anonymous (under review)": the method's rows and pages name no team,
    authors, paper or code until a member reveals it (``check_reveal``). Anonymity
    belongs to the method (its page spans its splits), so a method that is public
    under its team, or was revealed, cannot become anonymous. Publishing without
    it keeps an anonymous method anonymous.
    """
    # Team members only, staff included: what goes public is the team's decision (maintainers
    # change a locked selection through the audited desk, ``moderation.services``).
    if not submission.team.members.filter(pk=user.pk).exists():
        raise PermissionDenied(f"Only a member of the team {submission.team.name} can publish or withdraw "
                               f"#{submission.pk}.")
    with transaction.atomic():
        submission = (Submission.objects.select_for_update()
                      .select_related("method", "team", "split__benchmark").get(pk=submission.pk))
        if publish:
            check_publishable(submission)
        method = Method.objects.select_for_update().get(pk=submission.method_id)
        if (locked := selection_refusal(submission, publish)) is not None:
            raise SelectionLocked(locked)
        if publish and (too_many := publish_limit_refusal(submission)) is not None:
            raise PublishLimit(too_many)
        if publish and anonymous and not method.is_anonymous:
            _check_can_go_anonymous(method)
            Method.objects.filter(pk=method.pk).update(is_anonymous=True)
            _audit_anonymity(user, method, AuditEntry.Action.ANONYMIZE, [submission.split],
                             f"published #{submission.pk} as {ANONYMOUS_LABEL}")
        do_publish(submission, publish)


def check_publishable(submission: Submission) -> None:
    """Refuse to publish a submission without scores, or of a method not described yet."""
    if submission.status != Status.FINISHED or not submission.results.exists():
        raise SubmissionRejected("Only a finished submission with scores can be published.")
    missing = [str(m) for m in submission.method.missing_metadata] if settings.PUBLISH_NEEDS_METHOD_DETAILS else []
    # The benchmark's required method fields are asked whatever the setting: its board filters on them.
    benchmark = submission.split.benchmark
    missing += [f"{label} ({benchmark.title})" for label in missing_fields(submission.method, benchmark)]
    if missing:
        raise SubmissionRejected(
            f"Describe the method {submission.method.name!r} before publishing: missing "
            f"{', '.join(str(m) for m in missing)} (on its page, or with `lb method set`).")


def published_ids(submission: Submission) -> list[int]:
    """The published submission of ``submission``'s method on its split, as a list of ids (none or one)."""
    return list(Submission.objects.filter(method_id=submission.method_id, split_id=submission.split_id,
                                          is_published=True).values_list("pk", flat=True))


def do_publish(submission: Submission, publish: bool) -> None:
    """Make ``submission`` its method's row on its split, or withdraw the method's row; no checks."""
    Submission.objects.filter(method_id=submission.method_id, split_id=submission.split_id,
                              is_published=True).update(is_published=False)
    Submission.objects.filter(pk=submission.pk).update(is_published=publish)
    refresh_entry(submission.method, submission.split)


def _finished_scoring_at(submission: Submission) -> datetime | None:
    """When its first result arrived: a re-score since moves ``finished_at``, not this."""
    first: datetime | None = submission.results.aggregate(first=Min("created_at"))["first"]
    return first


def is_late_finisher(submission: Submission, since: datetime) -> bool:
    """Sent before the lock at ``since`` and first scored after it (``phases``: may be published until the reveal)."""
    finished = _finished_scoring_at(submission)
    return submission.created_at < since and finished is not None and finished >= since


def selection_refusal(submission: Submission, publish: bool, now: datetime | None = None) -> str | None:
    """Why publishing (or withdrawing) ``submission`` may not change its team's selection now; None if it may.

    The rule is in ``benchmarks.phases`` ("The final selection is locked"): from the lock on, a
    change of which submission is its method's row is refused, unless it publishes a submission
    sent before the lock that finished scoring after it, before the reveal. Publishing what is
    published (or withdrawing where nothing is) changes nothing and passes. The text says what
    is locked, since when, and what is still allowed.
    """
    split, now = submission.split, now or timezone.now()
    since = phases.selection_locked_since(split, now)
    if since is None or published_ids(submission) == ([submission.pk] if publish else []):
        return None
    late_open = phases.late_publishing_open(split, now)
    if publish and late_open and is_late_finisher(submission, since):
        return None
    cause = phases.lock_cause(split, since)
    text = (f"The selection on {split} is final since {cause}, {phases.in_utc(since)}: publishing or withdrawing "
            f"cannot change which submissions represent {submission.team.name} any more, so #{submission.pk} "
            f"({submission.method.name}) cannot be {'published' if publish else 'withdrawn'}.")
    if late_open:
        text += (f" Until the reveal, only a submission sent before {cause} that finished scoring after it may "
                 "still be published")
        finished = _finished_scoring_at(submission)
        if not publish:
            text += "; nothing can be withdrawn."
        elif submission.created_at >= since:
            text += f"; #{submission.pk} was sent at {phases.in_utc(submission.created_at)}, after {cause}."
        else:
            when = f" at {phases.in_utc(finished)}" if finished else ""
            text += f"; #{submission.pk} finished scoring{when}, before {cause}."
    else:
        text += " Once the board is revealed nothing more can be published or withdrawn."
    return text + " Only a maintainer can change it now, on the team's behalf (audited)."


def selection_notice(submission: Submission) -> dict[str, str]:
    """What the submission page's publish area says of the lock: ``refused``, why its button would be
    refused, or ``late``, why it may still be published; empty while the selection may change."""
    since = phases.selection_locked_since(submission.split)
    if since is None:
        return {}
    publish = not submission.is_published
    if (refused := selection_refusal(submission, publish)) is not None:
        return {"refused": refused}
    if publish and is_late_finisher(submission, since):
        cause = phases.lock_cause(submission.split, since)
        return {"late": f"The selection on {submission.split} is final since {cause}, {phases.in_utc(since)}, but "
                        f"#{submission.pk} was sent before {cause} and finished scoring after it: it may still be "
                        f"published until the reveal, as the row of {submission.method.name}."}
    return {}


def _check_can_go_anonymous(method: Method) -> None:
    if method.revealed_at is not None:
        raise SubmissionRejected(f"{method.name!r} was revealed on {method.revealed_at:%Y-%m-%d}; a revealed "
                                 "method cannot become anonymous again (publish under a new method name).")
    public = list(method.entries.select_related("split__benchmark"))
    if public:
        raise SubmissionRejected(
            f"{method.name!r} is public under its team on {', '.join(str(e.split) for e in public)}; it cannot "
            "become anonymous (withdraw those rows first, or publish under a new method name).")


def _audit_anonymity(user: AbstractBaseUser, method: Method, action: str, splits: list[Split], note: str) -> None:
    """One audit entry per split the method is public on (the desk reads the log per track)."""
    for split in splits:
        AuditEntry.objects.create(actor=user, actor_name=user.get_username(), action=action,
                                  track=split.benchmark.track, split=split.name,
                                  target=f"method #{method.pk} ({method.name}) of team {method.team.name}",
                                  reason=note, details={"method_id": method.pk, "team": method.team.slug})


def check_reveal(user: AbstractBaseUser, method: Method) -> Method:
    """Show the team, authors, paper and code of an anonymous method on every page, now (audited).

    A member of its team only (staff included: it is the team's decision). Its rows
    are rewritten and the cached pages of its tracks move on commit.
    """
    if not method.team.members.filter(pk=user.pk).exists():
        raise PermissionDenied(f"Only a member of the team {method.team.name} can reveal {method.name!r}.")
    with transaction.atomic():
        method = Method.objects.select_for_update().select_related("team").get(pk=method.pk)
        if not method.is_anonymous:
            raise SubmissionRejected(f"{method.name!r} is not anonymous; there is nothing to reveal.")
        Method.objects.filter(pk=method.pk).update(is_anonymous=False, revealed_at=timezone.now())
        splits = list(Split.objects.filter(submissions__method=method).select_related("benchmark").distinct())
        public = [s for s in splits if s.entries.filter(method=method).exists()]
        _audit_anonymity(user, method, AuditEntry.Action.REVEAL, public or splits,
                         f"revealed team {method.team.name}")
        for split in splits:
            refresh_entry(method, split)
        bump()  # its method page and API answer, even with no row left
        method.refresh_from_db()
    return method
