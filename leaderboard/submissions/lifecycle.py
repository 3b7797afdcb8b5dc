"""The life of a submission once it exists: every status change, send, refund and rescue.

    uploading → submitted → queued → running → finished | failed | cancelled

``services`` (one-request uploads), ``uploads`` (uploads in parts), the API
and the moderation desk all move submissions through the functions here, and
the site worker records the scoring workers' reports here (``tasks.py``).

Nothing is lost on the way:

- **Outbox.** ``do_enqueue`` marks a submission ``queued`` (a new attempt) and
  sends the task only after the transaction commits; when the broker is down
  the submission simply stays queued with ``sent_at`` empty, and the sweeper
  sends it later. A request never fails because the broker did.
- **Attempts.** Every worker report names its attempt; a report of an earlier
  attempt changes nothing, so sending again is always safe.
- **Sweeper** (``sweeper.do_sweep``, every ``SWEEP_INTERVAL`` s and whenever a
  worker starts): sends what was never sent; re-sends an attempt whose message
  vanished from the broker, or whose worker is gone (started again, or no longer
  announcing itself), and records a report that the site worker lost; after
  ``SWEEP_MAX_LOST_ATTEMPTS`` attempts that workers started and lost
  (``do_retry_lost``), fails it as a platform error, refunds it and tells the
  owner. A submission that waits because no worker serves its queue is never
  failed for waiting.
- **Refunds.** A platform failure, a cancellation and an upload that never
  completes do not count against the quota; a format rejection counts
  against the separate rejection cap.
"""

from __future__ import annotations

import logging
import re
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from evaluation_workers import contracts, queues
from evaluation_workers.tracks import all_tracks, get_track
from leaderboard.celery import app as celery_app
from leaderboard.celery import count_refused
from leaderboard.lib import storage
from leaderboard.rankings.services import refresh_entry
from leaderboard.submissions import broker, notifications
from leaderboard.submissions.models import Result, ResultState, Submission, Upload
from leaderboard.submissions.result_state import do_bump_revisions

log = logging.getLogger(__name__)
Status = Submission.Status
Kind = Submission.FailureKind
Quota = Submission.Quota
DONE = {Status.FINISHED, Status.FAILED, Status.CANCELLED}

# Which status may follow which. A result may arrive before the first progress
# message is recorded (queued -> finished); a finished or failed submission
# can be queued again (re-scoring); a queued or running one is queued again as
# a new attempt when its message or its worker was lost (``requeue``).
TRANSITIONS: dict[str, set[str]] = {
    Status.UPLOADING: {Status.SUBMITTED, Status.FAILED, Status.CANCELLED},
    Status.SUBMITTED: {Status.QUEUED, Status.FAILED, Status.CANCELLED},
    Status.QUEUED: {Status.QUEUED, Status.RUNNING, Status.FINISHED, Status.FAILED, Status.CANCELLED},
    Status.RUNNING: {Status.QUEUED, Status.RUNNING, Status.FINISHED, Status.FAILED, Status.CANCELLED},
    Status.FINISHED: {Status.QUEUED},
    Status.FAILED: {Status.QUEUED},
    Status.CANCELLED: {Status.QUEUED},
}

PLATFORM_REFUND_NOTE = "It does not count against your quota."
# What a platform failure's message says of the quota (the workers' messages say it too) when the
# submission stays counted: it was scored before, and its earlier result stays.
_REFUND_CLAIM = re.compile(r"\b([Ii])t does not count against (your|the) quota")


def quota_note(message: str, quota: str) -> str:
    """``message`` with its claim of a refund made true of ``quota``: a submission that keeps
    counting (it had a result) is said to count, never to be refunded."""
    if quota == Quota.REFUNDED:
        return message
    return _REFUND_CLAIM.sub(lambda m: f"{m[1]}t still counts against {m[2]} quota, as it was scored before "
                                       "(its earlier result stays)", message)


