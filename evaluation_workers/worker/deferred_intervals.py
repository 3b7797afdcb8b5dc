"""Intervals computed after the score is shown (``contracts.COMPUTE_INTERVALS``).

When the bootstrap would hold a CPU worker for minutes (``bootstrap.deferred``:
MMScan's full test split), the scorer leaves the intervals out of the result
(``"bootstrap": {"deferred": true}``), the scoring task reports the result and
then sends this task to the track's bulk queue, where it waits behind every
new submission; whichever worker host takes it reloads the per-unit outcomes
the scoring task kept (``outcomes``, a store every worker reads), computes the
intervals exactly as the scorer would have, and reports them to the site
(``contracts.RECORD_INTERVALS``).

It always answers: intervals, or an error in words that the site records on
the result (outcomes missing, or not kept because the store failed; a store
that cannot be read now, with ``retry``, and the site's sweeper asks again
later; an internal error). The site also sends this task itself when it asks
again (``leaderboard/submissions/lifecycle.py``).
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


def report_failure(submission_id: int, scorer_version: str, reply_queue: str, error: str, *,
                   retry: bool = False) -> None:
    """Tell the site that the intervals of this result were not computed, and why."""
    log.warning("No intervals for submission %s (scorer %s): %s", submission_id, scorer_version, error)
    report = contracts.IntervalsReport(submission_id=submission_id, scorer_version=scorer_version, intervals={},
                                       bootstrap={}, error=error, retry=retry)
    app.send_task(contracts.RECORD_INTERVALS, queue=reply_queue, retry=True, retry_policy=REPORT_RETRY,
                  kwargs=dict(report))


@app.task(name=contracts.COMPUTE_INTERVALS, acks_late=True, soft_time_limit=3600, time_limit=3660,
          ignore_result=True)
def compute_intervals(**request: Any) -> None:
    if request.get("schema") != contracts.SCHEMA_VERSION:
        log.error("Dropping intervals request with schema %r", request.get("schema"))
        return
    ids = (request["submission_id"], request["scorer_version"], request["reply_queue"])
    try:
        kept = outcomes.load(request["outcomes_key"])
    except outcomes.StoreError:
        report_failure(*ids, UNREADABLE, retry=True)
        return
    if kept is None:
        report_failure(*ids, MISSING)
        return
    try:
        found = compute(request["track"], kept)
    except Exception:  # never the message: it could quote an outcome
        log.exception("Intervals of submission %s failed", request["submission_id"])
        report_failure(*ids, INTERNAL)
        return
    if found is None:
        report_failure(*ids, "resampling is turned off on the worker that computed them")
        return
    app.send_task(contracts.RECORD_INTERVALS, queue=request["reply_queue"], retry=True, retry_policy=REPORT_RETRY,
                  kwargs={"submission_id": request["submission_id"], "scorer_version": request["scorer_version"],
                          "intervals": found[0], "bootstrap": found[1]})
