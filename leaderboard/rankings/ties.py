"""Paired significance tests between leaderboard rows, and the "statistically tied" marks.

The site never holds per-unit outcomes: it asks a scoring worker by name
(``contracts.PAIRED_TEST``, on the track's bulk queue, so a test never delays
a new submission) with the two results' outcome keys, and records the
aggregates the worker sends back (``record_paired_test``, a site-queue task)
in ``PairedTest``, one row per pair of results and metric, asked once.

Ties: along a split's default ranking (the primary metric, best first) each
scored row is tested against the scored row above it; a row whose test finds
no significant difference (p >= ``SIGNIFICANCE``) is marked ``tied_with``
that row. Marks are rewritten whenever the split's rows change
(``do_refresh_ties``, after ``refresh_entry`` commits) and whenever a test's
answer arrives. Ranks do not change: they stay competition ranks.
"""

from __future__ import annotations

import logging
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from evaluation_workers import contracts, queues
from leaderboard.benchmarks.models import Split
from leaderboard.lib.pagecache import bump
from leaderboard.rankings.models import LeaderboardEntry, PairedTest
from leaderboard.submissions.models import Result

log = logging.getLogger(__name__)

SIGNIFICANCE = 0.05  # as evaluation_workers.metrics.paired.SIGNIFICANCE


def comparable(x: Result, y: Result) -> bool:
    """Results scored against the same labels by the same scorer share their units.

    Never a partition's result (a split with a public subset): the kept outcomes cover every
    unit, so a test would mix the private remainder into the public board (and the reverse).
    """
    return (x.labels_sha256 == y.labels_sha256 and x.scorer_version == y.scorer_version
            and not x.partition and not y.partition)


def _outcomes_key(track: str, result: Result) -> str:
    return contracts.outcomes_key(track, result.labels_sha256, result.predictions_sha256, result.scorer_version)


def _queue(track: str, scorer_version: str) -> str:
    # The bulk twin of the track's scoring queue (as submissions.lifecycle.queue_for names it).
    base = settings.EVAL_QUEUE_GPU if track in settings.EVAL_GPU_TRACKS else settings.EVAL_QUEUE_CPU
    return queues.queue_name(base, track, scorer_version, bulk=True)


def paired_test_for(x: Result, y: Result, metric: str, *, ask: bool = True) -> tuple[PairedTest | None, bool]:
    """The test of x against y on ``metric`` (asked of a worker when new and ``ask``), and whether
    it is stored as y against x (then its difference and interval are of y - x)."""
    flipped = x.pk > y.pk
    a, b = (y, x) if flipped else (x, y)
    test = PairedTest.objects.filter(result_a=a, result_b=b, metric=metric).first()
    if test is None and ask:
        test, created = PairedTest.objects.get_or_create(result_a=a, result_b=b, metric=metric)
        if created:
            transaction.on_commit(lambda: do_send_test(test.pk))
    return test, flipped


def do_send_test(test_id: int) -> bool:
    """Publish the request of a pending test; False (logged) when the broker is unreachable."""
    from leaderboard.celery import app as celery_app

    test = PairedTest.objects.select_related("result_a__submission__split__benchmark", "result_b").get(pk=test_id)
    track = test.result_a.submission.split.benchmark.track
    request = contracts.PairedTestRequest(
        schema=contracts.SCHEMA_VERSION, test_id=test.pk, track=track, metric=test.metric,
        outcomes_a=_outcomes_key(track, test.result_a), outcomes_b=_outcomes_key(track, test.result_b),
        reply_queue=settings.SITE_QUEUE)
    try:
        celery_app.send_task(contracts.PAIRED_TEST, kwargs=dict(request),
                             queue=_queue(track, test.result_a.scorer_version),
                             retry=True, retry_policy=settings.SEND_RETRY_POLICY)
    except Exception as exc:  # the broker's errors are many; the next change of the split asks again
        log.warning("Could not send paired test %s (%s)", test.pk, exc)
        return False
    return True