def fault_hold(name: str) -> None:
    """Fault-injection tests only: wait as many seconds as the file FAULT_DIR/<name> says."""
    if settings.FAULT_DIR:
        try:
            time.sleep(float(Path(settings.FAULT_DIR, name).read_text()))
        except (OSError, ValueError):
            pass


def do_transition(submission_id: int, to: str, *, attempt: int | None = None,
                  allow: set[str] | None = None, **fields: Any) -> Submission | None:
    """Move a submission to ``to`` under a row lock; None if not allowed or stale.

    ``attempt`` (from worker reports) must match the submission's current
    attempt, so that a late report of an earlier run changes nothing.
    ``allow`` narrows the statuses it may leave (e.g. only ``submitted``).
    """
    with transaction.atomic():
        submission = Submission.objects.select_for_update().get(pk=submission_id)
        if attempt is not None and attempt != submission.attempt:
            log.info("Dropping report for submission %s: attempt %s, current %s",
                     submission_id, attempt, submission.attempt)
            return None
        if to not in TRANSITIONS[submission.status] or (allow is not None and submission.status not in allow):
            log.info("Ignoring transition of submission %s from %s to %s",
                     submission_id, submission.status, to)
            return None
        now = timezone.now()
        submission.status = to
        if to == Status.QUEUED:
            submission.attempt += 1
            submission.queued_at, submission.started_at, submission.finished_at = now, None, None
            submission.sent_at, submission.heartbeat_at, submission.worker = None, None, ""
            submission.progress, submission.failure_kind, submission.status_detail = 0.0, "", ""
        elif to == Status.RUNNING and submission.started_at is None:
            submission.started_at = now
        elif to in DONE:
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


def do_fail(submission: Submission | int, kind: str, message: str, *, attempt: int | None = None,
            allow: set[str] | None = None, notify: bool = False) -> Submission | None:
    """Fail a submission with ``message`` (shown to its owner); refunds the platform's failures."""
    pk = submission if isinstance(submission, int) else submission.pk
    if kind not in Kind.values:
        kind = Kind.PLATFORM_ERROR
    with transaction.atomic():
        current = Submission.objects.select_for_update().get(pk=pk)
        quota = quota_after_failure(current, kind)
        failed = do_transition(pk, Status.FAILED, attempt=attempt, allow=allow, failure_kind=kind,
                               status_detail=quota_note(message, quota)[:5000], quota=quota)
        if failed is not None:
            transaction.on_commit(lambda: broker.forget_attempt(pk))
            if notify:
                transaction.on_commit(lambda: notifications.send_outcome(pk))
            if failed.is_published:
                _row_after_failure(failed)
    return failed


def _row_after_failure(failed: Submission) -> None:
    """A published submission failed: its row says so if the failure was its re-score on the split's
    current labels (its scores are from earlier ones), and the maintainers are told why."""
    entry = refresh_entry(failed.method, failed.split)
    if entry is not None and entry.state == ResultState.RESCORE_FAILED:
        log.error("The re-score of published submission %s (%s on %s) failed on the split's current labels: %s",
                  failed.pk, failed.method.name, failed.split, failed.status_detail)
        transaction.on_commit(lambda: notifications.send_rescore_failed(failed.pk))


def do_cancel(submission_id: int, detail: str) -> Submission | None:
    """Cancel a submission that is not done; refunded (no score was seen); an open upload is dropped."""
    with transaction.atomic():
        current = Submission.objects.select_for_update().get(pk=submission_id)
        quota = Quota.REFUNDED if current.quota == Quota.COUNTED and not current.results.exists() \
            else current.quota
        cancelled = do_transition(submission_id, Status.CANCELLED, status_detail=detail, quota=quota)
        if cancelled is None:
            return None
        upload = Upload.objects.filter(submission=cancelled, completed_at__isnull=True,
                                       aborted_at__isnull=True).first()
        if upload is not None:
            do_abort_upload(upload)
        transaction.on_commit(lambda: broker.forget_attempt(submission_id))
        return cancelled


