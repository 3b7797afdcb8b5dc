"""Reads of submissions for pages and the API."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import Q, QuerySet

from leaderboard.submissions import broker, methods
from leaderboard.submissions.models import Method, Result, Submission, shown_result


def list_submissions_for(user: AbstractBaseUser) -> QuerySet[Submission]:
    return (Submission.objects.filter(team__members=user)
            .select_related("method", "split__benchmark", "team").order_by("-created_at"))


@dataclass(frozen=True)
class SubmissionRow:
    """A submission as a line of a list: its shown result's primary score (None without one)."""

    submission: Submission
    result: Result | None
    primary: str
    score: float | None
    spec: Any = None  # the primary metric's MetricSpec: how the score reads


def submission_rows(submissions: QuerySet[Submission]) -> list[SubmissionRow]:
    """Each submission with the primary score of the result its owner may see now (never a private
    result before the reveal: ``shown_result``); one query for all their results."""
    rows = []
    for s in submissions.prefetch_related("results"):
        result = shown_result(list(s.results.all()), s.split)
        primary = s.split.benchmark.spec.primary_metric
        rows.append(SubmissionRow(s, result, primary, result.metrics.get(primary) if result else None,
                                  s.split.benchmark.metric_spec(primary)))
    return rows


@dataclass(frozen=True)
class QueuePlace:
    """Where a queued submission waits: its position in its queue (1: next) and the workers that serve it.

    Only a number of the others: nobody learns whose submissions are ahead. ``workers`` None: the
    broker cannot be read now.
    """

    queue: str
    position: int
    workers: list[dict[str, Any]] | None

    def as_json(self) -> dict[str, Any]:
        return {"queue": self.queue, "position": self.position,
                "workers": None if self.workers is None else [
                    {"name": w.get("name", ""), "device": w.get("device", "")} for w in self.workers]}


def queue_place(submission: Submission) -> QueuePlace | None:
    """The place of ``submission`` in its scoring queue while it is queued; None otherwise.

    Queued submissions of one queue are scored in the order they were queued (the health page's
    count of waiting work, per queue); the workers are those announcing that queue (``broker.serving``).
    """
    if submission.status != Submission.Status.QUEUED or not submission.queue:
        return None
    waiting = Submission.objects.filter(status=Submission.Status.QUEUED, queue=submission.queue)
    if submission.queued_at is not None:
        waiting = waiting.filter(Q(queued_at__lt=submission.queued_at)
                                 | Q(queued_at=submission.queued_at, pk__lt=submission.pk))
    else:  # not stamped: behind everything stamped
        waiting = waiting.filter(Q(queued_at__isnull=False) | Q(pk__lt=submission.pk))
    workers = broker.workers_seen()
    return QueuePlace(submission.queue, waiting.count() + 1,
                      None if workers is None else broker.serving(workers, submission.queue))


def validator_commands(submission: Submission) -> list[list[str]]:
    """The commands that check a file as the server does, offline, before it is sent again; each as its
    words, an option with its value as one (a page wraps the command between them, never inside)."""
    track, split, name = submission.split.benchmark.track, submission.split.name, submission.file_name
    return [["lb validate", f"--track {track}", f"--split {split}", name],
            ["python -m evaluation_workers validate", f"--track {track}", f"--manifest {track}-{split}-manifest.json",
             f"--predictions {name}"]]


def submission_as_json(submission: Submission) -> dict[str, Any]:
    """What the owner may know of a submission: status and aggregate scores only."""
    result = submission.latest_result
    return {
        "id": submission.pk,
        "track": submission.split.benchmark.track,
        "split": submission.split.name,
        "method": submission.method.name,
        "team": submission.team.name,
        "file_name": submission.file_name,
        "file_size": submission.file_size,
        "predictions_sha256": submission.predictions_sha256,
        "status": submission.status,
        "quota": submission.quota,
        "progress": round(submission.progress, 4),
        "message": submission.status_detail if not submission.is_done else "",
        "error": ({"kind": submission.failure_kind, "message": submission.status_detail}
                  if submission.status == Submission.Status.FAILED else None),
        "is_published": submission.is_published,
        "created_at": submission.created_at.isoformat(),
        "finished_at": submission.finished_at.isoformat() if submission.finished_at else None,
        "result": _result_as_json(result, submission) if result else None,
    }


def _result_as_json(result: Any, submission: Submission) -> dict[str, Any]:
    """The result, with its per-class details as the split's labels allow (a submitter must not
    learn from them which hidden classes exist, or how large they are: rankings.drilldown)."""
    from leaderboard.rankings.drilldown import public_details

    body = result.as_json()
    body["details"] = public_details(body["details"], submission.split)
    return body


def method_as_json(method: Method) -> dict[str, Any]:
    return {"id": method.pk, "name": method.name, "team": method.team.slug, "description": method.description,
            "authors": method.authors, "paper_url": method.paper_url, "code_url": method.code_url,
            "uses_extra_data": method.uses_extra_data, "details": method.details,
            "anonymous": method.is_anonymous,
            "revealed_at": method.revealed_at.isoformat() if method.revealed_at else None,
            "fields": method.fields or {},
            "declared_fields": {b.track: [f.as_json() for f in fields] for b, fields in methods.field_sets(method)},
            "missing_for_publishing": methods.missing_for_publishing(method)}
