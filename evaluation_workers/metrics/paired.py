"""Is the difference between two submissions on the same split significant?

Two tests, both paired on the split's units (the same questions, prompts or
scenes scored for both submissions, labels checksum equal):

- ``paired_bootstrap``: the bootstrap's resamples (``bootstrap.replicates``,
  same seed and blocks as the intervals), each drawn once and applied to both
  submissions, give the distribution of the difference A - B of a metric's
  exact value. The interval is its percentile interval at ``bootstrap.LEVEL``;
  the two-sided p-value is ``min(1, 2 (k + 1) / (B + 1))`` with k the number
  of resamples on the far side of 0 (``<= 0`` or ``>= 0``, the smaller) and B
  the resamples where the difference is defined: the add-one rule keeps a
  p-value from being 0 with finitely many resamples (Davison and Hinkley,
  "Bootstrap Methods and their Application", section 4.4).
- ``mcnemar``: for a metric that is a mean of per-unit hits (SQA3D's EM), the
  exact McNemar test: of the n units where exactly one submission is right,
  A is right on k; under "equally good" k ~ Binomial(n, 1/2); the two-sided
  p-value is ``min(1, 2 P(K <= min(k, n - k)))``, computed with integers.

``SIGNIFICANCE`` is the level below which a difference counts as significant.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from evaluation_workers.metrics import bootstrap, confidence

SIGNIFICANCE = 0.05


def bootstrap_p_value(differences: np.ndarray) -> float | None:
    """Two-sided p-value of "no difference" from resampled differences; None when none is defined."""
    finite = differences[np.isfinite(differences)]
    if not finite.size:
        return None
    far = min(int((finite <= 0).sum()), int((finite >= 0).sum()))
    return min(1.0, 2.0 * (far + 1) / (int(finite.size) + 1))


def paired_bootstrap(
    statistic_a: bootstrap.Statistic, statistic_b: bootstrap.Statistic, n_units: int, metric: str,
    resamples: int, seed: int = bootstrap.SEED, xp: Any = None, width: int = 1,
) -> dict[str, Any]:
    """A - B of ``metric`` on the same resamples of ``n_units`` units.

    Returns:
        {"test": "paired-bootstrap", "difference": observed A - B (None if undefined),
         "p_value", "interval": [lo, hi] or None, "resamples"}.
    """
    def difference(counts: Any) -> dict[str, Any]:
        return {"d": statistic_a(counts)[metric] - statistic_b(counts)[metric]}

    observed = _at_unit_counts(difference, n_units, xp)
    values = bootstrap.replicates(difference, n_units, resamples, seed, xp, width)["d"]
    return {"test": "paired-bootstrap", "difference": observed, "p_value": bootstrap_p_value(values),
            "interval": confidence.percentile_interval(values), "resamples": resamples}


def _at_unit_counts(difference: bootstrap.Statistic, n_units: int, xp: Any) -> float | None:
    from evaluation_workers._xp import backend, to_device, to_numpy

    value = float(to_numpy(difference(to_device(np.ones((1, n_units)), xp or backend()))["d"])[0])
    return None if math.isnan(value) else value


def mcnemar(hits_a: np.ndarray, hits_b: np.ndarray) -> dict[str, Any]:
    """Exact McNemar test of two submissions' per-unit hits ((n,) bool each, the same units).

    Returns:
        {"test": "mcnemar-exact", "difference": mean(a) - mean(b), "p_value",
         "only_a": units only A got right, "only_b": units only B got right}.
    """
    a, b = np.asarray(hits_a, dtype=bool), np.asarray(hits_b, dtype=bool)
    only_a, only_b = int((a & ~b).sum()), int((~a & b).sum())
    n = only_a + only_b
    if n == 0:
        p = 1.0
    else:
        tail = sum(math.comb(n, i) for i in range(min(only_a, only_b) + 1))
        p = min(1.0, 2 * tail / 2**n)  # integers until the one division: exact for any n
    return {"test": "mcnemar-exact", "difference": float(a.mean() - b.mean()) if a.size else None,
            "p_value": p, "only_a": only_a, "only_b": only_b}