def do_abort_upload(upload: Upload) -> None:
    """Drop the parts of an upload that will not complete."""
    storage.abort_multipart(upload.submission.file_key, upload.storage_upload_id)
    Upload.objects.filter(pk=upload.pk, completed_at__isnull=True).update(aborted_at=timezone.now())


def queue_for(track: str, *, bulk: bool = False) -> str:
    """The one place that names a scoring queue: device base, track and the scorer version the site runs
    (``evaluation_workers.queues``), so only workers with the same scorer take it; ``bulk`` for re-scoring."""
    base = settings.EVAL_QUEUE_GPU if track in settings.EVAL_GPU_TRACKS else settings.EVAL_QUEUE_CPU
    return queues.queue_name(base, track, get_track(track).scorer_version, bulk=bulk)


def all_queues() -> list[str]:
    """Every scoring queue the site may send to now (both devices, normal and bulk)."""
    return sorted({queues.queue_name(base, t.name, t.scorer_version, bulk=bulk)
                   for t in all_tracks() for base in (settings.EVAL_QUEUE_CPU, settings.EVAL_QUEUE_GPU)
                   for bulk in (False, True)})


def do_enqueue(submission_id: int, *, requeue: bool = False, lost: int | None = None,
               bulk: bool = False) -> Submission | None:
    """Queue a submission for scoring (a new attempt) with its split's active labels.

    Without ``requeue`` it leaves only ``submitted``, ``finished``, ``failed``
    or ``cancelled``; with it also ``queued`` and ``running`` (a maintainer's
    re-queue). ``lost`` names an attempt found lost: only that attempt, still
    queued or running, is replaced (never one that finished meanwhile). The
    task is sent after the surrounding transaction commits; if the broker is
    unreachable the sweeper sends it. ``bulk`` (re-scoring a split) sends it to
    the track's bulk queue, which workers serve only when no new submission
    waits; a bulk attempt sent again stays bulk.
    """
    submission = Submission.objects.select_related("split__benchmark").get(pk=submission_id)
    bulk = bulk or ((requeue or lost is not None) and submission.status in {Status.QUEUED, Status.RUNNING}
                    and queues.is_bulk(submission.queue))
    labels = submission.split.active_labels
    if labels is None:
        return do_fail(submission, Kind.PLATFORM_ERROR,
                       "No labels are loaded for this split yet; a maintainer will re-score it. "
                       + PLATFORM_REFUND_NOTE)
    active = {Status.QUEUED, Status.RUNNING}
    allow = active if lost is not None else None if requeue else set(Status) - active
    queued = do_transition(submission_id, Status.QUEUED, attempt=lost, allow=allow, labels=labels,
                           queue=queue_for(submission.split.benchmark.track, bulk=bulk))
    if queued is None:
        return None
    transaction.on_commit(lambda: do_send(queued.pk, queued.attempt))
    return queued


def do_send(submission_id: int, attempt: int) -> bool:
    """Publish the score task of ``attempt`` and note when; False (logged) if the broker is unreachable."""
    submission = Submission.objects.select_related("split__benchmark", "labels").get(pk=submission_id)
    if submission.attempt != attempt or submission.status not in {Status.QUEUED, Status.RUNNING}:
        return False
    request = contracts.ScoreRequest(
        schema=contracts.SCHEMA_VERSION, submission_id=submission.pk, attempt=attempt,
        track=submission.split.benchmark.track, predictions_key=submission.file_key,
        labels_key=submission.labels.storage_key if submission.labels else "",
        reply_queue=settings.SITE_QUEUE)
    if submission.predictions_sha256:  # the worker scores these bytes or none (empty: parts the store joined)
        request["predictions_sha256"] = submission.predictions_sha256
    try:
        broker.note_attempt(submission.pk, attempt)
    except Exception as exc:  # noqa: BLE001 - workers then drop it unscored as not noted, the message is gone,
        # and the sweeper sends a new attempt (SWEEP_QUEUED_AFTER)
        log.warning("Could not note attempt %s of submission %s: %s", attempt, submission.pk, exc)
    try:
        celery_app.send_task(contracts.SCORE_SUBMISSION, kwargs=dict(request), queue=submission.queue,
                             retry=True, retry_policy=settings.SEND_RETRY_POLICY)
    except Exception as exc:  # the broker's errors are many (kombu, redis, socket): all mean "later"
        log.warning("Could not send submission %s attempt %s to %s (%s); the sweeper will retry",
                    submission.pk, attempt, submission.queue, exc)
        return False
    Submission.objects.filter(pk=submission.pk, attempt=attempt, sent_at__isnull=True).update(
        sent_at=timezone.now())
    return True


