"""Retention of the per-unit outcomes (``contracts.PRUNE_OUTCOMES``), run by any worker of the track.

The site never reads the outcomes store. Instead, from time to time it sends
each track's keys that are still wanted (results with a board row, intervals
still to come) and a time before which the others may go
(``leaderboard/submissions/retention.py``); this task deletes the track's other
outcomes written before it (``outcomes.prune``). Outcomes written since are
kept whatever the list says: a result the site had not recorded when it listed
them, or one scored within the site's grace.
"""

from __future__ import annotations

import logging
from typing import Any

from evaluation_workers import contracts, outcomes
from evaluation_workers.worker.app import app

log = logging.getLogger(__name__)


@app.task(name=contracts.PRUNE_OUTCOMES, acks_late=True, soft_time_limit=1800, time_limit=1860,
          ignore_result=True)
def prune_outcomes(**request: Any) -> None:
    if request.get("schema") != contracts.SCHEMA_VERSION:
        log.error("Dropping prune request with schema %r", request.get("schema"))
        return
    track = str(request["track"])
    folder = f"{track}/"
    keep = {str(key) for key in request["keep"]}
    if any(not key.startswith(folder) for key in keep):
        log.error("Dropping prune request of %s: it lists keys of another track", track)
        return
    try:
        outcomes.prune(folder, keep, float(request["written_before"]))
    except outcomes.StoreError:
        pass  # logged there; the next request tries again
