"""What pages say of the paired tests between leaderboard rows (``paired_tests`` asks for them and stores them).

P-values shown together are Holm-adjusted over a named family (``multiplicity``):
on a board (``board_verdicts``), the adjacent pairs of the rows shown, on the
sorted column; on the compare page (``compare_verdicts``), every pair of the
selected rows, on the shown metric. A pair whose adjusted p-value is at least
``LEVEL`` shows "no significant difference (p = ...)": that is not evidence that
the two are equal. Ranks do not change. A test whose results changed since its
answer shows "being recomputed" and counts as not computed (p = 1). The p-value
decides; where the bootstrap interval shown beside it disagrees (p < ``LEVEL``
with an interval that holds 0, or the reverse) the compare page and its API say
that the permutation test decided (``Verdict.disagreement``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from django.db.models import F, FloatField, Q
from django.db.models.fields.json import KeyTextTransform, KeyTransform
from django.db.models.functions import Cast

from evaluation_workers import contracts
from leaderboard.rankings.models import LeaderboardEntry, PairedTest
from leaderboard.rankings.multiplicity import LEVEL, holm
from leaderboard.rankings.paired_revisions import DONE, PENDING, RECOMPUTING, status
from leaderboard.rankings.paired_tests import Pair, check_ask_pairs, pair_of, testable_units, too_few_scenes
from leaderboard.submissions.models import ResultState

# Above this many pairs a read fetches the split's tests rather than naming each pair.
_PAIRS_NAMED = 100


@dataclass(frozen=True)
class Rung:
    """What the verdicts along a ranking need of one row."""

    entry_id: int
    result_id: int | None
    units: tuple[str, str] | None  # ``testable_units``
    valued: bool  # has a value in the ranked column
    too_few: str = ""  # ``too_few_scenes``


def testable(upper: Rung, lower: Rung) -> bool:
    return (upper.units is not None and upper.units == lower.units and upper.valued and lower.valued
            and upper.result_id is not None and lower.result_id is not None
            and not upper.too_few and not lower.too_few)


def rung(entry_id: int, result_id: int | None, labels: str | None, scorer: str | None, partition: str | None,
         value: Any, scenes: int | None, min_scenes: int | None) -> Rung:
    return Rung(entry_id, result_id, testable_units(labels, scorer, partition), value is not None,
                too_few_scenes({"units": scenes, "min_scenes": min_scenes}))


def significance_json(verdict: Verdict | None, above_id: int | None) -> dict[str, Any]:
    """A row's paired test against the row above (entry ``above_id``), as the API and the exports give it."""
    return {"no_significant_difference_from_entry_id":
            above_id if verdict is not None and verdict.no_significant_difference else None,
            "adjusted_p_value": verdict.adjusted_p_value if verdict is not None else None,
            "paired_test_note": verdict.disagreement if verdict is not None else ""}


@dataclass
class Verdict:
    """One pair's test on one key as a page shows it (x - y): ``status`` "done", "pending" (asked,
    not answered), "recomputing" (one of the two results changed since its answer, which is not
    shown), "not_requested" or "unavailable" (``reason`` says why); ``p_value`` raw (the
    permutation test's, over ``permutations`` swaps of scenes, all of them when ``exact``),
    ``adjusted_p_value`` Holm's over the page's family; ``significant`` when that is below LEVEL;
    ``interval`` the scene bootstrap's; ``disagreement``: where p < LEVEL and the interval disagree,
    which decided, in words ("" where they agree)."""

    status: str
    reason: str = ""
    test: str = ""
    difference: float | None = None
    p_value: float | None = None
    adjusted_p_value: float | None = None
    interval: list[float] | None = None
    significant: bool | None = None
    permutations: int | None = None
    exact: bool | None = None
    disagreement: str = ""

    @property
    def no_significant_difference(self) -> bool:
        return self.status == "done" and self.significant is False


@dataclass(frozen=True)
class Family:
    """The tests whose p-values a page adjusts together: ``pairs`` of them on ``key``, of which
    ``not_computed`` are not answered yet (counted as p = 1); ``over`` names them in words."""

    key: str
    over: str
    pairs: int
    not_computed: int

    def as_json(self) -> dict[str, Any]:
        return {"adjustment": "holm", "key": self.key, "over": self.over, "pairs": self.pairs,
                "not_computed": self.not_computed, "level": LEVEL, "test": contracts.PAIRED_TEST_NAME}


