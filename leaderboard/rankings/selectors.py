"""Reads of leaderboards: one indexed query per page."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db.models import F, QuerySet

from leaderboard.benchmarks.models import Split
from leaderboard.rankings.models import LeaderboardEntry


def list_entries(split: Split, include_paper: bool = True) -> QuerySet[LeaderboardEntry]:
    """Entries ranked by the primary metric, best first.

    Ties keep the earlier published row first, then the lower id; rows without
    a primary score sort last.
    """
    entries = LeaderboardEntry.objects.filter(split=split)
    if not include_paper:
        entries = entries.filter(is_paper=False)
    return entries.order_by(F("primary_score").desc(nulls_last=True), "published_at", "id")


@dataclass
class RankedRow:
    rank: int
    entry: LeaderboardEntry


def rank(entries: list[LeaderboardEntry]) -> list[RankedRow]:
    """Competition ranks (1, 2, 2, 4) over the primary score, in the given order."""
    rows: list[RankedRow] = []
    for i, entry in enumerate(entries):
        same = rows and rows[-1].entry.primary_score == entry.primary_score
        rows.append(RankedRow(rank=rows[-1].rank if same else i + 1, entry=entry))
    return rows


def entry_as_json(row: RankedRow, columns: list[str]) -> dict[str, Any]:
    e = row.entry
    return {"rank": row.rank, "method": e.name, "team": e.team_name, "reported_in_paper": e.is_paper,
            "note": e.paper_note, "uses_extra_data": e.uses_extra_data, "scorer_version": e.scorer_version,
            "submission_id": e.submission_id, "scores": {c: e.scores.get(c) for c in columns}}
