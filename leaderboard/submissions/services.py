"""Submissions from upload to result: every write to them goes through here.

One submission's way: ``check_create_submission`` (quota, store, validate;
or ``uploads.check_start_upload`` … ``check_complete_upload`` for files in parts) →
``do_enqueue`` (send ``SCORE_SUBMISSION`` after commit) → the worker reports
through ``tasks.py`` to ``record_progress`` / ``record_result`` /
``record_failure`` → ``check_publish`` puts it on the leaderboard
(``rankings.services.refresh_entry``) once its method is described.
"""

from __future__ import annotations

import logging
from typing import IO, Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.http import Http404
from django.utils import timezone
from django.utils.text import get_valid_filename

from evaluation_workers import contracts
from evaluation_workers.errors import SubmissionError
from leaderboard.accounts.models import Team
from leaderboard.accounts.services import personal_team
from leaderboard.benchmarks.models import Split
from leaderboard.celery import app as celery_app
from leaderboard.lib import storage
from leaderboard.rankings.services import refresh_entry
from leaderboard.submissions import notifications, quotas
from leaderboard.submissions.models import Method, Result, Submission

log = logging.getLogger(__name__)
Status = Submission.Status
Kind = Submission.FailureKind
Quota = Submission.Quota

# Method fields that must be filled before one of its results is published.
# Paper and code URLs stay optional: entries under review may have neither yet.
METHOD_REQUIRED = ("description", "authors", "uses_extra_data")

# Which status may follow which. A result may arrive before the first progress
# message is recorded (queued -> finished); a finished or failed submission
# can be queued again (re-scoring).
TRANSITIONS: dict[str, set[str]] = {
    Status.UPLOADING: {Status.SUBMITTED, Status.FAILED, Status.CANCELLED},
    Status.SUBMITTED: {Status.QUEUED, Status.FAILED, Status.CANCELLED},
    Status.QUEUED: {Status.RUNNING, Status.FINISHED, Status.FAILED, Status.CANCELLED},
    Status.RUNNING: {Status.RUNNING, Status.FINISHED, Status.FAILED, Status.CANCELLED},
    Status.FINISHED: {Status.QUEUED},
    Status.FAILED: {Status.QUEUED},
    Status.CANCELLED: {Status.QUEUED},
}


class SubmissionRejected(Exception):
    """The request cannot create a submission at all (unknown track, closed split)."""

    status = 400


class QuotaExceeded(SubmissionRejected, quotas.QuotaExceeded):
    """The team's quota on this split allows no submission now (HTTP 429)."""

    status = 429


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


def do_transition(submission_id: int, to: str, *, attempt: int | None = None,
                  **fields: Any) -> Submission | None:
    """Move a submission to ``to`` under a row lock; None if not allowed or stale.

    ``attempt`` (from worker reports) must match the submission's current
    attempt, so that a late report of an earlier run changes nothing.
    """
    with transaction.atomic():
        submission = Submission.objects.select_for_update().get(pk=submission_id)
        if attempt is not None and attempt != submission.attempt:
            log.info("Dropping report for submission %s: attempt %s, current %s",
                     submission_id, attempt, submission.attempt)
            return None
        if to not in TRANSITIONS[submission.status]:
            log.info("Ignoring transition of submission %s from %s to %s",
                     submission_id, submission.status, to)
            return None
        now = timezone.now()
        submission.status = to
        if to == Status.QUEUED:
            submission.attempt += 1
            submission.queued_at, submission.started_at, submission.finished_at = now, None, None
            submission.progress, submission.failure_kind, submission.status_detail = 0.0, "", ""
        elif to == Status.RUNNING and submission.started_at is None:
            submission.started_at = now
        elif to in {Status.FINISHED, Status.FAILED, Status.CANCELLED}:
            submission.finished_at = now
        for name, value in fields.items():
            setattr(submission, name, value)
        submission.save()
        return submission


def quota_after_failure(submission: Submission, kind: str) -> str:
    """Format rejections count against the rejection cap; the platform's failures are refunded.

    A submission that already has a result keeps counting: its scores were seen.
    """
    if submission.quota != Quota.COUNTED or submission.results.exists():
        return submission.quota
    return Quota.REJECTED if kind == Kind.INVALID_INPUT else Quota.REFUNDED


def _fail(submission: Submission, kind: str, message: str) -> Submission:
    return do_transition(submission.pk, Status.FAILED, failure_kind=kind, status_detail=message,
                         quota=quota_after_failure(submission, kind)) or submission


def upload_limit(split: Split) -> int:
    """The largest file accepted on ``split``: the track's limit, or less by ``UPLOAD_MAX_BYTES``."""
    spec = split.benchmark.spec
    return min(spec.max_upload_bytes, settings.UPLOAD_MAX_BYTES.get(spec.name, spec.max_upload_bytes))


