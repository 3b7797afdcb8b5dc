"""Submissions from upload to result: every write to them goes through here.

One submission's way: ``check_create_submission`` (store, validate) →
``do_enqueue`` (send ``SCORE_SUBMISSION`` after commit) → the worker reports
through ``tasks.py`` to ``record_progress`` / ``record_result`` /
``record_failure`` → ``check_publish`` puts it on the leaderboard
(``rankings.services.refresh_entry``).
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
from leaderboard.lib import uploads
from leaderboard.rankings.services import refresh_entry
from leaderboard.submissions.models import Method, Result, Submission

log = logging.getLogger(__name__)
Status = Submission.Status
Kind = Submission.FailureKind

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


def _fail(submission: Submission, kind: str, message: str) -> Submission:
    return do_transition(submission.pk, Status.FAILED, failure_kind=kind, status_detail=message) or submission


def check_create_submission(*, user: AbstractBaseUser, track: str, split: str, method_name: str,
                            file: IO[bytes], file_name: str, team: Team | None = None) -> Submission:
    """Store an upload and queue it for scoring.

    Files the track refuses (wrong type, empty, too large, wrong format) become
    a ``failed`` submission with a message naming the problem, so the submitter
    sees it where they look for results. Raises ``SubmissionRejected`` only when
    no submission can be made at all.
    """
    split_obj = (Split.objects.select_related("benchmark")
                 .filter(benchmark__track=track, benchmark__is_active=True, name=split).first())
    if split_obj is None:
        raise SubmissionRejected(f"Unknown track/split {track}/{split}.")
    if not split_obj.accepting_submissions:
        raise SubmissionRejected(f"{track}/{split} is not accepting submissions.")
    method_name = (method_name or "").strip()
    if not method_name or len(method_name) > 100:
        raise SubmissionRejected("Expected a method name of 1 to 100 characters.")
    team = team or personal_team(user)
    if not team.members.filter(pk=user.pk).exists():
        raise PermissionDenied("You are not a member of this team.")
    spec = split_obj.benchmark.spec
    method, _ = Method.objects.get_or_create(team=team, name=method_name)
    name = get_valid_filename(file_name or "predictions")[-200:]
    submission = Submission.objects.create(team=team, method=method, split=split_obj, created_by=user,
                                           file_name=name, status=Status.UPLOADING)

    if not name.lower().endswith(spec.upload_suffixes):
        return _fail(submission, Kind.INVALID_INPUT,
                     f"{name}: expected a file ending in {' or '.join(spec.upload_suffixes)}.")
    key = f"{team.slug}/{submission.pk}/{name}"
    try:
        size, sha = uploads.store(uploads.read_chunks(file), key, spec.max_upload_bytes)
    except ValueError:
        return _fail(submission, Kind.INVALID_INPUT,
                     f"{name}: expected at most {spec.max_upload_bytes / 2**20:.0f} MiB for {spec.title}.")
    submission.file_key, submission.file_size, submission.predictions_sha256 = key, size, sha
    submission.save(update_fields=["file_key", "file_size", "predictions_sha256"])
    if size == 0:
        return _fail(submission, Kind.INVALID_INPUT, f"{name}: the file is empty (0 bytes).")

    labels = split_obj.active_labels
    if labels is not None and size <= settings.VALIDATE_AT_UPLOAD_MAX_BYTES:
        try:
            spec.validate(uploads.path_for(key), labels.manifest)
        except SubmissionError as exc:
            return _fail(submission, Kind.INVALID_INPUT, exc.message)
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
        stored, _ = Result.objects.update_or_create(
            submission=submission, scorer_version=result["scorer_version"],
            defaults={"labels_sha256": result["labels_sha256"],
                      "predictions_sha256": result["predictions_sha256"],
                      "metrics": result["metrics"], "breakdown": result["breakdown"],
                      "details": result.get("details", {}), "warnings": result.get("warnings", []),
                      "seconds": seconds, "device": device})
        if submission.is_published:
            refresh_entry(submission.method, submission.split)
    return stored


def record_failure(*, submission_id: int, attempt: int, kind: str, message: str) -> None:
    if kind not in Kind.values:
        kind = Kind.PLATFORM_ERROR
    do_transition(submission_id, Status.FAILED, attempt=attempt, failure_kind=kind,
                  status_detail=message[:5000])


def check_cancel(user: AbstractBaseUser, submission: Submission) -> Submission | None:
    if not user_can_see(user, submission):
        raise PermissionDenied
    return do_transition(submission.pk, Status.CANCELLED, status_detail="Cancelled by the submitter.")


def check_publish(user: AbstractBaseUser, submission: Submission, publish: bool = True) -> None:
    """Make ``submission`` its method's public entry on its split (or withdraw it)."""
    if not user_can_see(user, submission):
        raise PermissionDenied
    with transaction.atomic():
        submission = Submission.objects.select_for_update().get(pk=submission.pk)
        if publish and (submission.status != Status.FINISHED or not submission.results.exists()):
            raise SubmissionRejected("Only a finished submission with scores can be published.")
        Submission.objects.filter(method=submission.method, split=submission.split,
                                  is_published=True).update(is_published=False)
        Submission.objects.filter(pk=submission.pk).update(is_published=publish)
        refresh_entry(submission.method, submission.split)
