"""Paired tests between leaderboard rows: asked when results change, read by the pages.

The site never holds per-unit outcomes: it asks a scoring worker by name
(``contracts.PAIRED_TEST``, on the track's bulk queue, so a test never delays
a new submission) with the two results' outcome keys; the worker tests every
score key at once (the scene-level permutation test's p-value, the scene
bootstrap's interval of the difference: ``evaluation_workers.metrics.paired``)
and sends back aggregates (``record_paired_test``, a site-queue task), kept in
``PairedTest``, one row per pair of results.

No test below the minimum of scenes: a split whose results recorded fewer scenes
than their intervals' minimum (``Result.bootstrap``: ``units`` < ``min_scenes``,
every interval withheld) is never asked, and a pair there says "too few scenes
to test" wherever it would show a test (the worker refuses such a pair too).

Who asks:

- a change of a split's rows (publish, withdraw, re-score, reveal, hide:
  ``rankings.services.refresh_entry``, once it commits): every pair of scored
  rows that are neighbours on one of the split's boards (``list_board_pairs``)
  and were not asked yet;
- a signed-in user's compare page: the pairs it shows that nobody asked yet, at
  most ``PAIRED_TESTS_PER_USER_HOUR`` an hour per user (``check_ask_pairs``).

Reading a page never asks: a visitor sees what is computed and which pairs are not yet.

A test belongs to the two results' revisions it was sent with (``paired_revisions``): once either
result changes, its answer is not shown ("being recomputed") and it is asked again. Rows whose
result predates the split's labels (awaiting re-score, re-score failed) are never tested.

What pages say of the stored tests is ``paired_verdicts``.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Sequence
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone

from evaluation_workers import contracts, queues
from leaderboard.benchmarks.models import Split
from leaderboard.lib.pagecache import bump
from leaderboard.rankings.models import LeaderboardEntry, PairedTest, export_columns
from leaderboard.submissions.models import Result, ResultState

log = logging.getLogger(__name__)

Pair = tuple[int, int]
"""Two result ids, the smaller first (as ``PairedTest`` stores them)."""

_HOUR = timedelta(hours=1)


def pair_of(x: int, y: int) -> Pair:
    return (x, y) if x < y else (y, x)


def too_few_scenes(bootstrap: dict[str, Any] | None) -> str:
    """Why a result's pairs are not tested ("too few scenes to test (4 scenes; at least 150)"), or ""
    when its bootstrap record (``Result.bootstrap``) shows enough scenes or says nothing of them
    (intervals off or deferred: the worker checks then). The worker's refusal reads the same."""
    scenes, least = (bootstrap or {}).get("units"), (bootstrap or {}).get("min_scenes")
    if not isinstance(scenes, int) or not isinstance(least, int) or scenes >= least:
        return ""
    return contracts.too_few_scenes(scenes, least)


def testable_units(labels_sha256: str | None, scorer_version: str | None, partition: str | None) -> tuple[str, str] | None:
    """What two results must share to be tested: the labels and the scorer (then they score the
    same units); None for a row that is never tested (reported in a paper, or a partition's
    result: the kept outcomes cover every unit, so a test would mix the private remainder
    into the public board, and the reverse)."""
    if not labels_sha256 or partition:
        return None
    return (labels_sha256, scorer_version or "")


# Asking


def list_board_pairs(split: Split) -> set[Pair]:
    """Every pair of scored rows that are neighbours on a board of ``split``: sorted by any column
    (each metric overall and per group), either way, with or without the training-data filter.

    Paper rows are never tested, nor rows on too few scenes (``too_few_scenes``: they share the
    split's labels with every other row there), so the neighbours of the scored rows alone are enough: two
    scored rows adjacent on a board that shows paper rows are adjacent among scored rows too.
    The order is ``selectors.ordered_entries``'s (value, then the primary metric best first by its
    direction, then earlier publication, then id); rows without the column's value are not tested on it.
    """
    primary = split.benchmark.spec.primary_metric
    primary_sign = 1 if split.benchmark.metric_spec(primary).lower_is_better else -1
    rows = [(pk, result_id, testable_units(labels, scorer, partition), scores, published_at, extra)
            for pk, result_id, labels, scorer, partition, scores, published_at, extra, bootstrap in
            LeaderboardEntry.objects.filter(split=split, is_paper=False, result__isnull=False,
                                            state=ResultState.CURRENT).values_list(
                "pk", "result_id", "result__labels_sha256", "result__scorer_version", "result__partition",
                "scores", "published_at", "uses_extra_data", "result__bootstrap")
            if not too_few_scenes(bootstrap)]
    rows = [r for r in rows if r[2] is not None]
    subsets = [rows, [r for r in rows if not r[5]], [r for r in rows if r[5]]]
    pairs: set[Pair] = set()
    for column in export_columns(split.benchmark.spec):
        for subset in subsets:
            valued = [r for r in subset if r[3].get(column) is not None]
            for sign in (-1, 1):
                def order(r: Any, sign: int = sign, column: str = column) -> tuple[Any, ...]:
                    best = r[3].get(primary)
                    return (sign * r[3][column], best is None, primary_sign * (best or 0.0), r[4], r[0])

                ranked = sorted(valued, key=order)
                pairs.update(pair_of(u[1], v[1]) for u, v in zip(ranked, ranked[1:]) if u[2] == v[2])
    return pairs