def resolve_request(*, user: AbstractBaseUser, track: str, split: str, method_name: str,
                    team: Team | str | None = None) -> tuple[Split, Team, str]:
    """The split, team and cleaned method name of a submission request, or why not."""
    split_obj = (Split.objects.select_related("benchmark")
                 .filter(benchmark__track=track, benchmark__is_active=True, name=split).first())
    if split_obj is None:
        raise SubmissionRejected(f"Unknown track/split {track}/{split}.")
    if not split_obj.accepting_submissions:
        raise SubmissionRejected(f"{track}/{split} is not accepting submissions.")
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


def do_create_counted(*, user: AbstractBaseUser, team: Team, split: Split, method_name: str,
                      file_name: str) -> Submission:
    """Check the quota and create an ``uploading`` submission, in one transaction.

    The team's row lock makes concurrent requests take turns between the count
    and the insert; the submission counts from here on.
    """
    with transaction.atomic():
        quotas.lock_team(team)
        try:
            quotas.check_quota(team, split)
        except quotas.QuotaExceeded as exc:
            raise QuotaExceeded(str(exc)) from None
        method, _ = Method.objects.get_or_create(team=team, name=method_name)
        return Submission.objects.create(team=team, method=method, split=split, created_by=user,
                                         file_name=file_name, status=Status.UPLOADING)


def validate_stored(submission: Submission) -> Submission | None:
    """Check a stored file against the split's public manifest when it is small enough.

    Returns the failed submission if the file is refused, None if it passed or
    is left to the worker.
    """
    labels = submission.split.active_labels
    if labels is None or submission.file_size > settings.VALIDATE_AT_UPLOAD_MAX_BYTES:
        return None
    try:
        with storage.local_copy(submission.file_key) as path:
            submission.split.benchmark.spec.validate(path, labels.manifest)
    except SubmissionError as exc:
        return _fail(submission, Kind.INVALID_INPUT, exc.message)
    return None


def clean_file_name(file_name: str) -> str:
    return get_valid_filename(file_name or "predictions")[-200:]


def storage_key(submission: Submission) -> str:
    return f"{submission.team.slug}/{submission.pk}/{submission.file_name}"


def size_message(submission: Submission, limit: int) -> str:
    return (f"{submission.file_name}: expected at most {limit / 2**20:,.0f} MiB for "
            f"{submission.split.benchmark.spec.title}.")


def check_create_submission(*, user: AbstractBaseUser, track: str, split: str, method_name: str,
                            file: IO[bytes], file_name: str, team: Team | str | None = None) -> Submission:
    """Store an upload sent in one request and queue it for scoring.

    Files the track refuses (wrong type, empty, too large, wrong format) become
    a ``failed`` submission with a message naming the problem, so the submitter
    sees it where they look for results. Raises ``SubmissionRejected`` only when
    no submission can be made at all (``QuotaExceeded`` when the quota is spent).
    """
    split_obj, team, method_name = resolve_request(user=user, track=track, split=split,
                                                   method_name=method_name, team=team)
    spec = split_obj.benchmark.spec
    name = clean_file_name(file_name)
    submission = do_create_counted(user=user, team=team, split=split_obj, method_name=method_name,
                                   file_name=name)

    if not name.lower().endswith(spec.upload_suffixes):
        return _fail(submission, Kind.INVALID_INPUT,
                     f"{name}: expected a file ending in {' or '.join(spec.upload_suffixes)}.")
    key, limit = storage_key(submission), upload_limit(split_obj)
    try:
        size, sha = storage.store(storage.read_chunks(file), key, limit)
    except storage.TooLarge:
        return _fail(submission, Kind.INVALID_INPUT, size_message(submission, limit))
    submission.file_key, submission.file_size, submission.predictions_sha256 = key, size, sha
    submission.save(update_fields=["file_key", "file_size", "predictions_sha256"])
    return do_submit(submission)


def do_submit(submission: Submission) -> Submission:
    """A stored file: refuse it if empty or invalid, otherwise queue it."""
    if submission.file_size == 0:
        return _fail(submission, Kind.INVALID_INPUT, f"{submission.file_name}: the file is empty (0 bytes).")
    failed = validate_stored(submission)
    if failed is not None:
        return failed
    do_transition(submission.pk, Status.SUBMITTED)
    return do_enqueue(submission.pk) or submission


def queue_for(track: str) -> str:
    return settings.EVAL_QUEUE_GPU if track in settings.EVAL_GPU_TRACKS else settings.EVAL_QUEUE_CPU


