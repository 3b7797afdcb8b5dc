"""Confidence intervals from bootstrap replicates: percentile, basic and BCa.

Each takes the (B,) resampled values of one statistic (NaN where a resample
leaves it undefined: those resamples are left out), and returns ``[lo, hi]``
at ``LEVEL`` or None when no resample defines the value. Quantiles are
``numpy.percentile``'s linear interpolation.

- ``percentile``: the alpha/2 and 1 - alpha/2 quantiles of the replicates.
- ``basic`` (reverse percentile): 2 theta - those quantiles, swapped.
- ``bca``: bias-corrected and accelerated (Efron 1987; Davison and Hinkley,
  "Bootstrap Methods and their Application", section 5.3.2): the quantiles
  are moved by z0, the normal quantile of the share of replicates below the
  observed value (ties count half), and by the acceleration ``a`` from the
  jackknife (the statistic with each scene left out in turn).

Which of them the service uses is settled by measured coverage
(``benchmarks/coverage.py``), not assumed.
"""

from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np

LEVEL = 0.95
METHODS = ("percentile", "basic", "bca")
_NORMAL = NormalDist()


def _defined(values: np.ndarray) -> np.ndarray:
    values = np.asarray(values, dtype=np.float64)
    finite: np.ndarray = values[np.isfinite(values)]
    return finite


def percentile_interval(values: np.ndarray, level: float = LEVEL) -> list[float] | None:
    """[lo, hi] of the defined values; None when no resample defines the value."""
    finite = _defined(values)
    if not finite.size:
        return None
    tail = 100.0 * (1.0 - level) / 2.0
    lo, hi = np.percentile(finite, [tail, 100.0 - tail])
    return [float(lo), float(hi)]


def basic_interval(values: np.ndarray, observed: float, level: float = LEVEL) -> list[float] | None:
    """2 theta - the percentile interval's ends, swapped; None when theta or every replicate is undefined."""
    found = percentile_interval(values, level)
    if found is None or not math.isfinite(observed):
        return None
    return [2.0 * observed - found[1], 2.0 * observed - found[0]]


def acceleration(jack: np.ndarray) -> float:
    """BCa's ``a`` from the leave-one-scene-out values (undefined ones left out): the skewness of the
    jackknife's influence values over 6; 0 when they do not vary."""
    finite = _defined(jack)
    if finite.size < 2:
        return 0.0
    d = finite.mean() - finite
    spread = float((d**2).sum())
    return 0.0 if spread <= 0.0 else float((d**3).sum()) / (6.0 * spread**1.5)


def bca_interval(values: np.ndarray, observed: float, jack: np.ndarray | None,
                 level: float = LEVEL) -> list[float] | None:
    """BCa interval; the percentile interval where theta is undefined or every replicate equals it."""
    finite = _defined(values)
    if not finite.size:
        return None
    if not math.isfinite(observed):
        return percentile_interval(finite, level)
    below = float((finite < observed).sum()) + 0.5 * float((finite == observed).sum())
    share = min(max(below / finite.size, 0.5 / finite.size), 1.0 - 0.5 / finite.size)
    z0 = _NORMAL.inv_cdf(share)
    a = acceleration(np.empty(0) if jack is None else jack)
    ends = []
    for alpha in ((1.0 - level) / 2.0, (1.0 + level) / 2.0):
        z = z0 + _NORMAL.inv_cdf(alpha)
        denominator = 1.0 - a * z
        # A huge acceleration folds the adjusted quantile over; keep it at the far end then.
        adjusted = _NORMAL.cdf(z0 + z / denominator) if denominator > 0 else (0.0 if alpha < 0.5 else 1.0)
        ends.append(100.0 * adjusted)
    lo, hi = np.percentile(finite, ends)
    return [float(lo), float(hi)]


def interval(method: str, values: np.ndarray, observed: float = math.nan,
             jack: np.ndarray | None = None, level: float = LEVEL) -> list[float] | None:
    """The interval of ``values`` by ``method`` (one of ``METHODS``)."""
    if method == "percentile":
        return percentile_interval(values, level)
    if method == "basic":
        return basic_interval(values, observed, level)
    if method == "bca":
        return bca_interval(values, observed, jack, level)
    raise ValueError(f"Expected an interval method in {METHODS}, but got {method!r}")
