"""Writes of precomputed leaderboard rows."""

from __future__ import annotations

from datetime import UTC, date, datetime, time
from typing import Any

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from evaluation_workers.tracks.metric_ranges import score_refusal
from leaderboard.benchmarks import phases
from leaderboard.benchmarks.models import Split
from leaderboard.lib.pagecache import bump
from leaderboard.rankings.models import LeaderboardEntry


def flatten_scores(metrics: dict[str, Any], breakdown: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """``{"EM": .., "What/EM": .., "What/count": ..}`` from a result's metrics and breakdown."""
    flat = dict(metrics)
    for group, values in breakdown.items():
        for metric, value in values.items():
            flat[f"{group}/{metric}"] = value
    return flat


def refresh_entry(method: Any, split: Split, *, ask_tests: bool = True) -> LeaderboardEntry | None:
    """Rewrite the row of ``method`` on ``split`` from its published submission (or drop it).

    The row shows the result the public may see now (``shown_result``: the
    public subset's until the split is revealed, then the private remainder's).
    While the split is frozen (``phases.board_is_held``) a row is never added
    or changed, only dropped (withdrawn, hidden, disqualified): what is
    published or re-scored meanwhile appears at the reveal (``do_refresh_split``).
    Once it commits, the paired tests the split's boards now show are asked
    (``paired_tests.do_ask_board_tests``) unless ``ask_tests`` is off (the caller asks once for many rows).
    """
    from leaderboard.submissions.models import Result, Submission, shown_result

    with transaction.atomic():
        # Every branch below changes (or may change) the row; cached pages move on commit.
        bump(split.benchmark.track)
        published = (Submission.objects.filter(method=method, split=split, is_published=True)
                     .select_related("team").first())
        result = shown_result(Result.objects.filter(submission=published), split) if published else None
        if ask_tests:
            transaction.on_commit(lambda: ask_board_tests(split.pk), robust=True)
        if published is None or result is None or published.is_hidden or published.is_disqualified:
            LeaderboardEntry.objects.filter(method=method, split=split).delete()
            return None
        anonymous = type(method).objects.filter(pk=method.pk, is_anonymous=True).exists()
        if phases.board_is_held(split):
            # The freeze holds a row's scores, not who it is: a method revealed meanwhile names its team now.
            held = LeaderboardEntry.objects.filter(method=method, split=split)
            if not anonymous:
                held.filter(is_anonymous=True).update(team_name=published.team.name, is_anonymous=False)
            return held.first()
        scores = flatten_scores(result.metrics, result.breakdown)
        spec = split.benchmark.spec
        entry, _ = LeaderboardEntry.objects.update_or_create(
            method=method, split=split,
            defaults={"submission": published, "result": result, "name": method.name,
                      # The row of an anonymous method never holds its team (pages, API, exports read it).
                      "team_name": "" if anonymous else published.team.name, "is_anonymous": anonymous,
                      "uses_extra_data": bool(method.uses_extra_data),
                      "is_verified": published.is_verified,
                      "primary_score": scores.get(spec.primary_metric), "scores": scores,
                      "intervals": {k: v for k, v in result.scene_intervals.items() if v is not None},
                      "scorer_version": result.scorer_version, "is_paper": False,
                      "protocol": spec.protocols[0].key if spec.protocols else ""})
        return entry


def ask_board_tests(split_id: int) -> None:
    """Ask for the paired tests the boards of a split show now (after a change of its rows commits)."""
    from leaderboard.rankings.paired_tests import do_ask_board_tests

    do_ask_board_tests(Split.objects.select_related("benchmark").get(pk=split_id))


def do_refresh_split(split: Split) -> int:
    """Rewrite every row of ``split`` (at the reveal, or when its phases change); returns how many there are."""
    from leaderboard.submissions.models import Method

    methods = Method.objects.filter(Q(submissions__split=split, submissions__is_published=True)
                                    | Q(entries__split=split)).distinct()
    for method in methods:
        refresh_entry(method, split, ask_tests=False)
    transaction.on_commit(lambda: ask_board_tests(split.pk), robust=True)
    return LeaderboardEntry.objects.filter(split=split, is_paper=False).count()


def do_reveal(split: Split, when: datetime | None = None) -> Split:
    """Reveal the full board of ``split``: private scores, and the rows the freeze held back."""
    with transaction.atomic():
        locked = Split.objects.select_for_update().select_related("benchmark").get(pk=split.pk)
        if locked.revealed_at is None:
            locked.revealed_at = when or timezone.now()
            locked.save(update_fields=["revealed_at"])
        do_refresh_split(locked)
    return locked


def reveal_if_due(split: Split) -> Split:
    """Reveal a split whose deadline passed (``reveal_at_deadline``) but whose board was not rebuilt yet.

    Celery beat does it every minute (``tasks.reveal_due``); readers do it too,
    so that no page shows the frozen board under a "revealed" phase meanwhile.
    """
    if split.revealed_at is None and phases.is_revealed(split):
        return do_reveal(split, split.deadline)
    return split


def do_reveal_due() -> int:
    """Reveal every split whose deadline passed; returns how many."""
    due = Split.objects.select_related("benchmark").filter(revealed_at__isnull=True, reveal_at_deadline=True,
                                                            deadline__lte=timezone.now())
    return sum(reveal_if_due(split).revealed_at is not None for split in due)


def paper_metadata(data: dict[str, Any], row: dict[str, Any]) -> dict[str, Any]:
    """The citation fields of one paper row: its own ``paper`` (and ``protocol``) over its block's.

    ``paper``: ``{"url", "venue", "published": "YYYY-MM-DD"}``, the publication the
    numbers were copied from; ``published`` becomes the row's ``published_at``
    (midnight UTC), which orders ties.
    """
    paper = {**data.get("paper", {}), **row.get("paper", {})}
    fields: dict[str, Any] = {"paper_url": paper.get("url", ""), "venue": paper.get("venue", ""),
                              "protocol": row.get("protocol", data.get("protocol", ""))}
    if paper.get("published"):
        fields["published_at"] = datetime.combine(date.fromisoformat(str(paper["published"])), time(), tzinfo=UTC)
    return fields


def reference_flag(where: str, row: dict[str, Any]) -> bool:
    """A paper row's ``reference`` (absent: false), refused unless true or false."""
    flag = row.get("reference", False)
    if not isinstance(flag, bool):
        raise ValueError(f"{where}: {row['method']}: expected reference to be true or false, but got {flag!r}")
    return flag


def paper_row_fields(split: Split, data: dict[str, Any], row: dict[str, Any], where: str = "") -> dict[str, Any]:
    """What the row "reported in paper" ``row`` of the block ``data`` holds on ``split`` (its entry's fields)."""
    spec = split.benchmark.spec
    metadata = paper_metadata(data, row)
    if metadata["protocol"] and spec.protocol(metadata["protocol"]) is None:
        raise ValueError(f"{where}: {row['method']}: unknown protocol {metadata['protocol']!r} for {spec.name}")
    for key, value in row["scores"].items():
        if refusal := score_refusal(spec, key, value):
            raise ValueError(f"{where}: {row['method']}: scores.{key}: {refusal}")
    return {"paper_note": row.get("note") or data.get("source", ""),
            "scores": row["scores"], "primary_score": row["scores"].get(spec.primary_metric),
            "uses_extra_data": row.get("uses_extra_data", False),
            "is_reference": reference_flag(where, row), **metadata}


def do_load_paper_rows(split: Split, data: dict[str, Any], where: str = "") -> int:
    """Load the rows "reported in paper" of one block of a benchmark bundle's ``paper_rows`` on ``split``
    (idempotent: rows loaded before get the block's scores, citation and ``reference`` again).

    Block: ``{"split": ..., "source": ..., "paper": {"url", "venue", "published"}, "protocol": ...,
    "rows": [{"method", "note", "scores"[, "paper"][, "protocol"][, "uses_extra_data"][, "reference"]}]}``,
    scores flat as in ``flatten_scores``, as fractions; ``protocol`` one of the track's
    ``Track.protocols`` keys (absent: scored the way this service scores); ``reference: true``
    for a point of reference that is not a contestant (human performance, an oracle, an
    upper bound): listed apart from the ranked rows, drawn as a line on charts.
    """
    fields = [(row["method"], paper_row_fields(split, data, row, where)) for row in data["rows"]]
    bump(split.benchmark.track)
    for name, defaults in fields:
        LeaderboardEntry.objects.update_or_create(split=split, name=name, is_paper=True, defaults=defaults)
    return len(fields)