# Reports of the scoring workers (``tasks.py``).


def record_progress(*, submission_id: int, attempt: int, fraction: float, message: str = "",
                    worker: str = "") -> None:
    fields: dict[str, Any] = {"progress": max(0.0, min(1.0, float(fraction))), "status_detail": message[:500],
                              "heartbeat_at": timezone.now()}
    if worker:
        fields["worker"] = worker[:200]
    do_transition(submission_id, Status.RUNNING, attempt=attempt, **fields)


def record_heartbeat(*, submission_id: int, attempt: int, worker: str = "") -> None:
    """A worker is still scoring this attempt (sent every ``EVAL_HEARTBEAT_SECONDS``)."""
    updated = Submission.objects.filter(pk=submission_id, attempt=attempt, status=Status.RUNNING).update(
        heartbeat_at=timezone.now(), worker=worker[:200])
    if not updated:  # the first sign of life of a queued attempt
        do_transition(submission_id, Status.RUNNING, attempt=attempt, allow={Status.QUEUED},
                      heartbeat_at=timezone.now(), worker=worker[:200])


def record_result(*, submission_id: int, attempt: int, result: dict[str, Any], seconds: float | None = None,
                  device: str = "", worker: str = "",
                  more_results: list[dict[str, Any]] | None = None) -> Result | None:
    """Store a worker's result (overwriting the same scorer version's and partition's) and finish.

    Labels with a public subset give two results, public (``result``) and
    private (``more_results``); each row records its partition. Returns the first.
    """
    with transaction.atomic():
        submission = do_transition(submission_id, Status.FINISHED, attempt=attempt, progress=1.0,
                                   status_detail="")
        if submission is None:
            return None
        if not submission.predictions_sha256:
            # Files joined by the object store were never read by the site.
            Submission.objects.filter(pk=submission.pk).update(predictions_sha256=result["predictions_sha256"])
        written = [Result.objects.update_or_create(
            submission=submission, scorer_version=one["scorer_version"], partition=one.get("partition", ""),
            defaults={"labels_sha256": one["labels_sha256"], "labels_id": submission.labels_id,
                      "predictions_sha256": one["predictions_sha256"],
                      "metrics": one["metrics"], "breakdown": one["breakdown"],
                      "details": one.get("details", {}), "warnings": one.get("warnings", []),
                      "intervals": one.get("intervals") or {}, "bootstrap": one.get("bootstrap") or {},
                      "seconds": seconds, "device": device, "worker": worker[:200]})
                   for one in [result, *(more_results or [])]]
        # A re-score with the same scorer overwrote these rows: what they say changed.
        do_bump_revisions([row.pk for row, created in written if not created],
                          f"submission {submission_id} re-scored (attempt {attempt})")
        stored = written[0][0]
        _follow_deferred([row for row, _ in written])  # asks for them at the revision current on commit
        if submission.is_published:
            refresh_entry(submission.method, submission.split)
        fault_hold("record-result")  # fault-injection tests: a kill lands inside the transaction
        transaction.on_commit(lambda: broker.forget_attempt(submission_id))
        transaction.on_commit(lambda: notifications.send_outcome(submission.pk))
    return stored


