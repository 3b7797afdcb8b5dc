"""One model of a result's state (METRICS.md, "A test belongs to the results it compared").

**Revision.** A result's ``revision`` names what it says now; every change of that bumps it, here
and nowhere else (``do_bump_revisions``):

- a re-score overwriting it (``lifecycle.record_result``, same scorer version and partition);
- new labels for its split (``do_new_labels``): it now predates them;
- its deferred intervals arriving, or given up (``lifecycle.record_intervals``).

Each bump makes the stored paired tests of the result invalid and asks them again
(``rankings.paired_revisions``): no page shows a test beside scores it was not computed on.

**Labels.** A result names the labels version its attempt was sent with (``Result.labels``);
against the split's active labels it is current, awaiting re-score, or its re-score on them
failed (``models.result_state``). The leaderboard row carries that state
(``rankings.services.refresh_entry``): a row that is not current stays on the board, listed
apart and marked, never ranked and never tested.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from django.db import transaction
from django.db.models import F, QuerySet

from leaderboard.benchmarks.models import LabelSet, Split
from leaderboard.rankings.services import do_refresh_split
from leaderboard.submissions.models import Result, Submission

log = logging.getLogger(__name__)
Status = Submission.Status


def do_bump_revisions(results: QuerySet[Result] | Iterable[int], why: str) -> list[int]:
    """Bump the revision of ``results`` (a queryset, or result ids) and invalidate their stored paired
    tests, which are asked again once the transaction commits; returns the ids bumped."""
    from leaderboard.rankings.paired_revisions import do_invalidate_tests

    ids = list(results.values_list("pk", flat=True)) if isinstance(results, QuerySet) else list(results)
    if not ids:
        return []
    with transaction.atomic():
        Result.objects.filter(pk__in=ids).update(revision=F("revision") + 1)
        tests = do_invalidate_tests(ids)
    log.info("Revision of %d result%s bumped (%s); %d paired test%s invalid", len(ids), "s" * (len(ids) != 1), why,
             len(tests), "s" * (len(tests) != 1))
    return ids


def do_new_labels(split: Split, previous: LabelSet | None) -> int:
    """The active labels of ``split`` changed from ``previous`` (None: there were none): bump every
    result of the split, rewrite its rows (now awaiting re-score) and queue the re-score of its
    submissions on the new labels (``do_rescore_on_labels``); returns how many were queued.
    Nothing happens when the active labels are still ``previous``."""
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
    from leaderboard.submissions import lifecycle

    done = (Submission.objects.filter(split=split, status__in=[Status.FINISHED, Status.FAILED],
                                      file_deleted_at__isnull=True).exclude(file_key="")
            .values_list("pk", flat=True))
    active = (Submission.objects.filter(split=split, status__in=[Status.QUEUED, Status.RUNNING])
              .exclude(labels=labels).values_list("pk", flat=True))
    queued = sum(lifecycle.do_enqueue(pk, bulk=True) is not None for pk in list(done))
    return queued + sum(lifecycle.do_enqueue(pk, requeue=True) is not None for pk in list(active))