def do_enqueue(submission_id: int) -> Submission | None:
    """Queue a submission for scoring with its split's active labels.

    The task is sent only after the surrounding transaction commits, so a
    worker never sees a submission the database does not have yet.
    """
    submission = Submission.objects.select_related("split__benchmark").get(pk=submission_id)
    labels = submission.split.active_labels
    if labels is None:
        return _fail(submission, Kind.PLATFORM_ERROR,
                     "No labels are loaded for this split yet; a maintainer will re-score it.")
    queued = do_transition(submission_id, Status.QUEUED, labels=labels)
    if queued is None:
        return None
    track = submission.split.benchmark.track
    request = contracts.ScoreRequest(
        schema=contracts.SCHEMA_VERSION, submission_id=queued.pk, attempt=queued.attempt, track=track,
        predictions_key=queued.file_key, labels_key=labels.storage_key, reply_queue=settings.SITE_QUEUE)
    transaction.on_commit(lambda: celery_app.send_task(
        contracts.SCORE_SUBMISSION, kwargs=dict(request), queue=queue_for(track)))
    return queued


def record_progress(*, submission_id: int, attempt: int, fraction: float, message: str = "") -> None:
    do_transition(submission_id, Status.RUNNING, attempt=attempt,
                  progress=max(0.0, min(1.0, float(fraction))), status_detail=message[:500])


def record_result(*, submission_id: int, attempt: int, result: dict[str, Any], seconds: float | None = None,
                  device: str = "") -> Result | None:
    """Store a worker's result (overwriting the same scorer version's) and finish."""
    with transaction.atomic():
        submission = do_transition(submission_id, Status.FINISHED, attempt=attempt, progress=1.0,
                                   status_detail="")
        if submission is None:
            return None
        if not submission.predictions_sha256:
            # Files joined by the object store were never read by the site.
            Submission.objects.filter(pk=submission.pk).update(
                predictions_sha256=result["predictions_sha256"])
        stored, _ = Result.objects.update_or_create(
            submission=submission, scorer_version=result["scorer_version"],
            defaults={"labels_sha256": result["labels_sha256"],
                      "predictions_sha256": result["predictions_sha256"],
                      "metrics": result["metrics"], "breakdown": result["breakdown"],
                      "details": result.get("details", {}), "warnings": result.get("warnings", []),
                      "seconds": seconds, "device": device})
        if submission.is_published:
            refresh_entry(submission.method, submission.split)
        transaction.on_commit(lambda: notifications.send_outcome(submission.pk))
    return stored


def record_failure(*, submission_id: int, attempt: int, kind: str, message: str) -> None:
    """A worker's failure report: refunds the platform's failures, counts format rejections apart."""
    if kind not in Kind.values:
        kind = Kind.PLATFORM_ERROR
    with transaction.atomic():
        current = Submission.objects.select_for_update().get(pk=submission_id)
        failed = do_transition(submission_id, Status.FAILED, attempt=attempt, failure_kind=kind,
                               status_detail=message[:5000], quota=quota_after_failure(current, kind))
        if failed is not None:
            transaction.on_commit(lambda: notifications.send_outcome(submission_id))


def check_cancel(user: AbstractBaseUser, submission: Submission) -> Submission | None:
    """Cancel a submission that is not done; it is refunded (no score was seen)."""
    # Team members only, staff included: maintainers cancel others' through the audited desk.
    if not submission.team.members.filter(pk=user.pk).exists():
        raise PermissionDenied(f"Only a member of the team {submission.team.name} can cancel #{submission.pk}.")
    with transaction.atomic():
        current = Submission.objects.select_for_update().get(pk=submission.pk)
        quota = Quota.REFUNDED if current.quota == Quota.COUNTED and not current.results.exists() \
            else current.quota
        cancelled = do_transition(submission.pk, Status.CANCELLED, status_detail="Cancelled by the submitter.",
                                  quota=quota)
        if cancelled is not None and hasattr(cancelled, "upload") and cancelled.upload.is_open:
            from leaderboard.submissions.uploads import do_abort_upload

            do_abort_upload(cancelled.upload)
        return cancelled


def check_publish(user: AbstractBaseUser, submission: Submission, publish: bool = True) -> None:
    """Make ``submission`` its method's public entry on its split (or withdraw it)."""
    # Team members only, staff included: what goes public is the team's decision.
    if not submission.team.members.filter(pk=user.pk).exists():
        raise PermissionDenied(f"Only a member of the team {submission.team.name} can publish or withdraw "
                               f"#{submission.pk}.")
    with transaction.atomic():
        submission = Submission.objects.select_for_update().select_related("method").get(pk=submission.pk)
        if publish and (submission.status != Status.FINISHED or not submission.results.exists()):
            raise SubmissionRejected("Only a finished submission with scores can be published.")
        missing = submission.method.missing_metadata if settings.PUBLISH_NEEDS_METHOD_DETAILS else []
        if publish and missing:
            raise SubmissionRejected(
                f"Describe the method {submission.method.name!r} before publishing: missing "
                f"{', '.join(str(m) for m in missing)} (on its page, or with `lb method set`).")
        Submission.objects.filter(method=submission.method, split=submission.split,
                                  is_published=True).update(is_published=False)
        Submission.objects.filter(pk=submission.pk).update(is_published=publish)
        refresh_entry(submission.method, submission.split)
