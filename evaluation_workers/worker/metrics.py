"""The scoring worker's Prometheus metrics, served on ``EVAL_METRICS_PORT`` by its main process.

- ``eval_scoring_duration_seconds{track, outcome}`` (a histogram): how long each
  scoring task ran, from its start to its report (fetching the file included);
  ``outcome`` is what it reported: ``scored``, ``invalid_input``,
  ``platform_error``, or ``skipped`` (a stale attempt, dropped unscored).

Celery's prefork pool scores in child processes, so the values are kept with
``prometheus_client``'s multiprocess mode: each process writes its own files
under ``PROMETHEUS_MULTIPROC_DIR`` and the main process sums them when
scraped. ``prepare`` points that variable at a fresh temporary folder (removed
at exit) unless the operator set it; it must run before anything imports
``prometheus_client``, so this module imports it only inside its functions.

The outcome is read from the report the task sends (``before_task_publish``),
so ``tasks`` needs no change to be measured. ``EVAL_METRICS_ADDR`` (default
127.0.0.1) is where the port listens: the figures name tracks and durations,
nothing private, but a scraper on another host must be let in on purpose.
"""

from __future__ import annotations

import atexit
import functools
import os
import shutil
import tempfile
import time
from collections.abc import MutableMapping
from typing import Any

from celery.signals import before_task_publish, task_postrun, task_prerun

from evaluation_workers import contracts

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
# From a second to the 35-minute hard limit.
BUCKETS = (0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1200, 2100)
# Task id -> [started (monotonic), track, outcome] of the scoring tasks running in this process.
_running: dict[str, list[Any]] = {}


def prepare(environ: MutableMapping[str, str] | None = None) -> str:
    """Make sure ``PROMETHEUS_MULTIPROC_DIR`` names a folder; returns it. Call before importing the app."""
    env = os.environ if environ is None else environ
    folder = env.get(MULTIPROC_ENV)
    if not folder:
        folder = tempfile.mkdtemp(prefix="eval-metrics-")
        env[MULTIPROC_ENV] = folder
        atexit.register(shutil.rmtree, folder, ignore_errors=True)
    os.makedirs(folder, exist_ok=True)
    return folder


def serve(port: int, addr: str = "127.0.0.1") -> Any:
    """Serve every process's metrics on ``addr:port`` from a thread of this (the main) process."""
    from prometheus_client import CollectorRegistry, start_http_server
    from prometheus_client.multiprocess import MultiProcessCollector

    registry = CollectorRegistry()
    MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
    server, _ = start_http_server(port, addr, registry)
    return server


@functools.cache
def duration(registry: Any = None) -> Any:
    """The histogram, created on first use (in the pool process that scores), in ``registry``
    (default: prometheus_client's, whose values the multiprocess folder keeps)."""
    from prometheus_client import REGISTRY, Histogram

    return Histogram("eval_scoring_duration_seconds", "How long scoring one submission took, by track and outcome",
                     ["track", "outcome"], buckets=BUCKETS, registry=registry or REGISTRY)


@task_prerun.connect
def _started(task_id: str = "", task: Any = None, kwargs: dict[str, Any] | None = None, **_: Any) -> None:
    if getattr(task, "name", None) == contracts.SCORE_SUBMISSION:
        _running[task_id] = [time.monotonic(), str((kwargs or {}).get("track") or "unknown"), "skipped"]


@before_task_publish.connect
def _reported(sender: str | None = None, body: Any = None, **_: Any) -> None:
    if sender not in (contracts.RECORD_RESULT, contracts.RECORD_FAILURE) or not _running:
        return
    from celery import current_task

    running = _running.get(getattr(getattr(current_task, "request", None), "id", None) or "")
    if running is None:
        return
    if sender == contracts.RECORD_RESULT:
        running[2] = "scored"
    else:
        kwargs = body[1] if isinstance(body, (list, tuple)) and len(body) > 1 else {}
        running[2] = str(kwargs.get("kind") or "platform_error")


@task_postrun.connect
def _finished(task_id: str = "", **_: Any) -> None:
    running = _running.pop(task_id, None)
    if running is not None:
        started, track, outcome = running
        duration().labels(track, outcome).observe(time.monotonic() - started)
