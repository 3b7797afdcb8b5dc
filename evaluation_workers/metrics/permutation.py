"""The scene-level paired permutation test: does A differ from B on the same split?

Under "no difference" the two methods' outcomes in a scene are exchangeable:
scoring A's predictions of a scene as B's and B's as A's gives a split as
likely as the one observed. So the test swaps the two methods' outcomes scene
by scene and recomputes both scores exactly on each swapped assignment, as
the metric is computed (for AP, the PR curves of the swapped entries pooled
again; never an average of per-scene scores unless the metric is a plain mean
of units). With T = A - B of a key, T_obs its value as scored and T* its value
on a swapped assignment, the two-sided p-value is the share of assignments
with |T*| >= |T_obs|:

- **exact** when the split has at most ``EXACT_MAX_SCENES`` scenes: every one
  of the 2^S assignments. Swapping the complement of a set of scenes gives
  -T*, so only the assignments that leave the last scene unswapped are
  computed (2^(S-1)), each standing for itself and its complement; the
  identity is one of them, so p >= 2 / 2^S (0.125 on 4 scenes).
- **Monte Carlo** above that: B seeded random assignments (each scene swapped
  with probability 1/2; ``EVAL_PAIRED_PERMUTATIONS``, 999 by default),
  p = (1 + #{|T*| >= |T_obs|}) / (1 + B), the observed split counted among its
  own permutations (Phipson and Smyth 2010, "Permutation p-values should never
  be zero"), which keeps the test's size at or below the level for any B.
  Block j of ``SWAPS_PER_BLOCK`` swaps is ``default_rng([SEED, j]).integers(0,
  2, (rows, S), dtype=bool)``, S the scenes in ``bootstrap.scene_index``'s
  order: the p-value is reproducible, on CPU or GPU.

How a track's statistic sees a swap: ``Track.stack(a, b)`` puts both
submissions' outcomes side by side as 2n units (A's, then B's), such that the
statistic of the stacked outcomes with weights w (rows, 2n) is the metric of A's
units weighted by w[:, :n] together with B's weighted by w[:, n:], scored as one
submission. A swap s (S,) bool then gives A* = statistic([1 - s, s]) and
B* = statistic([s, 1 - s]) (s taken at each unit's scene): both are rows of
one block handed to ``bootstrap.run_blocks``, the same machinery (threads,
memory bound, device) as the bootstrap's resamples.

|T*| >= |T_obs| is compared within ``RELATIVE_TOLERANCE`` (and
``ABSOLUTE_TOLERANCE``): the identity and the observed value are the same
sums taken in a different order, and a difference in their last bits must not
decide (``scipy.stats.permutation_test`` does the same).

Why this test and not the bootstrap's p: the paired bootstrap's p-value called
two equally good methods different 18 % of the time on 4 scenes and about 8 %
on 8-20 (issue 34); the permutation test is exact under the null, and its
false-positive rate is measured by ``benchmarks/paired_fpr.py``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

from evaluation_workers.metrics import bootstrap

TEST = "paired-permutation-by-scene"
"""The name a finding carries (``contracts.PAIRED_TEST_NAME``): the test that decides its p-value."""

EXACT_MAX_SCENES = 16  # 2^15 assignments computed at most: a few seconds on the tracks' shapes
# p-values in steps of 1/1000 (the bootstrap's were 2/1001): Holm over 49 pairs can still reach 0.05. The cost is
# 2 B statistic rows of 2n units (benchmarks/paired_fpr.py prints it per test).
DEFAULT_PERMUTATIONS = 999
SEED = 20261203
SWAPS_PER_BLOCK = bootstrap.BLOCK // 4  # two rows (A*, B*) of 2n units a swap: a bootstrap block's elements
RELATIVE_TOLERANCE = 1e-9
ABSOLUTE_TOLERANCE = 1e-12


class Unpaired(ValueError):
    """Two submissions' outcomes cannot be stacked (``Track.stack``): the words say why, naming no value."""


def permutations_setting() -> int:
    """``EVAL_PAIRED_PERMUTATIONS``: the random swaps of a Monte Carlo test (999 by default)."""
    raw = os.environ.get("EVAL_PAIRED_PERMUTATIONS") or str(DEFAULT_PERMUTATIONS)
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"Expected EVAL_PAIRED_PERMUTATIONS to be an integer, but got {raw!r}") from None
    if value < 1:
        raise ValueError(f"Expected EVAL_PAIRED_PERMUTATIONS >= 1, but got {value}")
    return value


def plan(n_scenes: int, permutations: int) -> tuple[int, bool]:
    """(assignments computed, exact): every assignment leaving the last scene unswapped when
    ``n_scenes <= EXACT_MAX_SCENES``, else ``permutations`` random ones."""
    if n_scenes <= EXACT_MAX_SCENES:
        return 1 << max(n_scenes - 1, 0), True
    return permutations, False


