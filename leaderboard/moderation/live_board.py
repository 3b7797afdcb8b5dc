"""The live board of a split for its maintainers: what the public board shows, and what it will
show at the reveal (rows held back by the freeze, private scores)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from leaderboard.benchmarks.models import Split
from leaderboard.rankings.models import LeaderboardEntry
from leaderboard.submissions.models import Result, Submission, shown_result


@dataclass
class LiveRow:
    submission: Submission
    public: float | None  # primary score on the public subset (or on every unit without a partition)
    private: float | None  # on the private remainder; None without a partition
    shown: float | None  # what the public board shows now; None: no row there
    held: bool  # published or re-scored since the freeze: not on the public board as it is
    spec: Any = None  # the primary metric's MetricSpec: how the scores read, which way is better


def live_board(split: Split) -> list[LiveRow]:
    """Every published submission of ``split``, best public score first (lowest, where lower is better)."""
    primary = split.benchmark.spec.primary_metric
    spec = split.benchmark.metric_spec(primary)
    entries = {e.method_id: e for e in LeaderboardEntry.objects.filter(split=split, is_paper=False)}
    rows = []
    for sub in (Submission.objects.filter(split=split, is_published=True, is_hidden=False, is_disqualified=False)
                .select_related("method", "team").prefetch_related("results")):
        latest: dict[str, Result] = {}
        for result in sorted(sub.results.all(), key=lambda r: (r.created_at, r.pk)):
            latest[result.partition] = result
        public = latest.get(Result.Partition.PUBLIC) or latest.get(Result.Partition.ALL)
        private = latest.get(Result.Partition.PRIVATE)
        entry = entries.get(sub.method_id)
        due = shown_result(list(sub.results.all()), split)  # what the public board would show without the freeze
        rows.append(LiveRow(
            submission=sub, public=public.metrics.get(primary) if public else None,
            private=private.metrics.get(primary) if private else None,
            shown=entry.primary_score if entry else None,
            held=due is not None and (entry is None or entry.submission_id != sub.pk or entry.result_id != due.pk
                                      or entry.updated_at < due.updated_at), spec=spec))
    sign = 1 if spec.lower_is_better else -1
    return sorted(rows, key=lambda r: (r.public is None, sign * (r.public or 0.0)))