def _adjust(verdicts: Sequence[Verdict | None]) -> tuple[int, int]:
    """Holm over the verdicts that are tests (done with a p-value, pending or not asked yet):
    fills ``adjusted_p_value`` and ``significant`` of the done ones; returns (tests, not computed)."""
    family = [v for v in verdicts if v is not None and v.status in (DONE, PENDING, RECOMPUTING, "not_requested")]
    adjusted = holm([v.p_value if v.status == "done" and v.p_value is not None else 1.0 for v in family])
    for verdict, p in zip(family, adjusted):
        if verdict.status == "done":
            verdict.adjusted_p_value, verdict.significant = p, p < LEVEL
    return len(family), sum(v.status != "done" for v in family)


def _p_values(pairs: set[Pair], key: str, split_id: int) -> dict[Pair, tuple[str, str, float | None, Any]]:
    """(``paired_revisions.status``, error, raw p-value on ``key``, its interval) of each of ``pairs`` that
    was asked, reading those two values from each stored test (a board's export may span thousands of tests)."""
    if not pairs:
        return {}
    p_value = Cast(KeyTextTransform("p_value", KeyTransform(key, "findings")), FloatField())
    tests = PairedTest.objects.annotate(p=p_value, bounds=KeyTransform("interval", KeyTransform(key, "findings")))
    if len(pairs) <= _PAIRS_NAMED:
        named = Q()
        for a, b in pairs:
            named |= Q(result_a_id=a, result_b_id=b)
        tests = tests.filter(named)
    else:
        tests = tests.filter(result_a__submission__split_id=split_id)
    fields = ("result_a_id", "result_b_id", "computed_at", "invalidated_at", "revision_a", "revision_b",
              "result_a__revision", "result_b__revision", "error", "p", "bounds")
    return {(a, b): (status(computed_at is not None, invalidated_at is not None, (ra, rb), (now_a, now_b)), error, p,
                     bounds)
            for a, b, computed_at, invalidated_at, ra, rb, now_a, now_b, error, p, bounds in tests.values_list(*fields)
            if (a, b) in pairs}


def board_verdicts(rungs: Sequence[Rung], key: str, split_id: int, over: str) -> tuple[list[Verdict | None], Family]:
    """Each row's verdict against the row above it on ``key`` (None: the first row, or a pair that
    is not tested), adjusted together; ``over`` names the rows in words ("shown", "in this file")."""
    pairs = [pair_of(u.result_id, v.result_id) if testable(u, v) and u.result_id and v.result_id else None
             for u, v in zip(rungs, rungs[1:])]
    found = _p_values({p for p in pairs if p is not None}, key, split_id)
    verdicts: list[Verdict | None] = [None]
    for pair in pairs:
        if pair is None:
            verdicts.append(None)
            continue
        state, error, p, bounds = found.get(pair, (PENDING, "", None, None))
        if pair not in found:
            verdicts.append(Verdict("not_requested"))
        elif state != DONE:
            verdicts.append(Verdict(state))
        elif error or p is None:
            verdicts.append(Verdict("unavailable", reason=error or "undefined on these results"))
        else:
            # Whether the interval holds 0 does not depend on which row is subtracted from which.
            interval = bounds if isinstance(bounds, list) and len(bounds) == 2 else None
            verdicts.append(Verdict("done", p_value=p, disagreement=disagreement(p, interval)))
    tests, not_computed = _adjust(verdicts)
    return verdicts, Family(key=key, over=f"the adjacent pairs of scored rows {over}", pairs=tests,
                            not_computed=not_computed)


