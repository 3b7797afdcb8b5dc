"""New labels under a split's results: the results predate them, so their revisions move, their rows
say "awaiting re-score", and every submission of the split is scored again on them (``load_labels``
with ``--allow-rescore``, and a bundle's new labels: ``benchmarks.bundle_apply``)."""

from __future__ import annotations

from django.db import transaction

from leaderboard.benchmarks.models import LabelSet, Split
from leaderboard.rankings.services import do_refresh_split
from leaderboard.submissions import lifecycle
from leaderboard.submissions.models import Result, Submission
from leaderboard.submissions.result_state import do_bump_revisions

Status = Submission.Status


def do_new_labels(split: Split, previous: LabelSet | None) -> int:
    """The active labels of ``split`` changed from ``previous`` (None: there were none): bump every
    result of the split, rewrite its rows (now awaiting re-score) and queue its submissions on the
    new labels (``do_rescore_on_labels``); returns how many were queued. Nothing happens when the
    active labels are still ``previous``."""
    active = split.active_labels
    if active is None or (previous is not None and previous.pk == active.pk):
        return 0
    with transaction.atomic():
        do_bump_revisions(Result.objects.filter(submission__split=split), f"new labels {active.sha256[:12]} on {split}")
        do_refresh_split(split)
        return do_rescore_on_labels(split, active)


def do_rescore_on_labels(split: Split, labels: LabelSet) -> int:
    """Queue again every submission of ``split`` that was scored, or is being scored, on labels other
    than ``labels``: finished and failed ones that still have their file go to the bulk queue (as
    the desk's re-score of a split), queued and running ones get a new attempt on their own queue.
    Returns how many were queued."""
    done = (Submission.objects.filter(split=split, status__in=[Status.FINISHED, Status.FAILED],
                                      file_deleted_at__isnull=True).exclude(file_key="")
            .values_list("pk", flat=True))
    active = (Submission.objects.filter(split=split, status__in=[Status.QUEUED, Status.RUNNING])
              .exclude(labels=labels).values_list("pk", flat=True))
    queued = sum(lifecycle.do_enqueue(pk, bulk=True) is not None for pk in list(done))
    return queued + sum(lifecycle.do_enqueue(pk, requeue=True) is not None for pk in list(active))