def do_ask_board_tests(split: Split) -> int:
    """Ask for the tests the boards of ``split`` show that nobody asked yet (and send again those
    unanswered for ``PAIRED_TEST_RESEND_SECONDS``); returns how many will be sent on commit."""
    return len(_ask(list_board_pairs(split), requested_by=None))


def _ask(pairs: Iterable[Pair], requested_by: Any) -> list[int]:
    """Create the tests of ``pairs`` not asked yet and send them, with the stale ones, once the
    transaction commits; returns the ids to be sent."""
    wanted = set(pairs)
    if not wanted:
        return []
    stale_before = timezone.now() - timedelta(seconds=settings.PAIRED_TEST_RESEND_SECONDS)
    with transaction.atomic():
        known = {(a, b): (pk, computed_at, sent_at) for pk, a, b, computed_at, sent_at in PairedTest.objects.filter(
            result_a_id__in={a for a, _ in wanted}, result_b_id__in={b for _, b in wanted}).values_list(
            "pk", "result_a_id", "result_b_id", "computed_at", "sent_at") if (a, b) in wanted}
        ids = [pk for pk, computed_at, sent_at in known.values()
               if computed_at is None and (sent_at is None or sent_at < stale_before)]
        for a, b in sorted(wanted - set(known)):
            test, created = PairedTest.objects.get_or_create(result_a_id=a, result_b_id=b,
                                                             defaults={"requested_by": requested_by})
            if created:
                ids.append(test.pk)
        if ids:
            transaction.on_commit(lambda: send_all(ids), robust=True)
    return ids


def send_all(ids: list[int]) -> None:
    """Send the requests of the tests ``ids`` (after the transaction that asked them commits)."""
    # The first refusal stops the round: with the broker down each send waits for its retries, and a
    # new row may bring dozens of pairs. What is left unsent goes at the next change of the split.
    for pk in ids:
        if not do_send_test(pk):
            return


def check_ask_pairs(user: Any, pairs: Sequence[Pair], track: str) -> tuple[list[Pair], str]:
    """A signed-in user's compare page asks for ``pairs`` (none asked yet), within the user's
    bound of ``PAIRED_TESTS_PER_USER_HOUR``; returns the pairs asked and, when some were not,
    why (in words, for the page)."""
    limit = settings.PAIRED_TESTS_PER_USER_HOUR
    with transaction.atomic():
        # One request of a user at a time counts (PostgreSQL; SQLite writes one at a time anyway).
        list(get_user_model().objects.select_for_update().filter(pk=user.pk).values_list("pk"))
        since = timezone.now() - _HOUR
        recent = PairedTest.objects.filter(requested_by=user, requested_at__gte=since)
        used = recent.count()
        asked = list(pairs[:max(0, limit - used)])
        if asked:
            _ask(asked, requested_by=user)
            bump(track)  # cached copies of the page say "pending" from now on
        if len(asked) == len(pairs):
            return asked, ""
        first = recent.order_by("requested_at").values_list("requested_at", flat=True).first()
        again = (first + _HOUR) if first else timezone.now()
        left = len(pairs) - len(asked)
        return asked, (f"You asked for {used + len(asked)} paired tests in the past hour, the most allowed "
                       f"({limit} an hour), so {left} pair{'s' if left != 1 else ''} here "
                       f"{'are' if left != 1 else 'is'} not computed yet. Reload after "
                       f"{again:%H:%M} UTC to ask for {'them' if left != 1 else 'it'}.")


