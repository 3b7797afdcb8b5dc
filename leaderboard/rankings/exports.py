"""The exports of a board (``export.csv``, ``export.json``): the rows of the same view as the page,
every page of it, with their paired tests and the method fields the benchmark declares.

Two queries of plain values and the rows' stored export texts (issue 11): the scores of a row are
written once, when the row is, and an export only joins them.
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass
from typing import Any

import orjson

from leaderboard.lib.csv_cells import safe_cell
from leaderboard.lib.method_fields import MethodField
from leaderboard.rankings.like_with_like import apart_rows
from leaderboard.rankings.models import (
    ANONYMOUS_LABEL,
    TAG_LENGTH,
    LeaderboardEntry,
    columns_tag,
    export_texts,
    interval_columns,
)
from leaderboard.rankings.paired_verdicts import Family, Rung, board_verdicts, rung, significance_json
from leaderboard.rankings.selectors import (
    LeaderboardView,
    best_first,
    filtered_entries,
    ordered_entries,
    with_units,
)
from leaderboard.submissions.models import ResultState

csv_cell = safe_cell  # the exports' cells (leaderboard.lib.csv_cells)


def _method_paper_cells(paper: dict[str, Any] | None) -> tuple[str, str]:
    """The CSV's ``method_paper`` ("Chen et al., ECCV 2020", or "none: why") and ``method_paper_url``."""
    if not paper:
        return "", ""
    if paper.get("none"):
        return f"none: {paper['none']}", ""
    return f"{paper['authors']}, {paper['venue']} {paper['year']}", paper["url"]


EXPORT_FIELDS = ("id", "name", "method_id", "team_name", "is_anonymous", "is_paper", "is_reference", "paper_note",
                 "paper_url", "venue", "method_paper", "protocol", "uses_extra_data", "is_verified", "scorer_version",
                 "submission_id", "published_at", "state", "fields", "after_challenge")
# Their names in exports and the API (entry_as_json).
EXPORT_KEYS = ("entry_id", "method", "method_id", "team", "anonymous", "reported_in_paper", "reference", "note",
               "paper_url", "venue", "method_paper", "protocol", "uses_extra_data", "verified", "scorer_version",
               "submission_id", "published_at", "state", "fields", "after_challenge")
_RANKED_KEYS = ("rank", *EXPORT_KEYS)


@dataclass
class ExportRow:
    """A row of an export: ``fields`` as in ``entry_as_json`` (but ``published_at``, a
    datetime: each format writes it as ISO 8601) except for the scores and intervals,
    which are ready-made text in the export's format (the JSON members
    ``"scores": {..}, "intervals": {..}``, or CSV cells)."""

    fields: dict[str, Any]
    scores: str


def export_rows(view: LeaderboardView, limit: int, fmt: str) -> tuple[list[ExportRow], Family]:
    """Every ranked row of the view (up to ``limit``), ranked as ``leaderboard_page`` ranks them,
    then the paper rows listed apart (``"listed_apart": True``, rank None, untested), then its
    reference rows (``"reference": True``, rank None, untested), then its rows that are not current
    (``"state"`` not "current", rank None, untested), with their scores as
    stored for ``fmt`` ("json" or "csv"), and each ranked row's paired test against the row
    above, adjusted over the adjacent pairs of the export's rows.

    Two queries of plain values and the rows' stored export texts (and one for the
    references): building thousands of model instances and re-encoding each score was
    most of an export's time (issue 11). Scores are decoded only for rows whose text is
    missing or was written for other columns (one more query).
    """
    columns = view.all_columns
    tag = columns_tag(columns)
    text_field = {"json": "export_json", "csv": "export_csv"}[fmt]
    # The texts are read apart, unsorted: carried through the sort they made it several times slower.
    texts = dict(filtered_entries(view).values_list("pk", text_field))
    rows: list[ExportRow] = []
    rungs: list[Rung] = []
    stale: dict[int, ExportRow] = {}

    def add(rank: int | None, fields: list[Any], apart: bool = False) -> None:
        row = dict(zip(_RANKED_KEYS, (rank, *fields)), listed_apart=apart)
        row["method_paper"] = row["method_paper"] or None
        if row["anonymous"]:
            row["team"] = None
        text = texts.get(row["entry_id"], "")  # "": published in between
        rows.append(export := ExportRow(row, text[TAG_LENGTH:]))
        if not text.startswith(tag):
            stale[row["entry_id"]] = export

    previous, rank = None, None
    listed = with_units(ordered_entries(view)).values_list(*EXPORT_FIELDS, "sort_value", "result_id", "test_labels",
                                                           "test_scorer", "test_partition", "test_scenes",
                                                           "test_min_scenes")[:limit]
    for i, (*fields, value, result_id, labels, scorer, partition, scenes, least) in enumerate(listed):
        rungs.append(rung(fields[0], result_id, labels, scorer, partition, value, scenes, least))
        if value is None:
            rank = None
        elif not i or value != previous:
            rank = i + 1
        previous = value
        add(rank, fields)
    ranked = len(rows)
    apart = apart_rows(view.split, view.protocol)
    unranked = [(True, filtered_entries(view).filter(apart, is_reference=False))] if apart is not None else []
    stale_rows = filtered_entries(view).filter(is_reference=False).exclude(state=ResultState.CURRENT)
    for listed_apart, entries in [*unranked, (False, filtered_entries(view).filter(is_reference=True)),
                                  (False, stale_rows)]:
        for fields in entries.order_by(best_first(view), "name").values_list(*EXPORT_FIELDS):
            add(None, list(fields), listed_apart)
    for pk, scores, bounds in (LeaderboardEntry.objects.filter(pk__in=stale).values_list("pk", "scores", "intervals")
                               if stale else ()):
        stale[pk].scores = export_texts(scores, columns, bounds)[fmt == "csv"][TAG_LENGTH:]
    verdicts, family = board_verdicts(rungs, view.sort, view.split.pk, "in this file")
    for above, row, verdict in zip([None, *rows[:ranked]], rows[:ranked], verdicts):
        row.fields.update(significance_json(verdict, above.fields["entry_id"] if above else None))
    for row in rows[ranked:]:
        row.fields.update(significance_json(None, None))
    return rows, family


