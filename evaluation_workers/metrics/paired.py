"""Is the difference between two submissions on the same split significant?

One test for every metric of every track, paired on the split's units (the
same questions, prompts or scenes scored for both submissions, labels
checksum equal), at once for every key (each metric overall and per group):
``paired_test``. Two computations, each with one job:

- the verdict and its p-value: the scene-level paired permutation test
  (``permutation``), exact under "no difference", its false-positive rate
  measured (``benchmarks/paired_fpr.py``);
- the interval of the difference shown beside it: the paired bootstrap
  (``paired_bootstrap``): the bootstrap's resamples of scenes
  (``bootstrap.replicates``, the same draws as the intervals), each drawn
  once and applied to both submissions, recompute A - B exactly; the
  interval is their percentile interval at ``bootstrap.LEVEL``.

The two can disagree (p < 0.05 with an interval that holds 0, or the
reverse); the p-value decides, and the site says so where they do. The
bootstrap's own p-value, ``min(1, 2 (k + 1) / (B + 1))`` with k the resamples
on the far side of 0 (Davison and Hinkley, "Bootstrap Methods and their
Application", section 4.4), is kept for the record and the benchmarks only:
it called equally good methods different 18 % of the time on 4 scenes and
about 8 % on 8-20.

A key of a group that spans fewer scenes than the minimum of the intervals
(``bootstrap.min_scenes_setting``) gets neither a p-value nor an interval,
as a whole split with fewer gets no test at all (``worker.significance``).
The p-values are raw: the site adjusts those it shows together for
multiplicity (``leaderboard.rankings.multiplicity``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from evaluation_workers.metrics import bootstrap, confidence, permutation

BOOTSTRAP = "paired-bootstrap-by-scene"
"""How the interval of the difference was drawn (and the test that decided before issue 34)."""


def bootstrap_p_value(differences: np.ndarray) -> float | None:
    """Two-sided p-value of "no difference" from resampled differences; None when none is defined."""
    finite = differences[np.isfinite(differences)]
    if not finite.size:
        return None
    far = min(int((finite <= 0).sum()), int((finite >= 0).sum()))
    return min(1.0, 2.0 * (far + 1) / (int(finite.size) + 1))


def paired_bootstrap(
    statistic_a: bootstrap.Statistic, statistic_b: bootstrap.Statistic, n_units: int, resamples: int,
    seed: int = bootstrap.SEED, xp: Any = None, width: int = 1, **draw: Any,
) -> dict[str, dict[str, Any]]:
    """A - B of every key both statistics give, on the same resamples of ``n_units`` units.

    Args:
        draw: passed on to ``bootstrap.replicates`` (how the resamples are drawn).

    Returns:
        {key: {"test": BOOTSTRAP, "difference": observed A - B (None if undefined),
        "p_value" (None if no resample defines it), "interval": [lo, hi] or None}}.
    """
    def difference(counts: Any) -> dict[str, Any]:
        a, b = statistic_a(counts), statistic_b(counts)
        return {key: a[key] - b[key] for key in a if key in b}

    observed = _at_unit_counts(difference, n_units, xp)
    values = bootstrap.replicates(difference, n_units, resamples, seed, xp, width, **draw)
    return {key: {"test": BOOTSTRAP, "difference": observed[key], "p_value": bootstrap_p_value(values[key]),
                  "interval": confidence.percentile_interval(values[key])} for key in observed}


def _at_unit_counts(difference: bootstrap.Statistic, n_units: int, xp: Any) -> dict[str, float | None]:
    """Every key of ``difference`` on the data as it is (each unit once); None where undefined."""
    from evaluation_workers._xp import backend, to_device, to_numpy

    found = difference(to_device(np.ones((1, n_units)), xp or backend()))
    values = {key: float(to_numpy(v)[0]) for key, v in found.items()}
    return {key: None if math.isnan(v) else v for key, v in values.items()}


def paired_test(
    statistic_a: bootstrap.Statistic, statistic_b: bootstrap.Statistic, stacked: bootstrap.Statistic,
    n_units: int, resamples: int, permutations: int | None = None, xp: Any = None, width: int = 1,
    stacked_width: int = 1, scenes: np.ndarray | None = None, groups: Mapping[str, np.ndarray] | None = None,
    min_scenes: int = 1,
) -> dict[str, dict[str, Any]]:
    """Every key's finding on A - B: the permutation test's p-value, the paired bootstrap's interval.

    Args:
        stacked: the statistic of ``Track.stack(a, b)`` (``permutation.paired_permutation``).
        scenes: (n,) int64 each unit's scene; None when the units are the scenes.
        groups: {group: (n,) bool} the units of each breakdown group: a "<group>/<metric>" key of a
            group spanning fewer than ``min_scenes`` scenes gets no p-value and no interval.

    Returns:
        {key: ``contracts.PairedFinding``}: "test" (``permutation.TEST``), "difference" (A - B as
        scored), "p_value", "interval", "permutations", "exact", "scenes" (those the key spans),
        "min_scenes"; each None where undefined.
    """
    boot = paired_bootstrap(statistic_a, statistic_b, n_units, resamples, xp=xp, width=width, scenes=scenes)
    tested = permutation.paired_permutation(stacked, n_units, scenes, permutations, xp=xp, width=stacked_width)
    n_scenes = n_units if scenes is None else int(np.max(scenes, initial=-1)) + 1
    spans = {group: _scenes_of(members, scenes) for group, members in (groups or {}).items()}
    found = {}
    for key, drawn in boot.items():
        group = key.split("/", 1)[0] if "/" in key else None
        test = tested.get(key, {})
        withheld = group is not None and spans.get(group, n_scenes) < min_scenes
        found[key] = {"test": permutation.TEST, "difference": drawn["difference"],
                      "p_value": None if withheld else test.get("p_value"),
                      "interval": None if withheld else drawn["interval"],
                      "permutations": test.get("permutations"), "exact": test.get("exact"),
                      "scenes": spans.get(group, n_scenes) if group else n_scenes, "min_scenes": min_scenes}
    return found


def _scenes_of(members: np.ndarray, scenes: np.ndarray | None) -> int:
    """How many scenes hold a group's units (``members`` (n,) bool)."""
    units = np.flatnonzero(np.asarray(members, bool))
    return int(units.shape[0] if scenes is None else np.unique(scenes[units]).shape[0])
