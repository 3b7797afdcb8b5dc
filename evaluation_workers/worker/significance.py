"""The paired-test task: how do A's scores differ from B's on the same split?

The site asks by name (``contracts.PAIRED_TEST``) with the two results'
outcome keys; this task loads both submissions' per-unit outcomes
(``outcomes``, worker-only, shared by every worker host), runs the paired test once for every metric
overall and per group (``metrics.paired``: the scene-level permutation test's p-value, the scene
bootstrap's interval), and reports only aggregates (``contracts.PairedTestReport``: per key the
observed difference, the raw p-value and the paired interval) to the site queue, with the two results'
revisions the request named.

A split with fewer scenes than the minimum of the intervals (``Track.min_scenes``,
``EVAL_BOOTSTRAP_MIN_SCENES``) gets no test: the answer is the error "too few scenes to test".
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np

from evaluation_workers import contracts, outcomes
from evaluation_workers.metrics import bootstrap, paired, permutation
from evaluation_workers.tracks import get_track
from evaluation_workers.worker.app import app
from evaluation_workers.worker.tasks import REPORT_RETRY

log = logging.getLogger(__name__)


def compare(track_name: str, a: dict[str, Any], b: dict[str, Any], resamples: int | None = None,
            permutations: int | None = None) -> dict[str, Any]:
    """Every key's test of A - B from both submissions' outcomes (``PairedTestReport`` less the id)."""
    track = get_track(track_name)
    assert track.statistic is not None and track.units_of is not None
    n = track.units_of(a)
    if n != track.units_of(b):
        return _failed("the two results cover different units")
    resamples = bootstrap.resamples_setting() if resamples is None else resamples
    if resamples <= 0:
        return _failed("resampling is turned off")
    scenes = track.scenes_of(a) if track.scenes_of else None
    if track.scenes_of and (scenes is None or not np.array_equal(scenes, track.scenes_of(b))):
        # Resampling units of one scene as independent claims more certainty than there is.
        return _failed("the outcomes name no scenes (kept by an older scorer), or not the same ones")
    n_scenes = n if scenes is None else int(scenes.max(initial=-1)) + 1
    least = bootstrap.min_scenes_setting(track.min_scenes)
    if n_scenes < least:
        # No test can be trusted there (an exact one over 4 scenes cannot go below p = 2/16), and the
        # intervals are withheld below the same minimum.
        return _failed(contracts.too_few_scenes(n_scenes, least))
    if track.stack is None:
        return _failed("this track's scorer gives no paired test")
    try:
        stacked = track.stack(a, b)
    except permutation.Unpaired as exc:
        return _failed(str(exc))
    width = max(track.width(a), track.width(b)) if track.width else 1
    # The same scenes drawn for both: the resamples of the intervals (bootstrap.replicates, same seed).
    findings = paired.paired_test(track.statistic(a), track.statistic(b), track.statistic(stacked), n, resamples,
                                  permutations, width=width, stacked_width=track.width(stacked) if track.width else 1,
                                  scenes=scenes, groups=track.groups_of(a) if track.groups_of else None,
                                  min_scenes=least)
    return {"findings": findings, "resamples": resamples, "error": ""}


def _failed(reason: str) -> dict[str, Any]:
    return {"findings": {}, "resamples": 0, "error": reason}


@app.task(name=contracts.PAIRED_TEST, acks_late=True, soft_time_limit=600, time_limit=660, ignore_result=True)
def paired_test(**request: Any) -> None:
    if request.get("schema") != contracts.SCHEMA_VERSION:
        log.error("Dropping paired-test request with schema %r", request.get("schema"))
        return
    try:
        a, b = outcomes.load(request["outcomes_a"]), outcomes.load(request["outcomes_b"])
    except outcomes.StoreError:
        # Not an answer: the test stays pending on the site, which asks again (PAIRED_TEST_RESEND_SECONDS).
        log.warning("Paired test %s not computed: the outcomes store could not be read", request.get("test_id"))
        return
    try:
        if a is None or b is None:
            report = _failed("outcomes unavailable")
        else:
            report = compare(request["track"], a, b)
    except Exception:
        # Never the message: it could quote an outcome.
        log.exception("Paired test %s failed", request.get("test_id"))
        report = _failed("internal error")
    # The answer names the results' revisions it was computed on: the site drops it once either moved on.
    answer = {"test_id": request["test_id"], "revision_a": request["revision_a"],
              "revision_b": request["revision_b"], **report}
    app.send_task(contracts.RECORD_PAIRED_TEST, kwargs=answer, queue=request["reply_queue"], retry=True,
                  retry_policy=REPORT_RETRY)