# The CSV's columns before the scores (then one per method field the benchmark declares, ``field.<name>``).
CSV_HEAD = ["rank", "method", "team", "reported_in_paper", "uses_extra_data", "verified", "scorer_version",
            "published_at", "venue", "paper_url", "protocol", "reference", "adjusted_p_value",
            "no_significant_difference_from_row_above", "paired_test_note", "listed_apart", "labels", "method_paper", "method_paper_url",
            "state", "after_challenge"]


def csv_header(columns: list[str], fields: list[MethodField]) -> list[str]:
    """The CSV's header: the row's facts, its method fields, its scores, then their intervals."""
    return [*CSV_HEAD, *(f"field.{f.name}" for f in fields), *columns, *interval_columns(columns)]


def _significance_cells(fields: dict[str, Any]) -> tuple[Any, Any, str]:
    """The CSV's ``adjusted_p_value``, ``no_significant_difference_from_row_above`` (True/False) and
    ``paired_test_note``; all empty where the row was not tested against the row above."""
    p = fields["adjusted_p_value"]
    if p is None:
        return "", "", ""
    return p, fields["no_significant_difference_from_entry_id"] is not None, fields["paired_test_note"]


def csv_text(view: LeaderboardView, rows: list[ExportRow], fields: list[MethodField], scored_on: str) -> str:
    """The CSV export. ``scored_on``: what the split's scored rows were scored on (``labels``; a paper
    row's numbers are the real split's, whatever this split holds)."""
    buffer = io.StringIO()
    csv.writer(buffer).writerow(csv_header(view.all_columns, fields))
    # Each row's fields end in a comma, then come its stored score cells.
    writer = csv.writer(buffer, lineterminator=",")
    for r in rows:
        f = r.fields
        team = ANONYMOUS_LABEL if f["anonymous"] else f["team"]
        answers = f["fields"] or {}
        writer.writerow([csv_cell(v) for v in (f["rank"], f["method"], team, f["reported_in_paper"],
                                               f["uses_extra_data"], f["verified"], f["scorer_version"],
                                               f["published_at"].isoformat(), f["venue"], f["paper_url"],
                                               f["protocol"], f["reference"], *_significance_cells(f),
                                               f["listed_apart"], scored_on if not f["reported_in_paper"] else "real",
                                               *_method_paper_cells(f["method_paper"]), f["state"],
                                               f["after_challenge"],
                                               *(field.shown(answers.get(field.name)) for field in fields))])
        buffer.write(r.scores)  # numbers only, stored as CSV cells when the row was written
        buffer.write("\r\n")
    return buffer.getvalue()


def json_text(head: dict[str, Any], rows: list[ExportRow]) -> str:
    """The JSON export: ``head``, then the ranked rows, the paper rows listed apart, the references and
    the rows that are not current, each row's stored scores joined to its fields."""
    current = [r for r in rows if r.fields["state"] == ResultState.CURRENT]
    ranked = [r for r in current if not r.fields["reference"] and not r.fields["listed_apart"]]
    apart = [r for r in rows if r.fields["listed_apart"]]
    references = [r for r in current if r.fields["reference"]]
    not_current = [r for r in rows if r.fields["state"] != ResultState.CURRENT]
    # ``r.scores`` holds the members ``"scores": {..}, "intervals": {..}`` (``models.export_texts``);
    # orjson writes each row's fields (``published_at`` as ISO 8601) 5-10x faster than json.dumps.
    body, aside, refs, stale = (", ".join(f"{orjson.dumps(r.fields).decode()[:-1]}, {r.scores}}}" for r in part)
                                for part in (ranked, apart, references, not_current))
    return (f'{json.dumps(head)[:-1]}, "rows": [{body}], "apart": [{aside}], "references": [{refs}], '
            f'"not_current": [{stale}]}}')
