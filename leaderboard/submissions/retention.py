"""The retention policy for prediction files (``RETENTION_*`` settings; off unless ``RETENTION_DAYS``).

For every method and split, the published submission and the
``RETENTION_KEEP_LAST`` latest ones keep their files. Of the others, a file
uploaded more than ``RETENTION_DAYS`` days ago is deleted once its submission
is done (finished, failed or cancelled) — except where a result was scored
from it, because re-scoring (a new scorer version, a re-score of the split)
needs the file: those go only when ``RETENTION_DELETE_SCORED`` is true.
Each deletion is logged and recorded on the submission (``file_deleted_at``);
re-scoring it is refused from then on. Run by Celery beat
(``submissions.apply_retention``) and ``manage.py apply_retention``.

The same run prunes the per-unit outcomes (``do_prune_outcomes``), kept by the
scoring workers in a store the site never reads: it sends each track's workers
(``contracts.PRUNE_OUTCOMES``, the track's bulk queue) the outcome keys of the
results that still need them (a board row, public or hidden; intervals still to
come), and the others' outcomes are deleted once ``OUTCOMES_KEEP_DAYS`` days old
(a submission published within that time keeps its paired tests; one
published later gets them by re-scoring).
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import Exists, OuterRef, Q
from django.utils import timezone

from evaluation_workers import contracts, queues
from evaluation_workers.tracks import all_tracks
from leaderboard.lib import storage
from leaderboard.rankings.models import LeaderboardEntry
from leaderboard.submissions.models import Result, Submission

log = logging.getLogger(__name__)
DONE = [Submission.Status.FINISHED, Submission.Status.FAILED, Submission.Status.CANCELLED]


def doomed(now: datetime | None = None) -> list[Submission]:
    """The submissions whose files the policy deletes now (nothing while it is off)."""
    if settings.RETENTION_DAYS <= 0:
        return []
    now = now or timezone.now()
    candidates = (Submission.objects.filter(file_deleted_at__isnull=True, is_published=False, status__in=DONE,
                                            created_at__lt=now - timedelta(days=settings.RETENTION_DAYS))
                  .exclude(file_key="")
                  .annotate(scored=Exists(Result.objects.filter(submission=OuterRef("pk")))))
    if not settings.RETENTION_DELETE_SCORED:
        candidates = candidates.filter(scored=False)
    out = []
    for submission in candidates.order_by("pk"):
        newer = Submission.objects.filter(method_id=submission.method_id, split_id=submission.split_id,
                                          created_at__gt=submission.created_at).count()
        if newer >= settings.RETENTION_KEEP_LAST:
            out.append(submission)
    return out


def do_apply_retention(now: datetime | None = None) -> int:
    """Delete the files the policy says; returns how many were deleted."""
    deleted = 0
    for submission in doomed(now):
        try:
            storage.delete(submission.file_key)
        except Exception as exc:  # noqa: BLE001 - a store error is retried on the next run
            log.warning("Retention: could not delete %s of submission %s: %s", submission.file_key,
                        submission.pk, exc)
            continue
        Submission.objects.filter(pk=submission.pk).update(file_deleted_at=timezone.now())
        log.info("Retention: deleted the predictions file of submission %s (%s, uploaded %s)",
                 submission.pk, submission.file_key, submission.created_at.isoformat())
        deleted += 1
    return deleted


def wanted_outcomes(track: str) -> list[str]:
    """The outcome keys of ``track``'s results that still need them: a board row's, or intervals to come."""
    rows = LeaderboardEntry.objects.filter(result__isnull=False).values("result_id")
    results = Result.objects.filter(Q(pk__in=rows) | Q(bootstrap__deferred=True),
                                    submission__split__benchmark__track=track)
    return sorted({contracts.outcomes_key(track, labels, predictions, version) for labels, predictions, version in
                   results.values_list("labels_sha256", "predictions_sha256", "scorer_version")})


def do_prune_outcomes(now: datetime | None = None) -> int:
    """Ask each track's workers to delete the outcomes no result needs (``OUTCOMES_KEEP_DAYS`` old);
    returns how many requests were sent. Nothing waits for the answer: the workers log what they delete."""
    from leaderboard.celery import app as celery_app

    now = now or timezone.now()
    before = (now - timedelta(days=settings.OUTCOMES_KEEP_DAYS)).timestamp()
    sent = 0
    for track in all_tracks():
        request = contracts.PruneOutcomesRequest(schema=contracts.SCHEMA_VERSION, track=track.name,
                                                 keep=wanted_outcomes(track.name), written_before=before)
        base = settings.EVAL_QUEUE_GPU if track.name in settings.EVAL_GPU_TRACKS else settings.EVAL_QUEUE_CPU
        try:
            celery_app.send_task(contracts.PRUNE_OUTCOMES, kwargs=dict(request),
                                 queue=queues.queue_name(base, track.name, track.scorer_version, bulk=True),
                                 retry=True, retry_policy=settings.SEND_RETRY_POLICY)
        except Exception as exc:  # noqa: BLE001 - the broker's errors are many; the next run asks again
            log.warning("Retention: could not ask the %s workers to prune outcomes (%s)", track.name, exc)
            continue
        sent += 1
    return sent