def swap_block(n_scenes: int, permutations: int, j: int, seed: int = SEED) -> np.ndarray:
    """Block j of the swapped assignments: (rows, S) bool, rows <= ``SWAPS_PER_BLOCK``."""
    count, exact = plan(n_scenes, permutations)
    rows = min(SWAPS_PER_BLOCK, count - j * SWAPS_PER_BLOCK)
    if exact:
        # Codes below 2^(S-1): bit k swaps scene k, and the last scene always stays.
        codes = np.arange(j * SWAPS_PER_BLOCK, j * SWAPS_PER_BLOCK + rows, dtype=np.int64)
        swapped: np.ndarray = ((codes[:, None] >> np.arange(n_scenes, dtype=np.int64)[None, :]) & 1).astype(bool)
        return swapped
    return np.random.default_rng([seed, j]).integers(0, 2, size=(rows, n_scenes), dtype=bool)


def swaps(n_scenes: int, permutations: int, seed: int = SEED) -> Iterator[np.ndarray]:
    """Every block of swapped assignments, in order (what ``paired_permutation`` computes)."""
    count, _ = plan(n_scenes, permutations)
    for j in range(-(-count // SWAPS_PER_BLOCK)):
        yield swap_block(n_scenes, permutations, j, seed)


def _pairs_of(swapped: np.ndarray) -> np.ndarray:
    """(r, S) swaps -> (2r, 2S) weights of the stacked scenes (A's S, then B's S): row 2i is A* of
    swap i, row 2i + 1 its B*."""
    keep = (~swapped).astype(np.float64)
    take = swapped.astype(np.float64)
    rows = np.empty((2 * swapped.shape[0], 2 * swapped.shape[1]), dtype=np.float64)
    rows[0::2] = np.concatenate([keep, take], axis=1)
    rows[1::2] = np.concatenate([take, keep], axis=1)
    return rows


def paired_permutation(
    stacked: bootstrap.Statistic, n_units: int, scenes: np.ndarray | None = None,
    permutations: int | None = None, seed: int = SEED, xp: Any = None, width: int = 1,
) -> dict[str, dict[str, Any]]:
    """The permutation test of A - B of every key of ``stacked`` (the statistic of ``Track.stack(a, b)``).

    Args:
        n_units: n, each submission's units (the stacked outcomes hold 2n).
        scenes: (n,) int64 each unit's scene (``bootstrap.scene_index``); None when the units are the scenes.
        permutations: B of a Monte Carlo test (``permutations_setting()`` when None).
        width: the widest (b, w) temporary of the statistic on the stacked outcomes.

    Returns:
        {key: {"difference": T_obs (None if undefined), "p_value": two-sided (None if undefined),
        "permutations": the assignments counted (2^S when exact, else B), "exact": bool}}.
    """
    permutations = permutations_setting() if permutations is None else permutations
    n_scenes = n_units if scenes is None else int(np.max(scenes, initial=-1)) + 1
    both = None if scenes is None else np.concatenate([scenes, scenes + n_scenes]).astype(np.int64)
    count, exact = plan(n_scenes, permutations)

    def identity(_: int) -> np.ndarray:
        return _pairs_of(np.zeros((1, n_scenes), dtype=bool))

    def block(j: int) -> np.ndarray:
        return _pairs_of(swap_block(n_scenes, permutations, j, seed))

    observed = bootstrap.run_blocks(stacked, 2 * n_units, 1, identity, xp, width, None, both)
    values = bootstrap.run_blocks(stacked, 2 * n_units, -(-count // SWAPS_PER_BLOCK), block, xp, width, None,
                                  both)
    found = {}
    for key, pair in observed.items():
        t_obs = float(pair[0] - pair[1])
        t_star = values[key][0::2] - values[key][1::2]
        found[key] = {"difference": t_obs if np.isfinite(t_obs) else None,
                      "p_value": _p_value(t_obs, t_star, exact),
                      "permutations": 2 * count if exact else count, "exact": exact}
    return found


def _p_value(t_obs: float, t_star: np.ndarray, exact: bool) -> float | None:
    """Two-sided p of ``t_obs`` among the assignments' ``t_star`` (those where it is defined)."""
    if not np.isfinite(t_obs):
        return None
    defined = t_star[np.isfinite(t_star)]
    if not defined.size:
        return None
    floor = abs(t_obs) - (ABSOLUTE_TOLERANCE + RELATIVE_TOLERANCE * abs(t_obs))
    extreme = int(np.count_nonzero(np.abs(defined) >= floor))
    if exact:  # the identity is among them
        return extreme / int(defined.size)
    return (1 + extreme) / (1 + int(defined.size))


def stack_units(a: Mapping[str, Any], b: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """``Track.stack`` of outcomes that are per-unit arrays only ((n, ...) each: SQA3D's answers,
    ScanRefer's hits): each array of A, then B's, along the units."""
    if set(a) != set(b):
        raise Unpaired("the two results' outcomes hold different fields (kept by different scorers)")
    return {key: np.concatenate([np.asarray(a[key]), np.asarray(b[key])]) for key in a}
