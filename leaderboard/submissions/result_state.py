"""One model of a result's state (METRICS.md, "A test belongs to the results it compared").

**Revision.** A result's ``revision`` names what it says now; every change of that bumps it, here
and nowhere else (``do_bump_revisions``):

- a re-score overwriting it (``lifecycle.record_result``, same scorer version and partition);
- new labels for its split (``new_labels.do_new_labels``): it now predates them;
- its deferred intervals arriving, or given up (``lifecycle.record_intervals``).

Each bump makes the stored paired tests of the result invalid (``rankings.paired_revisions``) and
asks them again once the transaction commits: no page shows a test beside scores it was not computed on.

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

from leaderboard.rankings.paired_revisions import do_invalidate_tests
from leaderboard.rankings.paired_tests import send_all
from leaderboard.submissions.models import Result

log = logging.getLogger(__name__)


def do_bump_revisions(results: QuerySet[Result] | Iterable[int], why: str) -> list[int]:
    """Bump the revision of ``results`` (a queryset, or result ids) and invalidate their stored paired
    tests, which are asked again once the transaction commits; returns the ids bumped."""
    ids = list(results.values_list("pk", flat=True)) if isinstance(results, QuerySet) else list(results)
    if not ids:
        return []
    with transaction.atomic():
        Result.objects.filter(pk__in=ids).update(revision=F("revision") + 1)
        tests = do_invalidate_tests(ids)
        if tests:  # each is sent only if both its results are still current then (``paired_tests.do_send_test``)
            transaction.on_commit(lambda: send_all(tests), robust=True)
    log.info("Revision of %d result%s bumped (%s); %d paired test%s invalid", len(ids), "s" * (len(ids) != 1), why,
             len(tests), "s" * (len(tests) != 1))
    return ids
