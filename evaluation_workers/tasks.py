"""The scoring task: fetch, score, report. Thin on purpose.

The task takes ids and storage keys (``contracts.ScoreRequest``), never data.
Every outcome is reported to the site queue named in the request: progress
while it runs, then exactly one of result or failure. User-fixable problems
(``SubmissionError``) are reported with their message; anything else is logged
here and reported as "Internal evaluation error", so no traceback, path or
label value reaches a page.
"""

from __future__ import annotations

import logging
import os
import time
from typing import Any

from celery.exceptions import SoftTimeLimitExceeded

from evaluation_workers import contracts
from evaluation_workers.app import app
from evaluation_workers.errors import SubmissionError
from evaluation_workers.storage import fetched_predictions, labels_path
from evaluation_workers.tracks import get_track

log = logging.getLogger(__name__)

SOFT_TIME_LIMIT = int(os.environ.get("EVAL_SOFT_TIME_LIMIT", 30 * 60))
TIME_LIMIT = int(os.environ.get("EVAL_TIME_LIMIT", 35 * 60))
# At most one progress message per this many seconds (the last one always goes).
PROGRESS_INTERVAL = 0.5
# The share of the progress bar that stands for fetching the predictions.
FETCHED = 0.05


class Reporter:
    """Sends progress, result or failure of one attempt to the site queue."""

    def __init__(self, request: contracts.ScoreRequest) -> None:
        self.ids = {"submission_id": request["submission_id"], "attempt": request["attempt"]}
        self.queue = request["reply_queue"]
        self._last = 0.0

    def _send(self, name: str, **kwargs: Any) -> None:
        app.send_task(name, kwargs={**self.ids, **kwargs}, queue=self.queue)

    def progress(self, fraction: float, message: str = "") -> None:
        now = time.monotonic()
        if now - self._last >= PROGRESS_INTERVAL or fraction >= 1.0:
            self._last = now
            self._send(contracts.RECORD_PROGRESS, fraction=max(0.0, min(1.0, fraction)), message=message)

    def result(self, result: dict[str, Any], seconds: float, device: str) -> None:
        self._send(contracts.RECORD_RESULT, result=result, seconds=seconds, device=device)

    def failure(self, kind: contracts.FailureKind, message: str) -> None:
        self._send(contracts.RECORD_FAILURE, kind=kind, message=message)


@app.task(name=contracts.SCORE_SUBMISSION, acks_late=True, soft_time_limit=SOFT_TIME_LIMIT,
          time_limit=TIME_LIMIT, ignore_result=True)
def score_submission(**request: Any) -> None:
    if request.get("schema") != contracts.SCHEMA_VERSION:
        log.error("Dropping score request with schema %r (expected %r)", request.get("schema"),
                  contracts.SCHEMA_VERSION)
        return
    run_score(contracts.ScoreRequest(**request))  # type: ignore[typeddict-item]


def run_score(request: contracts.ScoreRequest) -> None:
    """Score one submission and report the outcome; never raises for bad input."""
    from evaluation_workers._xp import device_name

    reporter = Reporter(request)
    started = time.monotonic()
    reporter.progress(0.0, "Fetching predictions")
    try:
        track = get_track(request["track"])
        with fetched_predictions(request["predictions_key"]) as predictions:
            # Fetching a multi-GB file from a bucket takes a while; show it as
            # the first few percent, and the scorer's own progress after it.
            reporter.progress(FETCHED, "Scoring")

            def progress(fraction: float, message: str = "") -> None:
                reporter.progress(FETCHED + (1.0 - FETCHED) * fraction, message)

            result = track.score(labels_path(request["labels_key"]), predictions, progress)
    except SubmissionError as exc:
        reporter.failure("invalid_input", exc.message)
    except SoftTimeLimitExceeded:
        reporter.failure("platform_error", f"Scoring took longer than the {SOFT_TIME_LIMIT // 60}-minute limit.")
    except Exception:
        log.exception("Scoring submission %s failed", request["submission_id"])
        reporter.failure("platform_error", "Internal evaluation error.")
    else:
        seconds = time.monotonic() - started
        log.info("Scored submission %s (%s) in %.2f s", request["submission_id"], request["track"], seconds)
        reporter.result(result, seconds, device_name())
