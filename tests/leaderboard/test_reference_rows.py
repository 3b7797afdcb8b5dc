"""Reference rows are not contestants (issue 27): human performance, oracles and upper
bounds copied from a paper are listed apart, never ranked, never a chart's Best or Median,
and drawn as a line. Like is ranked with like (issue 35): paper rows of another protocol are
listed apart by default, each with its protocol; ``protocol=all`` ranks every protocol
together, and a filter keeps one protocol's rows."""

from __future__ import annotations

import csv
import io
import re
from datetime import timedelta

import pytest
from django.utils import timezone

from leaderboard.benchmarks.bundle_apply import load_bundled_benchmarks, load_bundled_paper_rows
from leaderboard.benchmarks.bundles import BUNDLES_DIR, read_bundle
from leaderboard.benchmarks.models import Split
from leaderboard.rankings import charts
from leaderboard.rankings.models import LeaderboardEntry
from leaderboard.rankings.selectors import (
    LeaderboardView,
    best_over_time,
    group_profile,
    leaderboard_page,
    reference_entries,
    track_summary,
)
from leaderboard.rankings.services import do_load_paper_rows

GROUPS = ["What", "Is", "How", "Can", "Which", "Others"]


@pytest.fixture
def split(db):
    load_bundled_benchmarks()
    return Split.objects.select_related("benchmark").get(benchmark__track="sqa3d", name="test")


def add(split, name, em, *, paper=False, reference=False, protocol="", days=0):
    scores = {"EM": em, "EM_R": em, **{f"{g}/EM": em for g in GROUPS}}
    entry = LeaderboardEntry.objects.create(split=split, name=name, is_paper=paper or reference,
                                            is_reference=reference, protocol=protocol, primary_score=em,
                                            scores=scores)
    LeaderboardEntry.objects.filter(pk=entry.pk).update(published_at=timezone.now() - timedelta(days=days))
    return entry


@pytest.fixture
def board(split):
    """Two scored rows, a paper row of the paper's protocol, a paper row without a declared
    protocol, and a human reference far above them all."""
    add(split, "Scored high", 0.5, protocol="open-answer-em", days=1)
    add(split, "Scored low", 0.3, protocol="open-answer-em", days=2)
    add(split, "Paper 706", 0.45, paper=True, protocol="answer-classification-706", days=30)
    add(split, "Paper undeclared", 0.4, paper=True, days=40)
    add(split, "Human", 0.9, reference=True, protocol="answer-classification-706", days=30)
    return split


def test_sqa3d_human_row_is_marked_reference_in_its_data_and_loaded_as_one(split):
    [data] = read_bundle(BUNDLES_DIR / "sqa3d.yaml").paper_rows
    assert [r["method"] for r in data["rows"] if r.get("reference")] == ["Human (amateur)"]
    load_bundled_paper_rows("sqa3d")
    assert list(LeaderboardEntry.objects.filter(is_reference=True).values_list("name", flat=True)) == [
        "Human (amateur)"]
    assert LeaderboardEntry.objects.filter(is_paper=True, is_reference=False).count() == 10


def test_a_reference_that_is_not_true_or_false_is_refused(split):
    [data] = read_bundle(BUNDLES_DIR / "sqa3d.yaml").paper_rows
    rows = [{**data["rows"][0], "reference": "yes"}, *data["rows"][1:]]
    with pytest.raises(ValueError, match=r"Blind test: expected reference to be true or false, but got 'yes'"):
        do_load_paper_rows(split, {**data, "rows": rows}, "sqa3d.yaml")


def test_a_reference_row_is_never_ranked_and_is_listed_apart(board):
    view = LeaderboardView.from_query(board, {"protocol": "all"})
    page = leaderboard_page(view)
    assert [(r.rank, r.entry.name) for r in page.rows] == [
        (1, "Scored high"), (2, "Paper 706"), (3, "Paper undeclared"), (4, "Scored low")]
    assert page.count == 4
    assert [e.name for e in reference_entries(view)] == ["Human"]
    assert [e.name for e in reference_entries(LeaderboardView.from_query(board, {}))] == ["Human"]
    # Hiding paper rows hides the references copied from papers too.
    assert reference_entries(LeaderboardView.from_query(board, {"paper": "0"})) == []


def test_the_board_lists_references_below_the_ranked_table(client, board):
    page = client.get("/benchmarks/sqa3d/").content.decode()
    ranked, _, rest = page.partition('id="references"')
    assert "Human" not in ranked.split("<tbody>")[1] and "Human" in rest
    assert "not ranked" in rest
    # The rank column of a reference says what it is, no number.
    reference_row = re.search(r'<tr class="[^"]*reference[^"]*">.*?</tr>', rest, re.S).group(0)
    assert '<td class="rank">ref' in reference_row


