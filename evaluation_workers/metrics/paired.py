"""Is the difference between two submissions on the same split significant?

One test for every metric of every track, paired on the split's units (the
same questions, prompts or scenes scored for both submissions, labels
checksum equal): ``paired_bootstrap``. The bootstrap's resamples of scenes
(``bootstrap.replicates``, the same draws as the intervals), each drawn once
and applied to both submissions, give the distribution of the difference
A - B of every key of the track's statistic (each metric overall and per
group), recomputed exactly on the resample. One pass answers every key.
Each key's interval is its percentile interval at ``bootstrap.LEVEL``; its
two-sided p-value is ``min(1, 2 (k + 1) / (B + 1))`` with k the number of
resamples on the far side of 0 (``<= 0`` or ``>= 0``, the smaller) and B the
resamples where the difference is defined: the add-one rule keeps a p-value
from being 0 with finitely many resamples (Davison and Hinkley, "Bootstrap
Methods and their Application", section 4.4).

The p-values are raw: the site adjusts those it shows together for
multiplicity (``leaderboard.rankings.multiplicity``). McNemar's exact test,
once used for SQA3D's EM, is gone: it assumes independent questions, and
questions come in scenes.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from evaluation_workers.metrics import bootstrap, confidence

TEST = "paired-bootstrap-by-scene"
"""The name a finding carries (``contracts.PairedFinding``): how the resamples were drawn."""


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
        {key: {"test": TEST, "difference": observed A - B (None if undefined),
        "p_value" (None if no resample defines it), "interval": [lo, hi] or None}}.
    """
    def difference(counts: Any) -> dict[str, Any]:
        a, b = statistic_a(counts), statistic_b(counts)
        return {key: a[key] - b[key] for key in a if key in b}

    observed = _at_unit_counts(difference, n_units, xp)
    values = bootstrap.replicates(difference, n_units, resamples, seed, xp, width, **draw)
    return {key: {"test": TEST, "difference": observed[key], "p_value": bootstrap_p_value(values[key]),
                  "interval": confidence.percentile_interval(values[key])} for key in observed}


def _at_unit_counts(difference: bootstrap.Statistic, n_units: int, xp: Any) -> dict[str, float | None]:
    """Every key of ``difference`` on the data as it is (each unit once); None where undefined."""
    from evaluation_workers._xp import backend, to_device, to_numpy

    found = difference(to_device(np.ones((1, n_units)), xp or backend()))
    values = {key: float(to_numpy(v)[0]) for key, v in found.items()}
    return {key: None if math.isnan(v) else v for key, v in values.items()}
