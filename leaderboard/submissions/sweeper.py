"""The sweeper: finds work whose request, message, worker or report was lost, and sends it again.

``do_sweep`` runs every ``SWEEP_INTERVAL`` s (Celery beat, ``tasks.sweep``),
when the site worker starts, and when a scoring worker starts (it asks by
``contracts.SWEEP``): after a restart, or a worker that vanished, work resumes
within seconds. ``manage.py sweep`` runs it too. In order:

1. **Never queued**: stored and checked, but the request died before queueing
   it (``SWEEP_UNSENT_AFTER``): queued now. A one-request upload whose file was
   never stored (``SWEEP_STALLED_UPLOAD_AFTER``): failed, refunded.
2. **Never sent**: queued while the broker was down: sent now.
3. **Claimed** (``broker.claims``, written by the worker that took the attempt):
   - holding the worker's report, kept ``SWEEP_UNSENT_AFTER`` s ago or more
     and still not recorded (the site worker that took its message died before
     recording it): recorded from the claim (signed like the message);
   - taken by an instance of a node that now announces another instance (the
     worker started again), or by a node that has not announced itself for three
     of its announce intervals (it vanished, 15 s by default; not within
     ``SWEEP_AFTER_BROKER_RESTART`` s of the broker's start, while live workers
     announce themselves again): lost (``lifecycle.do_retry_lost``);
   - taken by a live worker: left alone while it may still be scoring (for
     ``EVAL_TIME_LIMIT`` + ``SWEEP_HEARTBEAT_TIMEOUT`` s: past the hard time
     limit, the process that scored it is gone, and its loss report with it).
4. **Sent and unclaimed** for ``SWEEP_QUEUED_AFTER`` s: still in its queue
   (waiting for a busy worker: never failed for waiting), taken by a worker that
   died before claiming it, or gone from the broker (a broker that lost its last
   writes): sent again.
5. **Silent**: running, claimed by nobody the sweeper can see (an older worker,
   or a broker that lost the claim), and no heartbeat for
   ``SWEEP_HEARTBEAT_TIMEOUT`` s: lost.
6. **Intervals to ask again**: results whose deferred intervals were not
   computed because the outcomes store could not be read, or whose request
   could not be sent (``bootstrap.retry_at`` passed): asked again.

Nothing here relies on the broker's visibility timeout (4 hours, above any
scoring): a running task is never delivered twice to get it going again; a new
attempt is sent, and the old one's message is dropped unscored when it returns.
"""

from __future__ import annotations

import logging
import time
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from evaluation_workers import contracts, signing
from leaderboard.submissions import broker, lifecycle
from leaderboard.submissions.lifecycle import do_ask_intervals
from leaderboard.submissions.models import Result, Submission

log = logging.getLogger(__name__)
Status = Submission.Status
Kind = Submission.FailureKind
Attempt = tuple[int, int]


def do_sweep(now: datetime | None = None) -> dict[str, int]:
    """One round of the sweeper; returns counts by action."""
    now = now or timezone.now()
    counts = {"sent": 0, "requeued": 0, "failed": 0, "waiting": 0, "submitted": 0, "abandoned": 0,
              "recorded": 0, "intervals": 0}
    ago = lambda seconds: now - timedelta(seconds=seconds)  # noqa: E731
    for pk in Submission.objects.filter(status=Status.SUBMITTED, updated_at__lt=ago(settings.SWEEP_UNSENT_AFTER)) \
            .values_list("pk", flat=True):
        counts["submitted"] += lifecycle.do_enqueue(pk) is not None
    for pk in Submission.objects.filter(status=Status.UPLOADING, upload__isnull=True,
                                        created_at__lt=ago(settings.SWEEP_STALLED_UPLOAD_AFTER)) \
            .values_list("pk", flat=True):
        counts["abandoned"] += lifecycle.do_fail(
            pk, Kind.PLATFORM_ERROR, "The upload was interrupted before the file was stored; please submit it "
            f"again. {lifecycle.PLATFORM_REFUND_NOTE}", allow={Status.UPLOADING}) is not None
    for pk, attempt in Submission.objects.filter(
            status=Status.QUEUED, sent_at__isnull=True, queued_at__lt=ago(settings.SWEEP_UNSENT_AFTER)) \
            .values_list("pk", "attempt"):
        counts["sent"] += lifecycle.do_send(pk, attempt)
    active = {(pk, attempt): (status, queue, sent_at, heartbeat_at, updated_at)
              for pk, attempt, status, queue, sent_at, heartbeat_at, updated_at in Submission.objects.filter(
                  Q(status=Status.RUNNING) | Q(status=Status.QUEUED, sent_at__isnull=False)).values_list(
                  "pk", "attempt", "status", "queue", "sent_at", "heartbeat_at", "updated_at")}
    try:
        claims, live, uptime = broker.claims(list(active)), broker.instances(), broker.uptime()
    except Exception as exc:  # noqa: BLE001 - broker unreachable: look again next time
        log.warning("Sweeper could not read the broker: %s", exc)
        claims, live, uptime = None, {}, 0.0
    if claims is not None:
        alive = _sweep_claims(claims, live, uptime, now, counts)
        unclaimed = [(ids, queue) for ids, (status, queue, sent_at, *_) in active.items()
                     if status == Status.QUEUED and ids not in claims and sent_at < ago(settings.SWEEP_QUEUED_AFTER)]
        _sweep_unclaimed(unclaimed, now, counts)
        # Running, with nobody the sweeper can see holding it: the heartbeats decide.
        silent = ago(settings.SWEEP_HEARTBEAT_TIMEOUT)
        for ids, (status, _, _, heartbeat_at, updated_at) in active.items():
            if status == Status.RUNNING and ids not in alive and (heartbeat_at or updated_at) < silent:
                _count(counts, lifecycle.do_retry_lost(*ids, "the worker stopped sending heartbeats"))
    counts["intervals"] = _ask_intervals_again(now)
    if any(v for k, v in counts.items() if k != "waiting"):
        log.warning("Sweeper: %s", counts)
    return counts


