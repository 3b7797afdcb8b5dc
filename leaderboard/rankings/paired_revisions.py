"""Which state of its two results a stored paired test belongs to.

A test is sent with the two results' revisions, which it keeps (``PairedTest.revision_a`` and
``revision_b``, written by ``paired_tests.do_send_test``). Its findings are shown only while both are
still the results' revisions (``status``). Every bump of a result's revision
(``submissions.result_state.do_bump_revisions``) invalidates the tests of that result here: the answer
is cleared and pages say "being recomputed"; the bump sends them again once its transaction commits,
unless one of their results is no longer current on the split's labels (then a test waits for the
re-score, whose bump sends it: ``paired_tests.do_send_test``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.db.models import Q
from django.utils import timezone

from leaderboard.lib.pagecache import bump
from leaderboard.rankings.models import PairedTest

DONE, PENDING, RECOMPUTING = "done", "pending", "recomputing"


def status(computed: bool, invalidated: bool, revisions: tuple[Any, Any], current: tuple[Any, Any]) -> str:
    """"done" (its answer belongs to the results as they are), "recomputing" (one of them changed since:
    invalidated, or answered for revisions that are not the results' now) or "pending" (asked, never answered)."""
    if computed:
        return DONE if tuple(revisions) == tuple(current) else RECOMPUTING
    return RECOMPUTING if invalidated else PENDING


def do_invalidate_tests(result_ids: Iterable[int]) -> list[int]:
    """Clear the answers of every stored test of ``result_ids`` (to be asked again); returns their ids."""
    ids = list(result_ids)
    tests = PairedTest.objects.filter(Q(result_a_id__in=ids) | Q(result_b_id__in=ids))
    found = list(tests.values_list("pk", "result_a__submission__split__benchmark__track"))
    if not found:
        return []
    PairedTest.objects.filter(pk__in=[pk for pk, _ in found]).update(
        findings={}, resamples=0, error="", computed_at=None, sent_at=None, invalidated_at=timezone.now())
    for track in {track for _, track in found}:
        bump(track)  # cached pages showing the old answers move on
    return [pk for pk, _ in found]
