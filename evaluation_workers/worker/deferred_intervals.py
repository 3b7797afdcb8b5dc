"""Intervals computed after the score is shown (``contracts.COMPUTE_INTERVALS``).

When the bootstrap would hold a CPU worker for minutes (``bootstrap.deferred``:
MMScan's full test split), the scorer leaves the intervals out of the result
(``"bootstrap": {"deferred": true}``), the scoring task reports the result and
then sends this task to the track's bulk queue, where it waits behind every
new submission; it reloads the per-unit outcomes the scoring task kept
(``outcomes``), computes the intervals exactly as the scorer would have, and
reports them to the site (``contracts.RECORD_INTERVALS``). A follow-up that is
lost leaves the result without intervals until it is scored again.
"""

from __future__ import annotations

import logging
from typing import Any

from evaluation_workers import contracts, outcomes, queues
from evaluation_workers.metrics import bootstrap
from evaluation_workers.results import _clean
from evaluation_workers.tracks import get_track
from evaluation_workers.worker.app import app

log = logging.getLogger(__name__)
REPORT_RETRY = {"max_retries": 60, "interval_start": 0.5, "interval_step": 0.5, "interval_max": 3}


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


def request_later(submission_id: int, result: dict[str, Any], reply_queue: str) -> None:
    """Send the follow-up of a result whose intervals were deferred, to this worker's bulk queue."""
    from evaluation_workers._xp import device_name

    track = result["track"]
    key = contracts.outcomes_key(track, result["labels_sha256"], result["predictions_sha256"],
                                 result["scorer_version"])
    request = contracts.IntervalsRequest(schema=contracts.SCHEMA_VERSION, submission_id=submission_id, track=track,
                                         scorer_version=result["scorer_version"], outcomes_key=key,
                                         reply_queue=reply_queue)
    queue = queues.queue_name(queues.bases()[device_name()], track, result["scorer_version"], bulk=True)
    app.send_task(contracts.COMPUTE_INTERVALS, kwargs=dict(request), queue=queue, retry=True,
                  retry_policy=REPORT_RETRY)


@app.task(name=contracts.COMPUTE_INTERVALS, acks_late=True, soft_time_limit=3600, time_limit=3660,
          ignore_result=True)
def compute_intervals(**request: Any) -> None:
    if request.get("schema") != contracts.SCHEMA_VERSION:
        log.error("Dropping intervals request with schema %r", request.get("schema"))
        return
    kept = outcomes.load(request["outcomes_key"])
    if kept is None:
        log.warning("No outcomes for the intervals of submission %s", request["submission_id"])
        return
    found = compute(request["track"], kept)
    if found is None:
        return
    app.send_task(contracts.RECORD_INTERVALS, queue=request["reply_queue"], retry=True, retry_policy=REPORT_RETRY,
                  kwargs={"submission_id": request["submission_id"], "scorer_version": request["scorer_version"],
                          "intervals": found[0], "bootstrap": found[1]})
