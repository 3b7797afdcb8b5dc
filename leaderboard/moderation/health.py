"""What the health page shows: queues, the scoring workers that announce themselves, waiting work.

Read only. A queue with waiting submissions that no live worker consumes is
"unserved": typically work for a scorer version (or a track, or a device) no
running worker has. It is never failed for waiting; start a worker for it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db.models import Count, Min

from leaderboard.submissions import broker, lifecycle
from leaderboard.submissions.models import Submission


@dataclass
class QueueRow:
    name: str
    length: int | None = None
    waiting: int = 0
    oldest: datetime | None = None
    workers: list[str] = field(default_factory=list)


def unserved(workers: list[dict[str, Any]] | None) -> list[QueueRow]:
    """Queues holding queued submissions that no announced worker consumes ([] if the broker is unreadable)."""
    if workers is None:
        return []
    served = {q for w in workers for q in w.get("queues", [])}
    rows = (Submission.objects.filter(status=Submission.Status.QUEUED).exclude(queue="")
            .values("queue").annotate(n=Count("pk"), oldest=Min("queued_at")).order_by("queue"))
    return [QueueRow(r["queue"], waiting=r["n"], oldest=r["oldest"]) for r in rows if r["queue"] not in served]


def scoring_health() -> dict[str, Any]:
    workers = broker.workers_seen()
    now = time.time()
    for w in workers or []:
        w["seen_ago"] = max(0.0, now - float(w.get("seen_at", now)))
        w["versions_list"] = sorted(w.get("versions", {}).items())
    waiting = {r["queue"]: r for r in Submission.objects.filter(status=Submission.Status.QUEUED)
               .values("queue").annotate(n=Count("pk"), oldest=Min("queued_at"))}
    names = sorted(set(lifecycle.all_queues()) | {q for q in waiting if q}
                   | {q for w in workers or [] for q in w.get("queues", [])})
    lengths = broker.queue_lengths([*names, settings.SITE_QUEUE])
    rows = []
    for name in names:
        row = QueueRow(name, length=lengths.get(name),
                       workers=[w["name"] for w in broker.serving(workers or [], name)])
        if name in waiting:
            row.waiting, row.oldest = waiting[name]["n"], waiting[name]["oldest"]
        rows.append(row)
    oldest = (Submission.objects.filter(status=Submission.Status.QUEUED).select_related("split__benchmark")
              .order_by("queued_at").first())
    return {"workers": workers, "queues": rows, "site_queue": (settings.SITE_QUEUE, lengths.get(settings.SITE_QUEUE)),
            "unserved": unserved(workers), "oldest": oldest}
