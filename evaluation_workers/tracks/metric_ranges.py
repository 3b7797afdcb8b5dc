"""What a score of a track may be: the keys that name one of its columns, and each metric's range.

Scores copied from papers (a bundle's ``paper_rows``) are checked here, so that ``EM: 21.0``
(a percentage) is refused rather than drawn as 2100.0 and a metric the track lacks is
refused rather than stored. ``metric_range`` is the one place that says a metric's range:
today every metric of every track is a fraction in [0, 1] (docs/metrics.md); once tracks
declare per-metric specs (direction, range, unit), it reads them from the track.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from evaluation_workers.tracks.base import Track


@dataclass(frozen=True)
class MetricRange:
    """The values a metric may take, and what such a value is called in messages."""

    low: float = 0.0
    high: float = 1.0
    kind: str = "a fraction"

    def refusal(self, value: float) -> str | None:
        """Why ``value`` is not a value of this metric, or None."""
        if math.isfinite(value) and self.low <= value <= self.high:
            return None
        hint = ""
        if self == FRACTION and math.isfinite(value) and 1 < value <= 100:
            hint = f" (a percentage? {value:g} % is {value / 100:g})"
        return f"expected {self.kind} in [{self.low:g}, {self.high:g}], but got {value!r}{hint}"


FRACTION = MetricRange()


def metric_range(track: Track, metric: str) -> MetricRange:
    """The range of ``metric`` of ``track``: for now the same for all (a fraction in [0, 1])."""
    return FRACTION


def score_metric(track: Track, key: str) -> str | None:
    """The metric a flat score key names (``EM``, or ``What/EM`` with a group of the track), or None."""
    group, _, metric = key.rpartition("/")
    if metric not in track.metrics or (group and group not in track.groups):
        return None
    return metric


def score_refusal(track: Track, key: str, value: float | None) -> str | None:
    """Why ``key: value`` is not a score of ``track`` (an unknown column, a value out of range), or None."""
    metric = score_metric(track, key)
    if metric is None:
        groups = f" or <group>/<metric> with a group of {', '.join(track.groups)}" if track.groups else ""
        return f"unknown score {key!r}; expected a metric of {track.name} ({', '.join(track.metrics)}){groups}"
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return f"expected a number (or null), but got {value!r}"
    return metric_range(track, metric).refusal(value)