def test_the_api_and_exports_say_reference_and_leave_its_rank_null(client, board):
    body = client.get("/api/v1/leaderboards/sqa3d?protocol=all").json()
    assert [r["method"] for r in body["rows"]] == ["Scored high", "Paper 706", "Paper undeclared", "Scored low"]
    assert all(r["reference"] is False for r in body["rows"])
    [human] = body["references"]
    assert (human["method"], human["rank"], human["reference"]) == ("Human", None, True)
    exported = client.get("/benchmarks/sqa3d/export.json?protocol=all").json()
    assert [r["method"] for r in exported["rows"]] == [r["method"] for r in body["rows"]]
    assert exported["references"] == body["references"]
    rows = list(csv.DictReader(io.StringIO(client.get("/benchmarks/sqa3d/export.csv?protocol=all").content.decode())))
    assert [(r["method"], r["rank"], r["reference"]) for r in rows] == [
        ("Scored high", "1", "False"), ("Paper 706", "2", "False"), ("Paper undeclared", "3", "False"),
        ("Scored low", "4", "False"), ("Human", "", "True")]


def test_a_reference_is_never_the_best_or_median_of_a_chart(client, board):
    profile = group_profile(board, "EM")  # nor a row of another protocol (Paper 706: listed apart)
    assert profile["What"] == {"best": 0.5, "median": pytest.approx(0.4)}
    page = client.get(f"/entries/{LeaderboardEntry.objects.get(name='Paper 706').pk}/").content.decode()
    svg = page[page.index("<svg"):]
    assert "Best, What: 50.0" in svg and "Best, What: 90.0" not in svg
    # It is drawn as a line across each group, named as a reference.
    assert '<g class="reference"' in svg and "Human (reference), What: 90.0" in svg


def test_the_best_over_time_leaves_references_out_and_draws_them_as_a_line(client, board):
    view = LeaderboardView.from_query(board, {"protocol": "all"})
    assert [name for _, _, name in best_over_time(view)] == ["Paper undeclared", "Paper 706", "Scored high"]
    # By default over the rows ranked: this service's protocol only.
    assert [name for _, _, name in best_over_time(LeaderboardView.from_query(board, {}))] == [
        "Paper undeclared", "Scored high"]
    progress = client.get("/api/v1/leaderboards/sqa3d/progress?protocol=all").json()
    assert [p["method"] for p in progress["points"]] == ["Paper undeclared", "Paper 706", "Scored high"]
    assert progress["references"] == [{"method": "Human", "value": 0.9}]
    page = client.get("/benchmarks/sqa3d/").content.decode()
    chart = page[page.index('class="chart progress"'):]
    assert 'class="reference"' in chart and "Human 90.0" in chart


def test_the_seeded_sqa3d_board_ranks_no_human_first_anywhere(client, split):
    load_bundled_paper_rows("sqa3d")
    rows = client.get("/api/v1/leaderboards/sqa3d?protocol=all").json()["rows"]
    assert rows[0]["method"] == "ScanQA + aux. task" and rows[0]["rank"] == 1
    summary = track_summary(split, embargoed=False)
    assert "Human (amateur)" not in [e.name for _, e, _ in summary.leaders]
    points = client.get("/api/v1/leaderboards/sqa3d/progress?protocol=all").json()["points"]
    assert [p["method"] for p in points] == ["ScanQA + aux. task"]


def test_a_reference_can_be_compared_and_its_chart_draws_it_as_a_line(client, board):
    high, human = (LeaderboardEntry.objects.get(name=n) for n in ("Scored high", "Human"))
    page = client.get(f"/benchmarks/sqa3d/compare/?e={high.pk}&e={human.pk}").content.decode()
    # The human row was measured under the paper's protocol: its difference is marked, not plain.
    assert "reference" in page and "(+40.0 ≠)" in page and 'id="unlike-note"' in page
    assert 'class="reference"' in page[page.index("<svg"):]


