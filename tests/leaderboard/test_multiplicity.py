"""Holm's adjustment against a slow, obvious reference (the closure principle)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from leaderboard.rankings.multiplicity import holm


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