def do_send_test(test_id: int) -> bool:
    """Publish the request of a pending test; False (logged) only when the broker is unreachable:
    the next change of the split sends it again (``PAIRED_TEST_RESEND_SECONDS``)."""
    from leaderboard.celery import app as celery_app

    test = (PairedTest.objects.select_related("result_a__submission__split__benchmark", "result_b")
            .filter(pk=test_id, computed_at__isnull=True).first())
    if test is None:  # answered or gone meanwhile: nothing to send
        return True
    if not _testable_now(test.result_a, test.result_b):  # its re-score's bump sends it again
        return True
    track = test.result_a.submission.split.benchmark.track
    request = contracts.PairedTestRequest(
        schema=contracts.SCHEMA_VERSION, test_id=test.pk, revision_a=test.result_a.revision,
        revision_b=test.result_b.revision, track=track,
        outcomes_a=_outcomes_key(track, test.result_a), outcomes_b=_outcomes_key(track, test.result_b),
        reply_queue=settings.SITE_QUEUE)
    try:
        celery_app.send_task(contracts.PAIRED_TEST, kwargs=dict(request),
                             queue=_queue(track, test.result_a.scorer_version),
                             retry=True, retry_policy=settings.SEND_RETRY_POLICY)
    except Exception as exc:  # the broker's errors are many; the test stays unsent
        log.warning("Could not send paired test %s (%s)", test.pk, exc)
        return False
    PairedTest.objects.filter(pk=test.pk).update(sent_at=timezone.now(), revision_a=test.result_a.revision,
                                                 revision_b=test.result_b.revision)
    return True


def _testable_now(a: Result, b: Result) -> bool:
    """Whether two results can be tested now: the same labels and scorer, and both scored on their
    split's active labels (a result awaiting its re-score is never tested)."""
    units = testable_units(a.labels_sha256, a.scorer_version, a.partition)
    if units is None or units != testable_units(b.labels_sha256, b.scorer_version, b.partition):
        return False
    active = a.submission.split.active_labels
    return active is None or all(r.labels_id in (None, active.pk) for r in (a, b))


def _outcomes_key(track: str, result: Result) -> str:
    return contracts.outcomes_key(track, result.labels_sha256, result.predictions_sha256, result.scorer_version)


def _queue(track: str, scorer_version: str) -> str:
    # The bulk twin of the track's scoring queue (as submissions.lifecycle.queue_for names it).
    base = settings.EVAL_QUEUE_GPU if track in settings.EVAL_GPU_TRACKS else settings.EVAL_QUEUE_CPU
    return queues.queue_name(base, track, scorer_version, bulk=True)


# Recording


def record_paired_test(*, test_id: int, revision_a: int, revision_b: int, findings: dict[str, Any],
                       resamples: int, error: str) -> None:
    """A worker's answer (``contracts.PairedTestReport``): store it; cached pages move on.

    Only a test still waiting for its answer takes it, and only when both results are still at the
    revisions the test was computed on (``Result.revision``); an answer for results that have moved on
    since (re-scored, new labels, late intervals) is dropped, logged and counted, and a second answer
    to one request changes nothing.
    """
    from leaderboard.celery import count_refused

    kept = {str(key)[:100]: _finding(found) for key, found in (findings or {}).items() if isinstance(found, dict)}
    with transaction.atomic():
        row = (PairedTest.objects.select_for_update(of=("self",))
               .select_related("result_a__submission__split__benchmark", "result_b").filter(pk=test_id).first())
        if row is None:  # a result deleted meanwhile
            return
        current = (row.result_a.revision, row.result_b.revision)
        if (revision_a, revision_b) != current:
            log.warning("Dropping the answer to paired test %s: computed on revisions %s and %s of its results, "
                        "which are at %s and %s", test_id, revision_a, revision_b, *current)
            count_refused(contracts.RECORD_PAIRED_TEST, "stale")
            return
        if row.computed_at is not None:
            return  # answered already (a second answer to one request)
        PairedTest.objects.filter(pk=test_id).update(findings=kept, resamples=int(resamples), error=str(error)[:200],
                                                     computed_at=timezone.now(), invalidated_at=None,
                                                     revision_a=revision_a, revision_b=revision_b)
        bump(row.result_a.submission.split.benchmark.track)


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and math.isfinite(value) else None


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _finding(found: dict[str, Any]) -> dict[str, Any]:
    """One key's ``contracts.PairedFinding``, numbers only."""
    interval = found.get("interval")
    bounds = [_number(v) for v in interval] if isinstance(interval, list) and len(interval) == 2 else None
    p = _number(found.get("p_value"))
    return {"test": str(found.get("test", ""))[:40], "difference": _number(found.get("difference")),
            "p_value": None if p is None else min(1.0, max(0.0, p)),
            "interval": bounds if bounds is not None and None not in bounds else None,
            "permutations": _count(found.get("permutations")),
            "exact": found.get("exact") if isinstance(found.get("exact"), bool) else None,
            "scenes": _count(found.get("scenes")), "min_scenes": _count(found.get("min_scenes"))}