def test_rows_of_another_protocol_are_listed_apart_unless_all_are_ranked_together(client, board):
    """Issue 35: by default a board ranks one protocol, this service's; the other protocols' paper
    rows are listed in their own section, each with its protocol; ``protocol=all`` ranks them all."""
    view = LeaderboardView.from_query(board, {})
    assert [(r.rank, r.entry.name) for r in leaderboard_page(view).rows] == [
        (1, "Scored high"), (2, "Paper undeclared"), (3, "Scored low")]
    page = client.get("/benchmarks/sqa3d/").content.decode()
    ranked, _, rest = page.partition('id="apart"')
    assert "Paper 706" not in ranked.split("<tbody>")[1]
    apart = rest.split("</section>")[0]
    row = re.search(r'<tr[^>]*>(?:(?!</tr>).)*Paper 706.*?</tr>', apart, re.S).group(0)
    assert 'class="protocol other"' in row and "706-way answer classification" in row
    assert '<td class="rank"><span title="Listed apart' in row
    assert "Other protocols" in apart and 'id="rank-all"' in apart and "protocol=all" in apart
    undeclared = re.search(r'<tr[^>]*>(?:(?!</tr>).)*Paper undeclared.*?</tr>', ranked, re.S).group(0)
    assert 'protocol other' not in undeclared  # no declared protocol: scored as this service scores
    # The control, on the page and in the API and exports: every protocol ranked together.
    assert 'option value="all" >all ranked together' in page.replace("  ", " ")
    together = client.get("/benchmarks/sqa3d/?protocol=all").content.decode()
    assert 'option value="all" selected' in together and 'id="apart"' not in together
    row = re.search(r'<tr[^>]*>(?:(?!</tr>).)*Paper 706.*?</tr>', together, re.S).group(0)
    assert '<td class="rank">2' in row and 'class="protocol other"' in row
    api = client.get("/api/v1/leaderboards/sqa3d").json()
    assert [r["method"] for r in api["rows"]] == ["Scored high", "Paper undeclared", "Scored low"]
    assert [(r["method"], r["rank"], r["listed_apart"], r["protocol"]) for r in api["apart"]] == [
        ("Paper 706", None, True, "answer-classification-706")]
    assert (api["apart_reason"], api["protocol"]) == ("other_protocols", None)
    everything = client.get("/api/v1/leaderboards/sqa3d?protocol=all").json()
    assert len(everything["rows"]) == 4 and everything["apart"] == [] and everything["apart_reason"] is None
    rows = list(csv.DictReader(io.StringIO(client.get("/benchmarks/sqa3d/export.csv").content.decode())))
    assert [(r["method"], r["rank"], r["listed_apart"]) for r in rows] == [
        ("Scored high", "1", "False"), ("Paper undeclared", "2", "False"), ("Scored low", "3", "False"),
        ("Paper 706", "", "True"), ("Human", "", "False")]
    exported = client.get("/benchmarks/sqa3d/export.json").json()
    assert [r["method"] for r in exported["apart"]] == ["Paper 706"] and len(exported["rows"]) == 3
    # The home page's leaders are this service's protocol's.
    assert [(rank, e.name) for rank, e, _ in track_summary(board, embargoed=False).leaders] == [
        (1, "Scored high"), (2, "Paper undeclared"), (3, "Scored low")]


def test_the_protocol_filter_keeps_rows_scored_as_this_service_scores(client, board):
    view = LeaderboardView.from_query(board, {"protocol": "open-answer-em"})
    assert [r.entry.name for r in leaderboard_page(view).rows] == ["Scored high", "Paper undeclared", "Scored low"]
    assert "protocol=open-answer-em" in view.query()
    page = client.get("/benchmarks/sqa3d/?protocol=open-answer-em").content.decode()
    assert 'option value="open-answer-em" selected' in page and "Paper 706" not in page
    api = client.get("/api/v1/leaderboards/sqa3d?protocol=open-answer-em").json()
    assert [r["method"] for r in api["rows"]] == ["Scored high", "Paper undeclared", "Scored low"]
    assert api["references"] == []  # the human row was scored under the paper's protocol
    exported = client.get("/benchmarks/sqa3d/export.csv?protocol=open-answer-em").content.decode()
    assert "Paper 706" not in exported and "Paper undeclared" in exported
    other = client.get("/api/v1/leaderboards/sqa3d?protocol=answer-classification-706").json()
    assert [r["method"] for r in other["rows"]] == ["Paper 706"]
    client.raise_request_exception = False
    bad = client.get("/api/v1/leaderboards/sqa3d?protocol=made-up")
    assert bad.status_code == 400 and "protocol" in bad.json()["error"]["message"]


def test_a_track_with_one_protocol_offers_no_protocol_filter(client, split):
    load_bundled_paper_rows("openscan")
    page = client.get("/benchmarks/openscan/").content.decode()
    assert 'name="protocol"' not in page


def test_the_progress_chart_draws_a_reference_line_with_its_label():
    from datetime import UTC, datetime

    svg = charts.progress([(datetime(2024, 1, 1, tzinfo=UTC), 0.4, "A")], "t", references=[("Human", 0.9)])
    assert 'class="reference"' in svg and "Human 90.0" in svg


def test_the_openapi_schemas_describe_answers_with_references(client, board):
    import jsonschema

    doc = client.get("/api/v1/openapi.json").json()
    registry = {"components": doc["components"]}
    for path, url in [("/api/v1/leaderboards/{track}", "/api/v1/leaderboards/sqa3d"),
                      ("/api/v1/leaderboards/{track}/progress", "/api/v1/leaderboards/sqa3d/progress")]:
        schema = doc["paths"][path]["get"]["responses"]["200"]["content"]["application/json"]["schema"]
        body = client.get(url).json()
        assert body["references"]
        jsonschema.validate(body, {**schema, **registry})
    params = {p["name"] for p in doc["paths"]["/api/v1/leaderboards/{track}"]["get"]["parameters"]}
    assert {"protocol", "iou"} <= params


def test_the_migration_marks_the_references_of_rows_loaded_before(split):
    from importlib import import_module

    from django.apps import apps

    load_bundled_paper_rows("sqa3d")
    LeaderboardEntry.objects.update(is_reference=False)  # as loaded before the field existed
    import_module("leaderboard.rankings.migrations.0009_entry_is_reference").mark_references(apps, None)
    assert list(LeaderboardEntry.objects.filter(is_reference=True).values_list("name", flat=True)) == [
        "Human (amateur)"]
