"""Holm's adjustment against a slow, obvious reference (the closure principle), and the paired
test with Holm on methods of one population (independent questions, and questions in scenes
with scene effects): significant no more often than the level."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from evaluation_workers.metrics import permutation
from evaluation_workers.tracks import sqa3d as sqa3d_track
from leaderboard.rankings.multiplicity import LEVEL, holm
from tests.evaluation_workers.test_paired import adjacent_p_values, equally_good


def closed_bonferroni(p_values: list[float]) -> list[float]:
    """Holm's method is the closed testing of Bonferroni's: a hypothesis' adjusted p-value is the
    largest Bonferroni p-value, min(1, |S| min p over S), of any set S of hypotheses holding it."""
    m = len(p_values)
    return [max(min(1.0, len(s) * min(p_values[j] for j in s))
                for size in range(1, m + 1) for s in itertools.combinations(range(m), size) if i in s)
            for i in range(m)]


@pytest.mark.parametrize("seed", range(40))
def test_holm_equals_the_closure_of_bonferroni_on_random_p_values(seed: int) -> None:
    rng = np.random.default_rng(seed)
    m = int(rng.integers(1, 8))
    # Rounded, so that equal p-values occur; some near 0, some at 1.
    p = [float(v) for v in np.round(rng.choice([rng.random(m) ** 3, rng.random(m)]), 2)]
    assert holm(p) == pytest.approx(closed_bonferroni(p), abs=1e-12)


def test_holm_of_the_edge_cases() -> None:
    assert holm([]) == []
    assert holm([0.03]) == [0.03]
    assert holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    assert holm([0.5, 0.5]) == [1.0, 1.0]
    assert holm([0.0, 1.0]) == [0.0, 1.0]
    # A test not computed yet counts as p = 1: it can only raise the others' adjusted values.
    assert holm([0.01, 0.02, 1.0]) == pytest.approx([0.03, 0.04, 1.0])
    assert holm([0.01, 0.02]) == pytest.approx([0.02, 0.02])


def test_pairs_of_one_population_are_rarely_called_different_after_holm() -> None:
    """Four methods with the same chance of being right on each question (independent
    questions) on the compare page: of its six pairs, tested by the permutation test, some
    pair is "significant" on far more than LEVEL of the pages before adjustment, and on at most
    about LEVEL after Holm's; a single test errs about LEVEL of the time."""
    rng = np.random.default_rng(11)
    pages, n, single, any_raw, any_holm = 150, 120, 0, 0, 0
    kinds = rng.integers(0, 6, n)
    for _ in range(pages):
        methods = [{"em": e, "em_r": e, "type": kinds} for e in rng.random((4, n)) < 0.5]
        p = [permutation.paired_permutation(sqa3d_track.outcomes_statistic(permutation.stack_units(u, v)), n,
                                            np.arange(n), 199)["EM"]["p_value"]
             for i, u in enumerate(methods) for v in methods[i + 1:]]
        single += p[0] < LEVEL
        any_raw += any(v < LEVEL for v in p)
        any_holm += any(v < LEVEL for v in holm(p))
    assert 0.01 <= single / pages <= 0.1
    assert any_raw / pages >= 0.1
    assert any_holm / pages <= 0.07


def test_holm_keeps_a_board_of_equally_good_methods_from_calling_any_pair_different() -> None:
    """Four equally good methods ranked by EM: three adjacent pairs tested. Unadjusted, some pair is
    "significant" on more boards than the 5 % level; Holm's adjustment keeps the family-wise rate at
    or below it (binomial 99 % band of 150 boards at 0.05: up to 0.10)."""
    rng = np.random.default_rng(7)
    boards = [adjacent_p_values(equally_good(rng, 4), True, seed=r + 1) for r in range(150)]
    raw = np.mean([min(p) < LEVEL for p in boards])
    adjusted = np.mean([min(holm(p)) < LEVEL for p in boards])
    assert adjusted <= 0.10, adjusted
    assert adjusted <= raw