def record_paired_test(*, test_id: int, test: str, difference: float | None, p_value: float | None,
                       interval: list[float] | None, resamples: int, error: str) -> None:
    """A worker's answer: store it, then rewrite the tie marks of the split it belongs to."""
    with transaction.atomic():
        row = PairedTest.objects.select_related("result_a__submission__split__benchmark").filter(pk=test_id).first()
        if row is None:  # a result deleted meanwhile
            return
        lo, hi = interval if interval else (None, None)
        PairedTest.objects.filter(pk=test_id).update(
            test=test[:40], difference=difference, p_value=p_value, interval_lo=lo, interval_hi=hi,
            resamples=resamples, error=error[:200], computed_at=timezone.now())
        split = row.result_a.submission.split
        bump(split.benchmark.track)
        do_refresh_ties(split, ask=False)


def default_ranking(split: Split) -> list[LeaderboardEntry]:
    """The split's scored rows that have a result, in the default order (the page's tie-breaks)."""
    return list(LeaderboardEntry.objects.filter(split=split, is_paper=False, result__isnull=False,
                                                primary_score__isnull=False)
                .select_related("result").order_by(F("primary_score").desc(), "published_at", "id"))


def do_refresh_ties(split: Split, *, ask: bool = True) -> int:
    """Rewrite every scored row's ``tied_with`` on ``split``; ask for tests not asked yet (``ask``).

    Returns how many rows changed.
    """
    metric = split.benchmark.spec.primary_metric
    rows = default_ranking(split)
    changed = 0
    marks: dict[int, tuple[int | None, float | None]] = {}
    for upper, lower in zip(rows, rows[1:]):
        tied, p = None, None
        if upper.result is not None and lower.result is not None and comparable(upper.result, lower.result):
            found, _ = paired_test_for(upper.result, lower.result, metric, ask=ask)
            if found is not None and found.computed_at is not None and found.p_value is not None:
                p = found.p_value
                tied = upper.pk if p >= SIGNIFICANCE else None
        marks[lower.pk] = (tied, p)
    for row in rows:
        tied, p = marks.get(row.pk, (None, None))
        if (row.tied_with_id, row.tie_p_value) != (tied, p):
            LeaderboardEntry.objects.filter(pk=row.pk).update(tied_with=tied, tie_p_value=p)
            changed += 1
    if changed:
        bump(split.benchmark.track)
    return changed


def pair_summary(x: LeaderboardEntry, y: LeaderboardEntry, metric: str, *, ask: bool = True) -> dict[str, Any]:
    """What the compare page and its API say of x against y on ``metric`` (x - y).

    ``status``: "done", "pending", "unavailable" (a reason in ``reason``).
    """
    base: dict[str, Any] = {"a": x.pk, "b": y.pk, "metric": metric, "status": "unavailable", "reason": "",
                            "test": "", "difference": None, "p_value": None, "interval": None, "significant": None}
    if x.result is None or y.result is None:
        return {**base, "reason": "reported in a paper: no per-unit results to test"}
    if x.result.partition or y.result.partition:
        return {**base, "reason": "scored on a public subset or its private remainder: no paired test yet"}
    if not comparable(x.result, y.result):
        return {**base, "reason": "scored against different labels or by different scorers"}
    test, flipped = paired_test_for(x.result, y.result, metric, ask=ask)
    if test is None or test.computed_at is None:
        return {**base, "status": "pending"}
    if test.error or test.p_value is None:
        return {**base, "reason": test.error or "undefined on these results"}
    sign = -1.0 if flipped else 1.0
    lo, hi = test.interval_lo, test.interval_hi
    interval = None if lo is None or hi is None else sorted([sign * lo, sign * hi])
    return {**base, "status": "done", "test": test.test, "p_value": test.p_value,
            "difference": None if test.difference is None else sign * test.difference,
            "interval": interval, "significant": test.p_value < SIGNIFICANCE}
