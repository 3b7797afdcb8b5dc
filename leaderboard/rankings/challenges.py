"""Reads of a benchmark's challenges: where each stands (upcoming, running one of its phases, ended,
archived), its phases' dates and rules, and its archived final board as pages, exports and the API
show it (``archive.py`` writes it)."""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.http import Http404
from django.utils import timezone

from evaluation_workers.tracks.base import MetricSpec
from leaderboard.benchmarks import phases
from leaderboard.benchmarks.models import Benchmark, Challenge
from leaderboard.lib.method_fields import MethodField
from leaderboard.rankings.exports import csv_cell
from leaderboard.rankings.models import ANONYMOUS_LABEL, ChallengeArchive, interval_columns

UPCOMING, RUNNING, ENDED, ARCHIVED = "upcoming", "running", "ended", "archived"


@dataclass
class PhaseState:
    name: str
    title: str
    split: Any
    state: str  # upcoming, running or ended

    @property
    def board(self) -> str:
        return "hidden" if self.split.board_hidden else "live"

    def as_json(self) -> dict[str, Any]:
        iso = lambda d: d.isoformat() if d else None  # noqa: E731
        s = self.split
        return {"name": self.name, "title": self.title, "split": s.name, "state": self.state,
                "starts_at": iso(s.starts_at), "freeze_at": iso(s.freeze_at), "deadline": iso(s.deadline),
                "board": self.board, "reveal": "deadline" if s.reveal_at_deadline else "maintainer",
                "max_published_per_team": s.max_published_per_team, "split_phase": phases.phase_of(s)}


@dataclass
class ChallengeState:
    """A challenge as pages say it: ``state`` upcoming (before its first phase), running (``current``
    is the latest phase that started), ended (its end passed, the archive is being written) or
    archived (``archive``)."""

    challenge: Challenge
    phases: list[PhaseState]
    state: str
    current: PhaseState | None = None
    archive: ChallengeArchive | None = None
    ends_at: datetime | None = None
    links: dict[str, str] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.challenge.name

    @property
    def title(self) -> str:
        return self.challenge.title

    def as_json(self) -> dict[str, Any]:
        c = self.challenge
        return {"name": c.name, "title": c.title, "description": c.description, "state": self.state,
                "current_phase": self.current.name if self.current else None,
                "ends_at": self.ends_at.isoformat() if self.ends_at else None, "top": c.top,
                "post_challenge": c.post_challenge, "phases": [p.as_json() for p in self.phases],
                "archived_at": self.archive.archived_at.isoformat() if self.archive else None, **self.links}


def _state(challenge: Challenge, now: datetime) -> ChallengeState:
    listed = []
    for phase in challenge.phases.select_related("split__benchmark").order_by("order"):
        s = phase.split
        state = (UPCOMING if s.starts_at and now < s.starts_at else ENDED if s.deadline and now >= s.deadline
                 else RUNNING)
        listed.append(PhaseState(phase.name, phase.title, s, state))
    archive = ChallengeArchive.objects.filter(challenge=challenge).first()
    ends_at = listed[-1].split.deadline if listed else None
    running = [p for p in listed if p.state == RUNNING]
    if archive is not None:
        state = ARCHIVED
    elif listed and all(p.state == UPCOMING for p in listed):
        state = UPCOMING
    elif ends_at is not None and now >= ends_at:
        state = ENDED
    else:
        state = RUNNING
    return ChallengeState(challenge, listed, state, running[-1] if running else None, archive, ends_at)


def challenge_states(benchmark: Benchmark, now: datetime | None = None) -> list[ChallengeState]:
    """Each challenge of ``benchmark``, in the bundle's order (none, without a query, for a benchmark that
    knows it has none: ``selectors.get_split``'s ``has_challenges``)."""
    if getattr(benchmark, "has_challenges", True) is False:
        return []
    now = now or timezone.now()
    return [_state(c, now) for c in Challenge.objects.filter(benchmark=benchmark).order_by("order", "name")]


def get_challenge_state(benchmark: Benchmark, name: str) -> ChallengeState:
    challenge = Challenge.objects.filter(benchmark=benchmark, name=name).first()
    if challenge is None:
        raise Http404(f"{benchmark.title} has no challenge {name!r}.")
    return _state(challenge, timezone.now())


# The archived board as pages and exports show it


def archive_specs(archive: ChallengeArchive) -> dict[str, MetricSpec]:
    return {m: MetricSpec.from_json(s) for m, s in archive.board.get("metric_specs", {}).items()}


