"""Intervals computed after the score is shown (``contracts.COMPUTE_INTERVALS``).

When the bootstrap would hold a CPU worker for minutes (``bootstrap.deferred``:
MMScan's full test split), the scorer leaves the intervals out of the result
(``"bootstrap": {"deferred": true}``) and the scoring task reports the result.
The site, once it has recorded it, asks for the intervals on the track's bulk
queue (where the request waits behind every new submission), naming the result
and its revision (``contracts.IntervalsRequest``); whichever worker host takes
it reloads the per-unit outcomes the scoring task kept (``outcomes``, a store
every worker reads), computes the intervals exactly as the scorer would have,
and reports them to the site (``contracts.RECORD_INTERVALS``) with the same
result and revision: the site takes them only while the result is at that
revision and still waits for them.

It always answers: intervals, or an error in words that the site records on
the result (outcomes missing; a store that cannot be read now, with ``retry``,
and the site's sweeper asks again later; an internal error). Outcomes that
could not be stored when the result was scored are said in the result itself
(``bootstrap.unavailable``), and the site never asks.
"""

from __future__ import annotations

import logging
from typing import Any

from evaluation_workers import contracts, outcomes
from evaluation_workers.metrics import bootstrap
from evaluation_workers.results import _clean
from evaluation_workers.tracks import get_track
from evaluation_workers.worker.app import app

log = logging.getLogger(__name__)
REPORT_RETRY = {"max_retries": 60, "interval_start": 0.5, "interval_step": 0.5, "interval_max": 3}

MISSING = "the per-unit outcomes of this result are no longer kept"
NOT_KEPT = "the per-unit outcomes of this result could not be stored when it was scored"
UNREADABLE = "the per-unit outcomes could not be read (the store was unavailable)"
INTERNAL = "internal error"


def compute(track_name: str, kept: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """``(intervals, bootstrap)`` of a result from its kept outcomes (None when resampling is off)."""
    from evaluation_workers._xp import backend

    track = get_track(track_name)
    assert track.statistic is not None and track.units_of is not None
    scenes = track.scenes_of(kept) if track.scenes_of else None
    if track.scenes_of and scenes is None:
        raise ValueError(f"The kept {track_name} outcomes name no scenes (kept by an older scorer): no intervals")
    found = bootstrap.intervals(track.statistic(kept), track.units_of(kept), track.unit, xp=backend(),
                                width=track.width(kept) if track.width else 1, scenes=scenes,
                                groups=track.groups_of(kept) if track.groups_of else None,
                                min_scenes=track.min_scenes)
    return None if found is None else (_clean(found[0]), _clean(found[1]))


def report_failure(request: dict[str, Any], error: str, *, retry: bool = False) -> None:
    """Tell the site that the intervals ``request`` asked for were not computed, and why."""
    log.warning("No intervals for submission %s (result %s, revision %s): %s", request["submission_id"],
                request["result_id"], request["revision"], error)
    _answer(request, {}, {}, error=error, retry=retry)


def _answer(request: dict[str, Any], intervals: dict[str, Any], bootstrap: dict[str, Any], **failed: Any) -> None:
    """Report to the site, repeating of the request the state the answer was computed for."""
    report = contracts.IntervalsReport(submission_id=request["submission_id"], result_id=request["result_id"],
                                       revision=request["revision"], intervals=intervals, bootstrap=bootstrap)
    app.send_task(contracts.RECORD_INTERVALS, queue=request["reply_queue"], retry=True, retry_policy=REPORT_RETRY,
                  kwargs={**report, **failed})


@app.task(name=contracts.COMPUTE_INTERVALS, acks_late=True, soft_time_limit=3600, time_limit=3660,
          ignore_result=True)
def compute_intervals(**request: Any) -> None:
    if request.get("schema") != contracts.SCHEMA_VERSION:
        log.error("Dropping intervals request with schema %r", request.get("schema"))
        return
    try:
        kept = outcomes.load(request["outcomes_key"])
    except outcomes.StoreError:
        report_failure(request, UNREADABLE, retry=True)
        return
    if kept is None:
        report_failure(request, MISSING)
        return
    try:
        found = compute(request["track"], kept)
    except Exception:  # never the message: it could quote an outcome
        log.exception("Intervals of submission %s failed", request["submission_id"])
        report_failure(request, INTERNAL)
        return
    if found is None:
        report_failure(request, "resampling is turned off on the worker that computed them")
        return
    _answer(request, found[0], found[1])
