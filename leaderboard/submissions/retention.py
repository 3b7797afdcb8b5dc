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
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import Exists, OuterRef
from django.utils import timezone

from leaderboard.lib import storage
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
