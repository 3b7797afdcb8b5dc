"""IoU thresholds in metric names (MMScan's ``gTop-1@0.25``): pages show one at a time.

A track whose metrics name two or more thresholds after ``@`` gets a toggle (``iou`` in the
URL): the board and compare switch their metric to the same one at the other threshold; the
method and paper-row pages show the metrics of one threshold (7 of MMScan's 14 columns).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

MARK = "@"


def threshold_of(metric: str) -> str | None:
    """``"0.25"`` for ``"gTop-1@0.25"``; None for a metric without a threshold."""
    return metric.rpartition(MARK)[2] if MARK in metric else None


def thresholds(spec: Any) -> list[str]:
    """The thresholds the track's metrics name, in their order; [] when fewer than two (no toggle)."""
    found = list(dict.fromkeys(t for t in map(threshold_of, spec.metrics) if t is not None))
    return found if len(found) > 1 else []


def metric_at(metric: str, threshold: str) -> str:
    """The same metric at ``threshold`` (``AR@0.25`` -> ``AR@0.5``); a metric without one is itself."""
    return f"{metric.rpartition(MARK)[0]}{MARK}{threshold}" if MARK in metric else metric


def metrics_at(spec: Any, threshold: str | None) -> list[str]:
    """The track's metrics shown at ``threshold``: those of that threshold and those without one
    (every metric where the track has no toggle, or ``threshold`` is None)."""
    if threshold is None or not thresholds(spec):
        return list(spec.metrics)
    return [m for m in spec.metrics if threshold_of(m) in (None, threshold)]


def chosen(spec: Any, query: Mapping[str, str]) -> str | None:
    """The threshold the URL's ``iou`` asks for, if the track has it; else the primary metric's
    (None for a track without a toggle)."""
    options = thresholds(spec)
    if not options:
        return None
    asked = query.get("iou")
    return asked if asked in options else threshold_of(spec.primary_metric) or options[0]


def links(spec: Any, shown: str | None, href: Any) -> list[tuple[str, str, bool]]:
    """The toggle: ``(threshold, href(threshold), is_shown)`` for each of the track's thresholds."""
    return [(t, href(t), t == shown) for t in thresholds(spec)]
