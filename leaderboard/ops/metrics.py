"""The site's Prometheus metrics (``prometheus_client``), served at ``/metrics``.

Counted in the web processes, and summed over them when
``PROMETHEUS_MULTIPROC_DIR`` is set (deploy/gunicorn.conf.py sets it; the
library's multiprocess mode):

- ``leaderboard_page_cache_requests_total{result}``: requests to cached pages by
  anonymous visitors, ``hit`` (served from the cache) or ``miss`` (rendered);
  the hit rate is hit / (hit + miss). ``error``: the cache failed to answer
  (the page rendered uncached, and the cache is skipped for a few seconds).
- ``leaderboard_unavailable_responses_total{cause}``: 503s (``unavailable``).

Read when scraped, so every host and process agrees:

- ``leaderboard_submissions{status, failure_kind}``: submissions by status
  (and, when failed, by who is at fault), from the database.
- ``leaderboard_queue_messages{queue}`` and
  ``leaderboard_queue_oldest_message_age_seconds{queue}``: messages waiting in
  each scoring queue and the site queue, and how long the oldest has waited
  (the ``sent_at`` header both sides put on every message), from the broker.
- ``leaderboard_sweeper_actions_total{action}``: what the sweeper did (sent,
  requeued, failed, submitted, abandoned), counted in the broker by whichever
  site worker swept (``count_sweep``).
- ``leaderboard_scoring_workers``: scoring workers announcing themselves.
- ``leaderboard_ready{check}`` and ``leaderboard_ready_latency_seconds{check}``:
  the ``/readyz`` checks.

A part whose service is down (``outages.outage``) is left out of the scrape
(and logged); the rest is still served. The scoring workers serve their own metrics
(``evaluation_workers.worker.metrics``).
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Iterator
from typing import Any

from django.conf import settings
from django.db.models import Count
from prometheus_client import CollectorRegistry, Counter
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector

from evaluation_workers import contracts
from leaderboard.lib import pagecache  # noqa: F401  (its counter, PAGE_CACHE, is in COUNTED)
from leaderboard.lib.counters import COUNTED
from leaderboard.ops.outages import outage

log = logging.getLogger(__name__)

# Counted in each web process, each counter beside what counts it (lib.counters): the page cache's in
# lib.pagecache (imported here, so that a scrape lists it before the first request), 503s here.
UNAVAILABLE = Counter("leaderboard_unavailable_responses", "503 answers, by the service that failed",
                      ["cause"], registry=COUNTED)

SWEEPER_KEY = "metrics:sweeper-actions"
SWEEPER_ACTIONS = ("sent", "requeued", "failed", "submitted", "abandoned", "recorded", "intervals")


def count_sweep(counts: dict[str, int]) -> None:
    """Add one sweep's actions to the broker's tally (read by every site's ``/metrics``)."""
    from leaderboard.submissions import broker

    done = {action: n for action, n in counts.items() if action in SWEEPER_ACTIONS and n}
    if not done:
        return
    try:
        pipe = broker.client().pipeline()
        for action, n in done.items():
            pipe.hincrby(SWEEPER_KEY, action, n)
        pipe.execute()
    except Exception as exc:  # noqa: BLE001 - a lost tally costs a metric, never a sweep
        log.warning("Could not count the sweeper's actions %s: %s", done, exc)


def _oldest_age(raw: bytes | None, now: float) -> float | None:
    """Seconds since the message ``raw`` (Kombu's JSON envelope) was sent, if it says when."""
    if raw is None:
        return None
    try:
        sent = float(json.loads(raw)["headers"][contracts.SENT_AT_HEADER])
    except (ValueError, KeyError, TypeError):
        return None  # sent before the header existed, or not one of ours
    return max(0.0, now - sent)


class StateCollector(Collector):
    """What the database and the broker hold, read at each scrape."""

    def collect(self) -> Iterator[Any]:
        for part in (self._submissions, self._queues, self._sweeper, self._workers, self._readiness):
            try:
                yield from part()
            except Exception as exc:
                if outage(exc) is None:
                    raise  # a bug: /metrics fails loudly
                log.warning("Metrics: %s left out of the scrape: %s: %s", part.__name__.strip("_"),
                            type(exc).__name__, exc)

    def _submissions(self) -> Iterator[Any]:
        from leaderboard.submissions.models import Submission

        family = GaugeMetricFamily("leaderboard_submissions", "Submissions by status and failure kind",
                                   labels=["status", "failure_kind"])
        rows = Submission.objects.values("status", "failure_kind").annotate(n=Count("pk")).order_by()
        for row in rows:
            family.add_metric([row["status"], row["failure_kind"] or ""], row["n"])
        yield family

    def _queues(self) -> Iterator[Any]:
        from leaderboard.submissions import broker, lifecycle

        client, now = broker.client(), time.time()
        names = [*lifecycle.all_queues(), settings.SITE_QUEUE]
        pipe = client.pipeline()
        for name in names:
            pipe.llen(name)
            pipe.lindex(name, -1)  # Kombu pushes on the left and takes from the right: the oldest
        answers = pipe.execute()
        lengths = GaugeMetricFamily("leaderboard_queue_messages", "Messages waiting in each queue", labels=["queue"])
        ages = GaugeMetricFamily("leaderboard_queue_oldest_message_age_seconds",
                                 "How long the oldest message of each queue has waited", labels=["queue"])
        for i, name in enumerate(names):
            length, oldest = answers[2 * i], answers[2 * i + 1]
            lengths.add_metric([name], int(length))
            age = _oldest_age(oldest, now) if length else 0.0
            if age is not None:
                ages.add_metric([name], age)
        yield lengths
        yield ages

    def _sweeper(self) -> Iterator[Any]:
        from leaderboard.submissions import broker

        tally = broker.client().hgetall(SWEEPER_KEY)
        family = CounterMetricFamily("leaderboard_sweeper_actions", "What the sweeper did, by action",
                                     labels=["action"])
        for action in SWEEPER_ACTIONS:
            family.add_metric([action], float(tally.get(action.encode(), 0)))
        yield family

    def _workers(self) -> Iterator[Any]:
        from leaderboard.submissions import broker

        workers = broker.workers_seen()
        if workers is not None:
            yield GaugeMetricFamily("leaderboard_scoring_workers", "Scoring workers announcing themselves",
                                    value=len(workers))

    def _readiness(self) -> Iterator[Any]:
        from leaderboard.ops.health import readiness

        checks = readiness()
        up = GaugeMetricFamily("leaderboard_ready", "Whether each /readyz check passes (1) or fails (0)",
                               labels=["check"])
        latency = GaugeMetricFamily("leaderboard_ready_latency_seconds", "How long each /readyz check took",
                                    labels=["check"])
        for name, check in checks.items():
            up.add_metric([name], 1.0 if check.ok else 0.0)
            latency.add_metric([name], check.seconds)
        yield up
        yield latency


class _Counted(Collector):
    """This process's counters, when there is no multiprocess folder to sum them from."""

    def collect(self) -> Iterator[Any]:
        return iter(COUNTED.collect())


def registry() -> CollectorRegistry:
    """What ``/metrics`` serves: the counters of every web process (or of this one), and the state."""
    served = CollectorRegistry(auto_describe=False)
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        MultiProcessCollector(served)
    else:
        served.register(_Counted())
    served.register(StateCollector())
    return served