def _follow_deferred(rows: list[Result]) -> None:
    """Results whose intervals were deferred (over every unit only: partition results never are): ask a
    worker for them once the result is stored, naming its revision; or, where the worker could not keep
    the outcomes to compute them from (``bootstrap.unavailable``), say on the result that it has none."""
    for row in rows:
        if row.partition != Result.Partition.ALL or not (row.bootstrap or {}).get("deferred"):
            continue
        if row.bootstrap.get("unavailable"):
            _intervals_failed(row, str(row.bootstrap["unavailable"])[:300], retry=False)
        else:
            transaction.on_commit(lambda pk=row.pk: do_ask_intervals(
                Result.objects.select_related("submission__split__benchmark").get(pk=pk)))


def do_ask_intervals(result: Result) -> bool:
    """Ask a worker for the deferred intervals of ``result`` at its current revision (on its track's bulk
    queue); False when the broker is unreachable: the result then says when to ask again
    (``bootstrap.retry_at``), and the sweeper does."""
    track = result.submission.split.benchmark.track
    request = contracts.IntervalsRequest(
        schema=contracts.SCHEMA_VERSION, submission_id=result.submission_id, result_id=result.pk,
        revision=result.revision, track=track, scorer_version=result.scorer_version, reply_queue=settings.SITE_QUEUE,
        outcomes_key=contracts.outcomes_key(track, result.labels_sha256, result.predictions_sha256,
                                            result.scorer_version))
    base = settings.EVAL_QUEUE_GPU if track in settings.EVAL_GPU_TRACKS else settings.EVAL_QUEUE_CPU
    try:
        celery_app.send_task(contracts.COMPUTE_INTERVALS, kwargs=dict(request),
                             queue=queues.queue_name(base, track, result.scorer_version, bulk=True),
                             retry=True, retry_policy=settings.SEND_RETRY_POLICY)
    except Exception as exc:  # noqa: BLE001 - the broker's errors are many; the next sweep tries again
        log.warning("Could not ask for the intervals of submission %s (%s); the sweeper will", result.submission_id,
                    exc)
        Result.objects.filter(pk=result.pk, bootstrap__deferred=True).exclude(bootstrap__has_key="retry_at").update(
            bootstrap={**result.bootstrap, "retry_at": timezone.now().timestamp()})
        return False
    bootstrap = {k: v for k, v in result.bootstrap.items() if k != "retry_at"}
    Result.objects.filter(pk=result.pk).update(bootstrap=bootstrap)
    return True


def record_intervals(*, submission_id: int, result_id: int, revision: int, intervals: dict[str, Any],
                     bootstrap: dict[str, Any], error: str = "", retry: bool = False) -> bool:
    """Intervals computed after the result (``contracts.RECORD_INTERVALS``): onto that result, and its row.

    Only the result at the revision they were asked for (``Result.revision``; a re-score, new labels or
    intervals since move it on), and still waiting for them, takes them; an answer for another revision
    is dropped, logged and counted. Returns whether the result took them. The follow-up resamples every
    unit, so never a partition's result (those are not deferred).

    A worker that could not compute them says why (``error``). Where asking again may succeed
    (``retry``: the outcomes store could not be read) the result keeps waiting and the sweeper asks
    again after ``INTERVALS_RETRY_SECONDS`` (``bootstrap.retry_at``), at most ``INTERVALS_MAX_TRIES``
    times; otherwise the result stops waiting and its warnings say that it has no intervals, and why.
    """
    with transaction.atomic():
        result = (Result.objects.select_for_update(of=("self",))
                  .select_related("submission__method", "submission__split").filter(pk=result_id).first())
        if result is None or result.submission_id != submission_id:
            log.warning("Dropping the intervals of result %s of submission %s: no such result (deleted since)",
                        result_id, submission_id)
            return False
        if result.revision != revision:
            log.warning("Dropping the intervals of result %s of submission %s: computed for revision %s, the "
                        "result is at revision %s", result_id, submission_id, revision, result.revision)
            count_refused(contracts.RECORD_INTERVALS, "stale")
            return False
        if not (result.bootstrap or {}).get("deferred"):
            return False  # taken already (a second answer to one request)
        if error:
            _intervals_failed(result, error[:300], retry)
            return False
        Result.objects.filter(pk=result.pk).update(intervals=intervals, bootstrap=bootstrap)
        do_bump_revisions([result.pk], f"intervals of submission {submission_id} arrived")
        submission = result.submission
        if submission.is_published:
            refresh_entry(submission.method, submission.split)
    return True


