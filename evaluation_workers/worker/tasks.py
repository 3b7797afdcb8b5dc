"""The scoring task: claim, fetch, score, report. Thin on purpose.

The task takes ids and storage keys (``contracts.ScoreRequest``), never data.
Every outcome is reported to the site queue named in the request: progress
while it runs (and a heartbeat every ``EVAL_HEARTBEAT_SECONDS`` from a thread,
so a long inflate or IoU is never mistaken for a dead worker), then exactly
one of result or failure. User-fixable problems (``SubmissionError``) are
reported with their message; faults of the service (``PlatformError``: storage)
with theirs, refunded; anything else is logged here and reported as "Internal
evaluation error", so no traceback, path or label value reaches a page. Only
the bytes the site accepted are scored (``as_accepted``): a stored file that
changed since is the platform's fault, whatever the scorer made of it.

If the process scoring an attempt dies (killed, out of memory), the worker's
main process reports the attempt lost (``RECORD_LOST``) and the site sends a
new one; a worker that dies whole stops announcing itself, or starts again as
another instance, and the site's sweeper sends a new attempt within seconds
(``attempts``). A message of an attempt that is not current any more is
dropped unscored (``attempts.claim``). The result or failure is also kept in
the attempt's claim, where the sweeper finds it if the site worker that took
the message died before recording it.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from celery.exceptions import SoftTimeLimitExceeded, TimeLimitExceeded, WorkerLostError
from celery.signals import task_failure

from evaluation_workers import allocator, contracts, outcomes, partitions, signing
from evaluation_workers.errors import PlatformError, SubmissionError
from evaluation_workers.labels_cache import labels_for
from evaluation_workers.results import forget_ahead, hash_ahead, sha256_file
from evaluation_workers.storage import UNREADABLE, fetched_predictions
from evaluation_workers.tracks import get_track
from evaluation_workers.worker import attempts
from evaluation_workers.worker.app import app

log = logging.getLogger(__name__)

SOFT_TIME_LIMIT = int(os.environ.get("EVAL_SOFT_TIME_LIMIT", 30 * 60))
TIME_LIMIT = int(os.environ.get("EVAL_TIME_LIMIT", 35 * 60))
HEARTBEAT_SECONDS = float(os.environ.get("EVAL_HEARTBEAT_SECONDS", 20))
# Fault-injection tests only: a folder whose file "hold-scoring" holds each attempt
# (beating) for as many seconds as it says, before scoring it.
FAULT_DIR = os.environ.get("EVAL_FAULT_DIR", "")
# At most one progress message per this many seconds (the last one always goes).
PROGRESS_INTERVAL = 0.5
# The share of the progress bar that stands for fetching the predictions.
FETCHED = 0.05
# Reports survive a broker restart of a minute or two: the worker keeps trying to send.
REPORT_RETRY = {"max_retries": 60, "interval_start": 0.5, "interval_step": 0.5, "interval_max": 3}


def node_name() -> str:
    """The Celery node name of this worker (what ``presence`` announces)."""
    from celery import current_task

    return str(getattr(getattr(current_task, "request", None), "hostname", None) or socket.gethostname())


def worker_name() -> str:
    """``<celery node name>:<pid>`` of the process scoring."""
    return f"{node_name()}:{os.getpid()}"


class Reporter:
    """Sends progress, heartbeats, result or failure of one attempt to the site queue."""

    def __init__(self, request: contracts.ScoreRequest) -> None:
        self.ids = {"submission_id": request["submission_id"], "attempt": request["attempt"]}
        self.queue = request["reply_queue"]
        self.node = node_name()
        self.worker = f"{self.node}:{os.getpid()}"
        self.reported = False
        self._last = 0.0

    def _send(self, name: str, **kwargs: Any) -> None:
        app.send_task(name, kwargs={**self.ids, **kwargs}, queue=self.queue, retry=True,
                      retry_policy=REPORT_RETRY)

    def _report(self, name: str, **kwargs: Any) -> None:
        """The attempt's one outcome: kept in its claim (signed), then sent as that same message (its nonce)."""
        report = {**self.ids, **kwargs}
        kept = signing.signed(name, report, signing.worker_keys())
        attempts.keep_report(self.ids["submission_id"], self.ids["attempt"], self.node, name, kept)
        self.reported = True
        app.send_task(name, kwargs=report, queue=self.queue, retry=True, retry_policy=REPORT_RETRY,
                      nonce=kept[signing.NONCE])

    def progress(self, fraction: float, message: str = "") -> None:
        now = time.monotonic()
        if now - self._last >= PROGRESS_INTERVAL or fraction >= 1.0:
            self._last = now
            self._send(contracts.RECORD_PROGRESS, fraction=max(0.0, min(1.0, fraction)), message=message,
                       worker=self.worker)

    def heartbeat(self) -> None:
        self._send(contracts.RECORD_HEARTBEAT, worker=self.worker)

    def result(self, result: dict[str, Any], seconds: float, device: str,
               more_results: list[dict[str, Any]] | None = None) -> None:
        extra = {"more_results": more_results} if more_results else {}
        self._report(contracts.RECORD_RESULT, result=result, seconds=seconds, device=device, worker=self.worker,
                     **extra)

    def failure(self, kind: contracts.FailureKind, message: str) -> None:
        self._report(contracts.RECORD_FAILURE, kind=kind, message=message)


