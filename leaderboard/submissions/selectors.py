"""Reads of submissions for pages and the API."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import Q, QuerySet

from evaluation_workers import queues
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


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


@dataclass(frozen=True)
class QueuePlace:
    """Where a queued submission waits: its position in line (1: next) for the scoring workers that
    serve its queue, counted over every submission ahead of it for them (whatever their benchmark:
    one worker may score several), the benchmarks those are on, and the workers.

    Only a number of the others: nobody learns whose submissions are ahead. ``workers`` None: the
    broker cannot be read now (then, as with no worker, only its own benchmark's line is counted).
    Pages say it in words (``text``), never with the queues' internal names.
    """

    position: int
    benchmark: str
    ahead_on: tuple[str, ...]
    workers: list[dict[str, Any]] | None

    @property
    def ahead(self) -> int:
        return self.position - 1

    @property
    def text(self) -> str:
        if not self.ahead:
            return "Next in line to be scored: no submission is ahead of it."
        ahead = f"{self.ahead} submission{' is' if self.ahead == 1 else 's are'} ahead of it"
        if not self.workers:
            return f"{_ordinal(self.position)} in line to be scored: {ahead} on {self.benchmark}."
        on = " and ".join([", ".join(self.ahead_on[:-1]), self.ahead_on[-1]] if len(self.ahead_on) > 1
                          else self.ahead_on)
        return (f"{_ordinal(self.position)} in line to be scored: {ahead} for the scoring workers that serve "
                f"{self.benchmark} (on {on}).")

    @property
    def workers_text(self) -> str:
        if self.workers is None:
            return "Which scoring workers serve it is unknown right now (the broker cannot be read)."
        if not self.workers:
            return (f"No scoring worker serves {self.benchmark} right now: it waits until one starts, and is never "
                    f"failed for waiting.")
        names = ", ".join(f"{w.get('name', '')} ({w.get('device', '')})" for w in self.workers)
        return f"Served by {len(self.workers)} scoring worker{'s' * (len(self.workers) != 1)}: {names}."

    @property
    def short(self) -> str:
        """For a list: "3rd in line to be scored (2 submissions ahead)", "next in line to be scored"."""
        if not self.ahead:
            return "next in line to be scored"
        return (f"{_ordinal(self.position)} in line to be scored ({self.ahead} submission{'s' * (self.ahead != 1)} "
                f"ahead)")

    def as_json(self) -> dict[str, Any]:
        return {"position": self.position, "ahead": self.ahead, "text": self.text, "workers_text": self.workers_text,
                "workers": None if self.workers is None else [
                    {"name": w.get("name", ""), "device": w.get("device", "")} for w in self.workers]}


def _earlier(submission: Submission) -> Q:
    """Queued before ``submission`` (one not stamped waits behind everything stamped)."""
    if submission.queued_at is not None:
        return Q(queued_at__lt=submission.queued_at) | Q(queued_at=submission.queued_at, pk__lt=submission.pk)
    return Q(queued_at__isnull=False) | Q(pk__lt=submission.pk)


def _place(submission: Submission, workers: list[dict[str, Any]] | None) -> QueuePlace:
    serving = broker.serving(workers, submission.queue) if workers else []
    # The queues those workers consume: a submission waiting in any of them is scored by them first.
    shared = {submission.queue} | {q for w in serving for q in w.get("queues", [])}
    if queues.is_bulk(submission.queue):  # whoever takes a re-scoring takes its track's new submissions first
        shared.add(submission.queue.removesuffix(queues.BULK_SUFFIX))
    normal = {q for q in shared if not queues.is_bulk(q)}
    waiting = Submission.objects.filter(status=Submission.Status.QUEUED)
    if queues.is_bulk(submission.queue):  # a worker takes every new submission before a re-scoring
        ahead = waiting.filter(Q(queue__in=normal) | (Q(queue__in=shared - normal) & _earlier(submission)))
    else:
        ahead = waiting.filter(_earlier(submission), queue__in=normal)
    on = sorted(set(ahead.values_list("split__benchmark__title", flat=True)))
    return QueuePlace(ahead.count() + 1, submission.split.benchmark.title, tuple(on),
                      None if workers is None else serving)


def queue_place(submission: Submission) -> QueuePlace | None:
    """The place of ``submission`` in line while it is queued; None otherwise.

    Queued submissions of one queue are scored in the order they were queued; a worker serving
    several queues takes new submissions of any of them before re-scorings (``queues.NormalFirstCycle``),
    so every submission queued earlier in a queue of the workers that serve this one counts as ahead
    (the workers are those announcing that queue: ``broker.serving``).
    """
    if submission.status != Submission.Status.QUEUED or not submission.queue:
        return None
    return _place(submission, broker.workers_seen())


def queue_places(submissions: list[Submission]) -> dict[int, QueuePlace]:
    """``queue_place`` of each queued submission of a list, reading the workers once."""
    queued = [s for s in submissions if s.status == Submission.Status.QUEUED and s.queue]
    if not queued:
        return {}
    workers = broker.workers_seen()
    return {s.pk: _place(s, workers) for s in queued}


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