def _intervals_failed(result: Result, error: str, retry: bool) -> None:
    tries = int(result.bootstrap.get("tries", 0)) + 1
    if retry and tries < settings.INTERVALS_MAX_TRIES:
        again = timezone.now() + timedelta(seconds=settings.INTERVALS_RETRY_SECONDS * tries)
        Result.objects.filter(pk=result.pk).update(bootstrap={**result.bootstrap, "tries": tries, "error": error,
                                                               "retry_at": again.timestamp()})
        log.warning("Intervals of submission %s not computed (%s): asking again at %s (try %d of %d)",
                    result.submission_id, error, again.isoformat(), tries + 1, settings.INTERVALS_MAX_TRIES)
        return
    # Logged as an error: the site's log is where the maintainers hear of the service's faults.
    log.error("Intervals of submission %s (scorer %s) could not be computed: %s", result.submission_id,
              result.scorer_version, error)
    kept = {k: v for k, v in result.bootstrap.items() if k not in {"deferred", "retry_at", "tries", "error"}}
    warning = (f"No 95 % intervals: they could not be computed after the score ({error}). Re-scoring the "
               "submission computes them.")
    Result.objects.filter(pk=result.pk).update(bootstrap={**kept, "unavailable": error},
                                               warnings=[*result.warnings, warning])
    do_bump_revisions([result.pk], f"intervals of submission {result.submission_id} given up")
    submission = result.submission
    if submission.is_published:
        refresh_entry(submission.method, submission.split)


def record_failure(*, submission_id: int, attempt: int, kind: str, message: str) -> Submission | None:
    """A worker's failure report: refunds the platform's failures, counts format rejections apart.

    The platform's are logged as errors here too, where the site's log alerts reach the maintainers
    (the worker's own log, with the details, may be on another host); the desk lists them as failed.
    Returns the failed submission (None: a stale or repeated report).
    """
    failed = do_fail(submission_id, kind, message, attempt=attempt, notify=True)
    if failed is not None and failed.failure_kind == Kind.PLATFORM_ERROR:
        log.error("Submission %s attempt %s failed as a platform error: %s", submission_id, attempt,
                  failed.status_detail)
    return failed


def record_lost(*, submission_id: int, attempt: int, reason: str) -> None:
    """A worker's main process saw its scoring process die (killed, out of memory)."""
    do_retry_lost(submission_id, attempt, reason)


def do_retry_lost(submission_id: int, attempt: int, reason: str) -> str:
    """An attempt that a worker started and lost: send a new one, or fail after too many.

    Returns "requeued", "failed" or "" (the attempt was not current any more).
    """
    with transaction.atomic():
        current = Submission.objects.select_for_update().get(pk=submission_id)
        if current.attempt != attempt or current.status not in {Status.QUEUED, Status.RUNNING}:
            return ""
        lost = current.lost_attempts + 1
        Submission.objects.filter(pk=submission_id).update(lost_attempts=lost)
        log.warning("Submission %s lost attempt %s (%s); %s lost in all", submission_id, attempt, reason, lost)
        if lost >= settings.SWEEP_MAX_LOST_ATTEMPTS:
            do_fail(submission_id, Kind.PLATFORM_ERROR,
                    f"Scoring stopped unexpectedly {lost} times (the scoring process was killed or ran out of "
                    f"memory). {PLATFORM_REFUND_NOTE} The maintainers have been told.", notify=True)
            return "failed"
        do_enqueue(submission_id, lost=attempt)
        return "requeued"