@contextmanager
def beating(reporter: Reporter, submission_id: int, attempt: int) -> Iterator[None]:
    """Send a heartbeat every HEARTBEAT_SECONDS until the block ends."""
    stop = threading.Event()

    def beat() -> None:
        while not stop.wait(HEARTBEAT_SECONDS):
            try:
                reporter.heartbeat()
            except Exception as exc:  # noqa: BLE001 - a missed beat is retried; the sweeper is patient
                log.warning("Heartbeat of submission %s failed: %s", submission_id, exc)

    thread = threading.Thread(target=beat, name=f"heartbeat-{submission_id}", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(5)


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
    submission_id, attempt = request["submission_id"], request["attempt"]
    claim = attempts.claim(submission_id, attempt, node_name())
    if claim == "unnoted":
        log.warning("Skipping submission %s attempt %s: the site has not noted it as current (its attempt "
                    "ended over a week ago, or the note was not written; then the site sends a new attempt; "
                    "or BROKER_KEY_PREFIX differs between the site and this worker)", submission_id, attempt)
        return
    if claim != "ok":
        log.info("Skipping submission %s attempt %s: %s", submission_id, attempt, claim)
        return
    reporter = Reporter(request)
    try:
        with beating(reporter, submission_id, attempt):
            _score(request, reporter)
    finally:
        if not reporter.reported:
            attempts.release(submission_id, attempt)
        allocator.release()  # what the scorer's temporaries kept in the heap


def _score(request: contracts.ScoreRequest, reporter: Reporter) -> None:
    from evaluation_workers._xp import device_name

    started = time.monotonic()
    reporter.progress(0.0, "Fetching predictions")
    if FAULT_DIR:
        try:
            time.sleep(float(Path(FAULT_DIR, "hold-scoring").read_text()))
        except (OSError, ValueError):
            pass
    try:
        track = get_track(request["track"])
        per_unit: dict[str, Any] = {}
        with fetched_predictions(request["predictions_key"]) as predictions, as_accepted(request, predictions):
            # Fetching a multi-GB file from a bucket takes a while; show it as
            # the first few percent, and the scorer's own progress after it.
            reporter.progress(FETCHED, "Scoring")

            def progress(fraction: float, message: str = "") -> None:
                reporter.progress(FETCHED + (1.0 - FETCHED) * fraction, message)

            with labels_for(request["labels_key"]) as labels:
                # Labels with a public subset give two results: the public one first, then the private.
                results = partitions.score(track, labels, predictions, progress, outcomes=per_unit)
        kept = _keep_outcomes(track.name, results[0], per_unit) if per_unit else False
        if results[0].get("bootstrap", {}).get("deferred") and not kept:
            # Nothing to compute them from: the site records the result as without intervals, and why,
            # rather than asking for them (``lifecycle.record_result``).
            from evaluation_workers.worker.deferred_intervals import NOT_KEPT

            results[0]["bootstrap"] = {**results[0]["bootstrap"], "unavailable": NOT_KEPT}
    except SubmissionError as exc:
        reporter.failure("invalid_input", exc.message)
    except PlatformError as exc:
        reporter.failure("platform_error", exc.message)
    except SoftTimeLimitExceeded:
        reporter.failure("platform_error", f"Scoring took longer than the {SOFT_TIME_LIMIT // 60}-minute limit. "
                                           "It does not count against your quota.")
    except MemoryError:
        log.exception("Scoring submission %s ran out of memory", request["submission_id"])
        reporter.failure("platform_error", "Scoring ran out of memory. It does not count against your quota; "
                                           "the maintainers have been told.")
    except Exception:
        log.exception("Scoring submission %s failed", request["submission_id"])
        reporter.failure("platform_error", "Internal evaluation error. It does not count against your quota.")
    else:
        seconds = time.monotonic() - started
        log.info("Scored submission %s (%s) in %.2f s", request["submission_id"], request["track"], seconds)
        # The score is shown; where its intervals were deferred, the site asks for them once it has
        # recorded the result (its revision named), and another task computes them
        # (``deferred_intervals``). Only a result over every unit is deferred (partition results are
        # never: ``partitions.partition_result``).
        reporter.result(results[0], seconds, device_name(), results[1:])


CHANGED = ("The stored file is not the one that was accepted (its checksum changed since the upload): a "
           "fault of the service, not of your file. It does not count against your quota; the maintainers "
           "have been told.")


@contextmanager
def as_accepted(request: contracts.ScoreRequest, predictions: Path) -> Iterator[None]:
    """Let the block's outcome stand only if ``predictions`` holds the bytes the site accepted
    (``predictions_sha256``); otherwise raise ``PlatformError`` in its place.

    The checksum starts on a thread as soon as the file is fetched (``results.hash_ahead``), and the
    track's own ``sha256_file`` of the file takes it from there: the file is hashed once, beside the
    scoring. It is compared when the block ends, however it ends: a file changed or truncated since
    it was accepted gets no score and no format error (its ``SubmissionError`` is replaced), only
    the platform's fault, refunded. A request without a checksum (an older site's) scores as before.
    """
    expected = request.get("predictions_sha256") or ""
    if not expected:
        yield
        return
    hash_ahead(predictions)
    try:
        yield
    finally:
        try:
            actual = sha256_file(predictions)
        except OSError as exc:
            log.error("Predictions of submission %s became unreadable while scoring: %s",
                      request["submission_id"], exc)
            raise PlatformError(UNREADABLE) from None
        finally:
            forget_ahead(predictions)
        if actual != expected:
            log.error("Submission %s attempt %s: the stored predictions %s have sha256 %s, but %s was accepted; "
                      "reporting a platform error instead of any outcome", request["submission_id"],
                      request["attempt"], request["predictions_key"], actual, expected)
            raise PlatformError(CHANGED)


def _keep_outcomes(track: str, result: dict[str, Any], per_unit: dict[str, Any]) -> bool:
    """Keep the per-unit outcomes for paired tests and deferred intervals, on the worker side only
    (``outcomes``); whether they were kept.

    A store that fails (logged there) costs only those tests and intervals, never the score.
    """
    key = contracts.outcomes_key(track, result["labels_sha256"], result["predictions_sha256"],
                                 result["scorer_version"])
    try:
        outcomes.save(key, per_unit)
    except outcomes.StoreError:
        return False  # logged there
    except Exception:  # noqa: BLE001 - keeping them is never worth the score
        log.exception("Could not keep the outcomes %s", key)
        return False
    return True


@task_failure.connect
def _report_lost(sender: Any = None, exception: BaseException | None = None,
                 kwargs: dict[str, Any] | None = None, **_: Any) -> None:
    """In the worker's main process: the process scoring an attempt died or hit the hard time limit."""
    if getattr(sender, "name", None) != contracts.SCORE_SUBMISSION or not kwargs:
        return
    ids = {"submission_id": kwargs.get("submission_id"), "attempt": kwargs.get("attempt")}
    queue = kwargs.get("reply_queue") or "site"
    if isinstance(exception, TimeLimitExceeded):
        app.send_task(contracts.RECORD_FAILURE, queue=queue, retry=True, retry_policy=REPORT_RETRY, kwargs={
            **ids, "kind": "platform_error",
            "message": f"Scoring took longer than the {TIME_LIMIT // 60}-minute limit and was stopped. "
                       "It does not count against your quota."})
    elif isinstance(exception, WorkerLostError):
        app.send_task(contracts.RECORD_LOST, queue=queue, retry=True, retry_policy=REPORT_RETRY,
                      kwargs={**ids, "reason": "the scoring process was killed"})
