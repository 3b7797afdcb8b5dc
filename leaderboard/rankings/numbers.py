"""Scores as pages and charts write them, by each metric's spec (``Track.metric_spec``).

A fraction in [0, 1] (every metric of the built-in tracks) is written as a percentage with one
decimal (METRICS.md); a metric a track declares as a value with a unit (a localisation error in
cm) is written as it is, with its own decimals; a benchmark's ``board.precision`` may change the
decimals of either (``Benchmark.metric_spec``). One rule for values, differences and interval
bounds alike, ``p`` being the decimals shown:

- undefined (None, not a number): an em dash;
- zero, or closer to it than ``NOISE``: ``0.0`` (``p`` zeros), never ``-0.0`` (two results of one
  file differ by float round-off, and a paired difference turned round is ``-0.0``);
- not zero, but rounding to zero: its bound, ``<0.1`` (``<0.01`` with two decimals; PLA's mIoU of
  0.03 %), with a minus in front when negative (``-<0.1``): the sign, then the magnitude;
- otherwise the value (the percentage, for a fraction) rounded to ``p`` decimals.

A difference (``signed``) also writes ``+`` before a positive value (``+1.2``, ``+<0.1``),
so that its direction reads without colour; zero has no sign. Whether a difference is better
or worse depends on the metric's direction (``is_better``): a lower error is better.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from evaluation_workers.tracks.base import FRACTION, MetricSpec

# Values closer to zero than this are float noise, not a score: a billionth of a point.
NOISE = 1e-9
DASH = "—"


def as_fraction(value: Any) -> float | None:
    """``value`` as a float, or None where it is undefined (None, "", text that is no number, NaN)."""
    if value is None or value == "" or isinstance(value, bool):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return None if number != number else number  # NaN


def scaled(value: float, spec: MetricSpec = FRACTION) -> float:
    """``value`` in the unit pages show: a fraction as a percentage, a value as it is."""
    return value * 100 if spec.is_fraction else value


def number(value: Any, spec: MetricSpec = FRACTION, *, signed: bool = False) -> str:
    """A score (or a difference, ``signed``) as pages write it, by the module's rule."""
    found = as_fraction(value)
    if found is None:
        return DASH
    zero = f"{0:.{spec.precision}f}"
    if abs(found) < NOISE:
        return zero
    magnitude = f"{abs(scaled(found, spec)):.{spec.precision}f}"
    if magnitude == zero:
        magnitude = "<" + (f"{10 ** -spec.precision:.{spec.precision}f}" if spec.precision else "1")
    sign = "-" if found < 0 else ("+" if signed else "")
    return sign + magnitude


def percent(value: Any, *, signed: bool = False) -> str:
    """A fraction as a percentage with one decimal (a metric without a spec of its own)."""
    return number(value, FRACTION, signed=signed)


def unit_of(spec: MetricSpec) -> str:
    """What a number of this metric is counted in on pages: ``%``, or the value's unit ("" for none)."""
    return "%" if spec.is_fraction else spec.unit


def titled(metric: str, spec: MetricSpec) -> str:
    """``EM (%)``, ``error (cm)``, ``score``: a metric with the unit its numbers are shown in."""
    unit = unit_of(spec)
    return f"{metric} ({unit})" if unit else metric


def difference_unit(spec: MetricSpec) -> str:
    """What a difference of two values is counted in: ``points`` (of a percentage), or the unit."""
    return "points" if spec.is_fraction else (spec.unit or "units")


def is_better(spec: MetricSpec, a: float, b: float) -> bool:
    """Whether ``a`` is a better value than ``b`` for this metric (lower, where lower is better)."""
    return a < b if spec.lower_is_better else a > b


def best(spec: MetricSpec, values: Iterable[float]) -> float | None:
    """The best of ``values`` (the smallest where lower is better); None when there are none."""
    found = list(values)
    if not found:
        return None
    return min(found) if spec.lower_is_better else max(found)


def direction_words(spec: MetricSpec) -> str:
    """``higher is better`` or ``lower is better``."""
    return f"{spec.direction} is better"


def cleaned(value: float | None) -> float | None:
    """``value`` with float noise around zero made zero (a difference's direction reads from it)."""
    return 0.0 if value is not None and abs(value) < NOISE else value
