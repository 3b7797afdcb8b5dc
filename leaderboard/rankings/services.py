"""Writes of precomputed leaderboard rows."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.db import transaction

from leaderboard.benchmarks.models import Split
from leaderboard.lib.pagecache import bump
from leaderboard.rankings.models import LeaderboardEntry

PAPER_ROWS_DIR = Path(__file__).resolve().parent.parent / "benchmarks" / "paper_rows"


def flatten_scores(metrics: dict[str, Any], breakdown: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """``{"EM": .., "What/EM": .., "What/count": ..}`` from a result's metrics and breakdown."""
    flat = dict(metrics)
    for group, values in breakdown.items():
        for metric, value in values.items():
            flat[f"{group}/{metric}"] = value
    return flat


def refresh_entry(method: Any, split: Split) -> LeaderboardEntry | None:
    """Rewrite the row of ``method`` on ``split`` from its published submission (or drop it)."""
    from leaderboard.submissions.models import Result, Submission

    with transaction.atomic():
        # Every branch below changes (or may change) the row; cached pages move on commit.
        bump(split.benchmark.track)
        published = (Submission.objects.filter(method=method, split=split, is_published=True)
                     .select_related("team").first())
        result = (Result.objects.filter(submission=published).order_by("-created_at").first()
                  if published else None)
        # The tie marks follow the ranking: rewritten once the change is committed (``ties``).
        transaction.on_commit(lambda: _refresh_ties(split.pk))
        if published is None or result is None or published.is_hidden or published.is_disqualified:
            LeaderboardEntry.objects.filter(method=method, split=split).delete()
            return None
        scores = flatten_scores(result.metrics, result.breakdown)
        primary = split.benchmark.spec.primary_metric
        entry, _ = LeaderboardEntry.objects.update_or_create(
            method=method, split=split,
            defaults={"submission": published, "result": result, "name": method.name,
                      "team_name": published.team.name, "uses_extra_data": bool(method.uses_extra_data),
                      "is_verified": published.is_verified,
                      "primary_score": scores.get(primary), "scores": scores,
                      "intervals": {k: v for k, v in (result.intervals or {}).items() if v is not None},
                      "scorer_version": result.scorer_version, "is_paper": False})
        return entry


def _refresh_ties(split_id: int) -> None:
    from leaderboard.rankings.ties import do_refresh_ties

    with transaction.atomic():
        do_refresh_ties(Split.objects.select_related("benchmark").get(pk=split_id))


def do_seed_paper_rows(track: str) -> int:
    """Load the rows "reported in paper" of ``benchmarks/paper_rows/<track>.json`` (idempotent).

    File: ``{"split": ..., "source": ..., "rows": [{"method", "note", "scores"}]}``,
    scores flat as in ``flatten_scores``, as fractions.
    """
    path = PAPER_ROWS_DIR / f"{track}.json"
    if not path.exists():
        return 0
    data = json.loads(path.read_text())
    split = Split.objects.select_related("benchmark").get(benchmark__track=track, name=data["split"])
    primary = split.benchmark.spec.primary_metric
    bump(track)
    for row in data["rows"]:
        LeaderboardEntry.objects.update_or_create(
            split=split, name=row["method"], is_paper=True,
            defaults={"paper_note": row.get("note") or data.get("source", ""),
                      "scores": row["scores"], "primary_score": row["scores"].get(primary),
                      "uses_extra_data": row.get("uses_extra_data", False)})
    return len(data["rows"])
