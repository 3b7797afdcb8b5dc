"""Archiving a challenge's final board (``ChallengeArchive``): when its last phase has ended and its
board is revealed, the board's default view (every row, ranked as the page ranks them, then the
references) is copied once, its ``top`` entries marked, and never recomputed.

It happens without anyone visiting a page: Celery beat runs ``do_archive_due`` every minute in the
site worker (``tasks.archive_due``, beside the reveal and the sweeper), and ``archive_if_due`` is
idempotent (the challenge's row is locked, and an archive is written once), so a beat that fires
twice, or two site workers, write one archive. A challenge that goes on after its end
(``Challenge.post_challenge``) then gives each of its splits ``post_challenge_from`` (the end): they
take submissions again, their selection is free again, and rows sent since are marked "after the
challenge" (``services.refresh_entry``).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone

from leaderboard.benchmarks import phases
from leaderboard.benchmarks.models import Challenge, Split
from leaderboard.lib.method_fields import declared
from leaderboard.lib.pagecache import bump
from leaderboard.rankings.models import ChallengeArchive, LeaderboardEntry
from leaderboard.rankings.selectors import LeaderboardView, ordered_entries, unranked_entries
from leaderboard.rankings.services import do_refresh_split, reveal_if_due

MAX_ROWS = 10_000  # as a board's exports


def ended_at(challenge: Challenge) -> datetime | None:
    """When ``challenge`` ends: its last phase's deadline (None: no last phase, or no deadline)."""
    last = challenge.last_phase
    return last.split.deadline if last is not None else None


def is_due(challenge: Challenge, now: datetime | None = None) -> bool:
    """Whether the challenge's final board may be archived now: its last phase ended and its board is
    revealed (at the deadline, or by the maintainers where they reveal it)."""
    end = ended_at(challenge)
    last = challenge.last_phase
    return end is not None and last is not None and end <= (now or timezone.now()) and phases.is_revealed(
        reveal_if_due(last.split), now)


def _row(entry: LeaderboardEntry, rank: int | None, columns: list[str]) -> dict[str, Any]:
    return {"rank": rank, "entry_id": entry.pk, "method": entry.name, "method_id": entry.method_id,
            "team": None if entry.is_anonymous else entry.team_name, "anonymous": entry.is_anonymous,
            "reported_in_paper": entry.is_paper, "reference": entry.is_reference, "note": entry.paper_note,
            "paper_url": entry.paper_url, "venue": entry.venue, "protocol": entry.protocol,
            "uses_extra_data": entry.uses_extra_data, "verified": entry.is_verified,
            "scorer_version": entry.scorer_version, "submission_id": entry.submission_id,
            "published_at": entry.published_at.isoformat(), "fields": dict(entry.fields or {}),
            "scores": {c: entry.scores.get(c) for c in columns if entry.scores.get(c) is not None},
            "intervals": {c: entry.intervals[c] for c in columns if entry.intervals.get(c) is not None},
            "listed_apart": False, "state": entry.state, "top": None}


def board_rows(view: LeaderboardView, top: int) -> list[dict[str, Any]]:
    """Every row of ``view``, ranked as its page ranks them (competition ranks over the sort column),
    then its unranked rows (rank None: the paper rows listed apart, the references, the rows awaiting a
    re-score); the first ``top`` places among the challenge's entries (scored rows, not rows copied
    from papers) marked ``top`` (ties share a place)."""
    columns = view.all_columns
    rows: list[dict[str, Any]] = []
    previous, rank = None, None
    entries, place, place_value = 0, 0, None  # the challenge's entries so far, and the last one's place
    for i, entry in enumerate(ordered_entries(view)[:MAX_ROWS]):
        value = entry.sort_value
        if value is None:
            rank = None
        elif not i or value != previous:
            rank = i + 1
        previous = value
        row = _row(entry, rank, columns)
        if not entry.is_paper and value is not None:
            place = place if value == place_value else entries + 1
            entries, place_value = entries + 1, value
            row["top"] = place if place <= top else None
        rows.append(row)
    apart, references, stale = unranked_entries(view)
    unranked = [_row(entry, None, columns) for entry in [*apart, *references, *stale]]
    for row in unranked[:len(apart)]:
        row["listed_apart"] = True
    return rows + unranked


def _board(view: LeaderboardView, challenge: Challenge) -> dict[str, Any]:
    benchmark = view.split.benchmark
    spec = benchmark.spec
    iso = lambda d: d.isoformat() if d else None  # noqa: E731
    return {"metric": view.metric, "sort": view.sort, "ascending": view.ascending,
            "primary_metric": spec.primary_metric, "columns": view.columns, "headers": view.headers,
            "all_columns": view.all_columns, "groups": list(spec.groups), "group_label": spec.group_label,
            "metric_specs": {m: benchmark.metric_spec(m).as_json() for m in spec.metrics},
            "method_fields": [f.as_json() for f in declared(benchmark)], "scorer_version": spec.scorer_version,
            "benchmark_title": benchmark.title, "top": challenge.top,
            "scores_of": ("private" if view.split.has_partition else "all"),
            "phases": [{"name": p.name, "title": p.title, "split": p.split.name, "starts_at": iso(p.split.starts_at),
                        "freeze_at": iso(p.split.freeze_at), "deadline": iso(p.split.deadline),
                        "board": "hidden" if p.split.board_hidden else "live"}
                       for p in challenge.phases.select_related("split").order_by("order")]}


def do_archive(challenge: Challenge) -> ChallengeArchive:
    """Write the challenge's archive from its last phase's board now (no checks; see ``archive_if_due``)."""
    last = challenge.last_phase
    assert last is not None and last.split.deadline is not None
    split = Split.objects.select_related("benchmark").get(pk=last.split_id)
    view = LeaderboardView.from_query(split, {})
    archive = ChallengeArchive.objects.create(
        challenge=challenge, split=split, track=split.benchmark.track, split_name=split.name,
        title=challenge.title, ended_at=split.deadline, board=_board(view, challenge),
        rows=board_rows(view, challenge.top))
    if challenge.post_challenge:
        for phase in challenge.phases.select_related("split__benchmark"):
            Split.objects.filter(pk=phase.split_id).update(post_challenge_from=split.deadline)
            phase.split.post_challenge_from = split.deadline
            do_refresh_split(phase.split)  # selection and submissions open again; nothing shown changes
    bump(split.benchmark.track)
    return archive


def archive_if_due(challenge: Challenge) -> ChallengeArchive | None:
    """The challenge's archive: written now if it is due and was not written yet; None while it is not due."""
    with transaction.atomic():
        locked = Challenge.objects.select_for_update().select_related("benchmark").get(pk=challenge.pk)
        existing = ChallengeArchive.objects.filter(challenge=locked).first()
        if existing is not None:
            return existing
        if not is_due(locked):
            return None
        return do_archive(locked)


def do_archive_due() -> int:
    """Archive every challenge whose end passed and that has no archive yet; returns how many were written."""
    due = (Challenge.objects.filter(archive__isnull=True, phases__split__deadline__lte=timezone.now())
           .select_related("benchmark").distinct())
    written = 0
    for challenge in due:
        before = ChallengeArchive.objects.filter(challenge=challenge).exists()
        if archive_if_due(challenge) is not None and not before:
            written += 1
    return written