def archive_fields(archive: ChallengeArchive) -> list[MethodField]:
    return [MethodField.of(f) for f in archive.board.get("method_fields", [])]


@dataclass
class ArchivedRow:
    row: dict[str, Any]
    cells: list[tuple[Any, MetricSpec]]
    fields: list[tuple[str, str]]


def archived_rows(archive: ChallengeArchive) -> tuple[list[ArchivedRow], list[ArchivedRow]]:
    """The archive's ranked rows and references, each with the board's columns as (value, spec)."""
    specs, fields = archive_specs(archive), archive_fields(archive)
    columns = archive.board.get("columns", [])
    default = MetricSpec()

    def one(row: dict[str, Any]) -> ArchivedRow:
        return ArchivedRow(row, [(row["scores"].get(c), specs.get(c.rpartition("/")[2], default)) for c in columns],
                           [(f.label, f.shown(row["fields"].get(f.name))) for f in fields if f.column])

    ranked = [one(r) for r in archive.rows if r["rank"] is not None or not _unranked(r)]
    return ranked, [one(r) for r in archive.rows if r["rank"] is None and _unranked(r)]


def _unranked(row: dict[str, Any]) -> bool:
    """A row the board listed apart from its ranking: a reference, a paper row of another protocol, a
    row awaiting its re-score."""
    return bool(row["reference"] or row.get("listed_apart") or row.get("state", "current") != "current")


CSV_HEAD = ["rank", "top", "method", "team", "reported_in_paper", "reference", "listed_apart", "state",
            "uses_extra_data", "verified", "scorer_version", "published_at", "venue", "paper_url", "protocol"]


def archive_csv(archive: ChallengeArchive) -> str:
    """The archived board as CSV: the row's facts, its method fields, every score, then the intervals."""
    columns, fields = archive.board.get("all_columns", []), archive_fields(archive)
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow([*CSV_HEAD, *(f"field.{f.name}" for f in fields), *columns, *interval_columns(columns)])
    for r in archive.rows:
        team = ANONYMOUS_LABEL if r["anonymous"] else r["team"]
        bounds = [r["intervals"].get(c) for c in columns]
        writer.writerow([csv_cell(v) for v in (
            "" if r["rank"] is None else r["rank"], "" if r["top"] is None else r["top"], r["method"], team,
            r["reported_in_paper"], r["reference"], r.get("listed_apart", False), r.get("state", "current"),
            r["uses_extra_data"], r["verified"], r["scorer_version"],
            r["published_at"], r["venue"], r["paper_url"], r["protocol"],
            *(f.shown(r["fields"].get(f.name)) for f in fields),
            *("" if r["scores"].get(c) is None else r["scores"][c] for c in columns),
            *("" if b is None else b[i] for b in bounds for i in (0, 1)))])
    return buffer.getvalue()


def archive_json(archive: ChallengeArchive, links: dict[str, str]) -> dict[str, Any]:
    """The archived board as the JSON export and the API give it."""
    return {"track": archive.track, "challenge": archive.challenge.name, "title": archive.title,
            "split": archive.split_name, "ended_at": archive.ended_at.isoformat(),
            "archived_at": archive.archived_at.isoformat(), "board": archive.board, **links,
            "rows": [r for r in archive.rows if r["rank"] is not None or not _unranked(r)],
            "unranked": [r for r in archive.rows if r["rank"] is None and _unranked(r)]}


def archive_bibtex(archive: ChallengeArchive, url: str) -> str:
    """How to cite the final board (a ``@misc`` entry at its permanent address)."""
    key = "".join(ch for ch in f"{archive.track}{archive.challenge.name}" if ch.isalnum()) + "final"
    benchmark = archive.board.get("benchmark_title", archive.track)
    fields = {"title": f"{{{archive.title}}}: final leaderboard ({benchmark}, {archive.split_name} split)",
              "howpublished": f"\\url{{{url}}}", "year": f"{archive.ended_at:%Y}",
              "note": f"Final board at the end of the challenge, {archive.ended_at:%Y-%m-%d}; archived "
                      f"{archive.archived_at:%Y-%m-%d}"}
    body = ",\n".join(f"  {k} = {{{v}}}" for k, v in fields.items())
    return f"@misc{{{key},\n{body}\n}}\n"


def dumps(data: dict[str, Any]) -> str:
    return json.dumps(data, indent=1, ensure_ascii=False)