def _count(counts: dict[str, int], outcome: str) -> None:
    if outcome:
        counts["requeued" if outcome == "requeued" else "failed"] += 1


def _sweep_claims(claims: dict[Attempt, dict[str, Any]], live: dict[str, str], uptime: float, now: datetime,
                  counts: dict[str, int]) -> set[Attempt]:
    """Record the reports found in claims and retry the attempts whose worker is gone; returns the
    attempts that a live worker holds, or whose signed report was found (the heartbeats no longer decide)."""
    alive: set[Attempt] = set()
    settled = uptime >= settings.SWEEP_AFTER_BROKER_RESTART
    overdue = now.timestamp() - settings.EVAL_TIME_LIMIT - settings.SWEEP_HEARTBEAT_TIMEOUT
    reported_before = now.timestamp() - settings.SWEEP_UNSENT_AFTER
    for (pk, attempt), claim in claims.items():
        if claim.get("report") and float(claim.get("since") or 0) > reported_before:
            alive.add((pk, attempt))  # its message is on its way to the site worker, whether or not
            continue                  # the worker that sent it still runs
        if claim.get("report"):
            recorded = _record_kept(pk, attempt, claim)
            if recorded is not None:  # a report that is not the worker's, or fails to record: the heartbeats decide
                counts["recorded"] += recorded
                alive.add((pk, attempt))
            continue
        now_live = live.get(claim["node"])
        if now_live == claim["instance"] and float(claim.get("since") or 0) < overdue:
            _count(counts, lifecycle.do_retry_lost(pk, attempt, "its scoring outlived the time limit unreported"))
        elif now_live == claim["instance"]:
            alive.add((pk, attempt))
        elif now_live is not None:
            _count(counts, lifecycle.do_retry_lost(pk, attempt, f"its worker {claim['node']} started again"))
        elif settled:
            _count(counts, lifecycle.do_retry_lost(pk, attempt, f"its worker {claim['node']} stopped announcing "
                                                                  "itself"))
        else:
            alive.add((pk, attempt))  # the broker just restarted: workers are announcing themselves again
    return alive


def _record_kept(pk: int, attempt: int, claim: dict[str, Any]) -> bool | None:
    """Record the report a worker kept in its claim (its message was lost): True if that changed the
    submission, False if not; None if the report is not a signed one of this attempt, or failed to record."""
    task, signed = claim.get("report"), claim.get("kwargs")
    if task not in {contracts.RECORD_RESULT, contracts.RECORD_FAILURE} or not isinstance(signed, dict):
        return None
    report = signing.verified(str(task), (), signed, settings.RESULTS_SIGNING_KEYS)
    if report is None or (report.get("submission_id"), report.get("attempt")) != (pk, attempt):
        return None
    try:
        if task == contracts.RECORD_RESULT:
            recorded = lifecycle.record_result(**report) is not None
        else:
            recorded = lifecycle.record_failure(**report) is not None
    except Exception:  # one report that cannot be recorded must not stop the sweep
        log.exception("Submission %s attempt %s: could not record the report kept in its claim", pk, attempt)
        return None
    if recorded:
        log.warning("Submission %s attempt %s: recorded the worker's %s from its claim: the report message was not "
                    "recorded within %s s (lost with a site worker, or the site queue is far behind)", pk, attempt,
                    "result" if task == contracts.RECORD_RESULT else "failure", settings.SWEEP_UNSENT_AFTER)
    return recorded


def _sweep_unclaimed(unclaimed: list[tuple[Attempt, str]], now: datetime, counts: dict[str, int]) -> None:
    """Queued attempts no worker claimed: waiting in their queue, lost with a worker, or gone."""
    if not unclaimed:
        return
    queue_names = {queue for _, queue in unclaimed}
    try:
        pending = broker.pending_attempts(queue_names)
        if any(ids not in pending for ids, _ in unclaimed):
            # A worker moves a message from its queue to ``unacked`` in two steps: look again
            # before calling one lost that was only between the two.
            time.sleep(0.2)
            pending.update(broker.pending_attempts(queue_names))
    except Exception as exc:  # noqa: BLE001 - broker unreachable: look again next time
        log.warning("Sweeper could not read the broker: %s", exc)
        return
    taken_before = now.timestamp() - settings.SWEEP_QUEUED_AFTER
    for (pk, attempt), _ in unclaimed:
        where, since = pending.get((pk, attempt), ("", 0.0))
        if where == "queued":
            counts["waiting"] += 1  # a worker will get to it; the desk shows how long it waits
        elif where == "unacked":
            if since < taken_before:  # taken, never claimed: the worker died before it started
                _count(counts, lifecycle.do_retry_lost(pk, attempt, "the worker stopped before starting"))
            else:
                counts["waiting"] += 1
        else:  # the message is gone (a broker that lost its data)
            counts["requeued"] += lifecycle.do_enqueue(pk, lost=attempt) is not None


def _ask_intervals_again(now: datetime) -> int:
    """Send again the intervals requests that failed for a store that could not be read, once due."""
    due = [r for r in Result.objects.filter(bootstrap__deferred=True, bootstrap__has_key="retry_at")
           .select_related("submission__split__benchmark")
           if float(r.bootstrap.get("retry_at") or 0) <= now.timestamp()]
    return sum(do_ask_intervals(r) for r in due)