def compare_verdicts(entries: Sequence[LeaderboardEntry], key: str, track: str,
                     asker: Any = None) -> tuple[list[dict[str, Any]], Family, str]:
    """Every pair of ``entries`` (rows of ``track``; x before y: x - y) on ``key``, adjusted
    together. ``asker``, a signed-in user, asks for the pairs nobody asked yet
    (``check_ask_pairs``); the notice says why some were not. ``entries`` have their ``result``
    loaded."""
    listed: list[tuple[LeaderboardEntry, LeaderboardEntry, Pair | None, str]] = []
    for i, x in enumerate(entries):
        for y in entries[i + 1:]:
            listed.append((x, y, *_compare_pair(x, y)))
    wanted = {pair for *_, pair, _ in listed if pair is not None}
    tests = {(t.result_a_id, t.result_b_id): t for t in _named_tests(wanted)}
    notice = ""
    if asker is not None and wanted - set(tests):
        asked, notice = check_ask_pairs(asker, sorted(wanted - set(tests)), track)
        tests.update({(t.result_a_id, t.result_b_id): t for t in _named_tests(set(asked))})
    verdicts = [_compare_verdict(x, tests.get(pair), key, reason) if pair else Verdict("unavailable", reason=reason)
                for x, _, pair, reason in listed]
    size, not_computed = _adjust(verdicts)
    family = Family(key=key, over="every pair of the selected rows that can be tested", pairs=size,
                    not_computed=not_computed)
    return ([{"a": x.pk, "b": y.pk, "metric": key, **asdict(v)} for (x, y, _, _), v in zip(listed, verdicts)],
            family, notice)


def _named_tests(pairs: set[Pair]) -> list[PairedTest]:
    if not pairs:
        return []
    named = Q()
    for a, b in pairs:
        named |= Q(result_a_id=a, result_b_id=b)
    return list(PairedTest.objects.filter(named).annotate(now_a=F("result_a__revision"), now_b=F("result_b__revision")))


def _compare_pair(x: LeaderboardEntry, y: LeaderboardEntry) -> tuple[Pair | None, str]:
    """The pair of results to test, or None and why not."""
    if x.result is None or y.result is None:
        return None, "reported in a paper: no per-unit results to test"
    stale = [e for e in (x, y) if e.state != ResultState.CURRENT]
    if stale:
        return None, "; ".join(f"{e.name} is {e.get_state_display()}: its scores are from the split's earlier "
                               "labels" for e in stale)
    if x.result.partition or y.result.partition:
        return None, "scored on a public subset or its private remainder: no paired test yet"
    units = [testable_units(r.labels_sha256, r.scorer_version, r.partition) for r in (x.result, y.result)]
    if units[0] != units[1]:
        return None, "scored against different labels or by different scorers"
    too_few = too_few_scenes(x.result.bootstrap) or too_few_scenes(y.result.bootstrap)
    if too_few:
        return None, too_few
    return pair_of(x.result.pk, y.result.pk), ""


def _compare_verdict(x: LeaderboardEntry, test: PairedTest | None, key: str, reason: str) -> Verdict:
    if test is None:
        return Verdict("not_requested")
    state = status(test.computed_at is not None, test.invalidated_at is not None,
                   (test.revision_a, test.revision_b), (test.now_a, test.now_b))  # type: ignore[attr-defined]
    if state != DONE:
        return Verdict(state)
    found = test.findings.get(key)
    if test.error or not found or found.get("p_value") is None:
        return Verdict("unavailable", reason=test.error or "undefined on these results")
    # Stored as the smaller result id minus the other: turned round when x is the other.
    sign = 1.0 if x.result_id == test.result_a_id else -1.0
    interval = found.get("interval")
    shown = None if interval is None else sorted([sign * interval[0], sign * interval[1]])
    return Verdict("done", test=found.get("test", ""), p_value=found["p_value"],
                   difference=None if found.get("difference") is None else sign * found["difference"],
                   interval=shown, permutations=found.get("permutations"), exact=found.get("exact"),
                   disagreement=disagreement(found["p_value"], shown))


def disagreement(p_value: float, interval: list[float] | None) -> str:
    """Which decided, in words, where the raw p-value and the bootstrap interval of the difference
    disagree at ``LEVEL`` (p below it with an interval holding 0, or the reverse); "" where they agree."""
    if interval is None:
        return ""
    holds_zero = interval[0] <= 0.0 <= interval[1]
    if (p_value < LEVEL) == (not holds_zero):
        return ""
    if holds_zero:
        return (f"the permutation test decided: p = {p_value:.3f} is below {LEVEL} though the bootstrap "
                f"interval of the difference holds 0")
    return (f"the permutation test decided: p = {p_value:.3f} is not below {LEVEL} though the bootstrap "
            f"interval of the difference excludes 0")
