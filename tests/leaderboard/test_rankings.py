"""Public leaderboard views: ranking rule, sorting, filters, pages, exports, charts."""

from __future__ import annotations

import csv
import io
from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone

from evaluation_workers.tracks import get_track
from leaderboard.accounts.services import personal_team
from leaderboard.benchmarks.bundle_apply import load_bundled_benchmarks
from leaderboard.rankings.models import LeaderboardEntry
from leaderboard.rankings.selectors import LeaderboardView, leaderboard_page
from leaderboard.submissions.models import Method

GROUPS = ["What", "Is", "How", "Can", "Which", "Others"]


@pytest.fixture
def split(db):
    load_bundled_benchmarks()
    from leaderboard.benchmarks.models import Split

    return Split.objects.select_related("benchmark").get(benchmark__track="sqa3d", name="test")


def add(split, name, em, *, what=None, paper=False, extra=False, owner=None, days=0):
    method = Method.objects.create(team=personal_team(owner), name=name) if owner else None
    scores = {"EM": em, "EM_R": None if em is None else em + 0.01}
    scores.update({f"{g}/EM": what if g == "What" else em for g in GROUPS})
    entry = LeaderboardEntry.objects.create(split=split, method=method, name=name, is_paper=paper,
                                            uses_extra_data=extra, primary_score=em, scores=scores)
    LeaderboardEntry.objects.filter(pk=entry.pk).update(published_at=timezone.now() - timedelta(days=days))
    entry.refresh_from_db()
    return entry


def names(view, **kw):
    return [(r.rank, r.entry.name) for r in leaderboard_page(view, **kw).rows]


def test_ranks_are_competition_ranks_with_ties_by_earlier_publication_and_missing_last(split):
    add(split, "late-tie", 0.5, days=1)
    add(split, "early-tie", 0.5, days=5)
    add(split, "best", 0.7)
    add(split, "missing", None)
    add(split, "worst", 0.1)
    view = LeaderboardView.from_query(split, {})
    assert names(view) == [(1, "best"), (2, "early-tie"), (2, "late-tie"), (4, "worst"), (None, "missing")]


def test_sorting_by_a_group_column_reorders_and_reranks(split):
    add(split, "a", 0.6, what=0.1)
    add(split, "b", 0.5, what=0.9)
    add(split, "c", 0.4, what=None)
    view = LeaderboardView.from_query(split, {"sort": "What/EM"})
    assert names(view) == [(1, "b"), (2, "a"), (None, "c")]
    ascending = LeaderboardView.from_query(split, {"sort": "What/EM", "order": "asc"})
    assert names(ascending) == [(1, "a"), (2, "b"), (None, "c")]


def test_an_unknown_sort_or_metric_falls_back_to_the_primary_metric(split):
    view = LeaderboardView.from_query(split, {"sort": "scores; drop table", "metric": "nope"})
    assert (view.sort, view.metric) == ("EM", "EM")


def test_filters_hide_paper_rows_and_select_by_extra_data(split, owner):
    add(split, "paper", 0.9, paper=True)
    add(split, "extra", 0.5, extra=True, owner=owner)
    add(split, "plain", 0.4, owner=owner)
    assert [n for _, n in names(LeaderboardView.from_query(split, {"paper": "0"}))] == ["extra", "plain"]
    assert [n for _, n in names(LeaderboardView.from_query(split, {"extra": "no"}))] == ["paper", "plain"]
    assert [n for _, n in names(LeaderboardView.from_query(split, {"extra": "only"}))] == ["extra"]


def test_a_later_page_ranks_its_first_row_across_the_page_break(split):
    for i, em in enumerate([0.9, 0.8, 0.8, 0.8, 0.5]):
        add(split, f"m{i}", em, days=10 - i)
    page2 = LeaderboardView.from_query(split, {"page": "2"})
    assert names(page2, page_size=2) == [(2, "m2"), (2, "m3")]
    assert names(LeaderboardView.from_query(split, {"page": "3"}), page_size=2) == [(5, "m4")]


def test_the_page_url_state_reproduces_the_view(client, split):
    add(split, "a", 0.6, what=0.1)
    add(split, "b", 0.5, what=0.9)
    page = client.get("/benchmarks/sqa3d/?sort=What/EM&metric=EM&paper=0").content.decode()
    assert page.index(">b<") < page.index(">a<")
    assert 'href="?split=test&amp;metric=EM&amp;sort=What%2FEM&amp;order=asc&amp;paper=0"' in page


def test_exports_hold_the_same_rows_as_the_page_with_the_scorer_version(client, split):
    add(split, "a", 0.6, what=0.1)
    add(split, "b", 0.5, what=0.9)
    add(split, "paper", 0.99, paper=True)
    body = client.get("/benchmarks/sqa3d/export.json?sort=What/EM&paper=0").json()
    assert [r["method"] for r in body["rows"]] == ["b", "a"] and body["scorer_version"] == get_track("sqa3d").scorer_version
    assert body["rows"][0]["scores"]["What/EM"] == 0.9 and "Which/EM_R" in body["columns"]
    rows = list(csv.DictReader(io.StringIO(client.get("/benchmarks/sqa3d/export.csv?sort=What/EM&paper=0")
                                           .content.decode())))
    assert [r["method"] for r in rows] == ["b", "a"] and float(rows[0]["What/EM"]) == 0.9
    assert client.get("/benchmarks/sqa3d/export.xml").status_code == 404


def test_the_first_page_of_a_large_leaderboard_takes_a_bounded_number_of_queries(client, split,
                                                                                 django_assert_max_num_queries):
    LeaderboardEntry.objects.bulk_create(
        LeaderboardEntry(split=split, name=f"m{i}", primary_score=i / 300, scores={"EM": i / 300})
        for i in range(300))
    with django_assert_max_num_queries(10):
        response = client.get("/benchmarks/sqa3d/?page=2&sort=What/EM")
    assert response.status_code == 200
    with django_assert_max_num_queries(6):
        assert client.get("/api/v1/leaderboards/sqa3d?page=3").json()["pages"] == 6


def test_the_method_page_shows_scores_and_a_chart_against_best_and_median(client, split, owner):
    entry = add(split, "Mine", 0.4, what=0.3, owner=owner)
    add(split, "Other", 0.6, what=0.8, owner=owner)
    Method.objects.filter(pk=entry.method_id).update(paper_url="https://example.org/paper",
                                                     authors="A. One, B. Two")
    page = client.get(f"/methods/{entry.method_id}/").content.decode()
    assert "<svg" in page and "Best" in page and "Median" in page and "30.0" in page
    bib = client.get(f"/methods/{entry.method_id}/bibtex").content.decode()
    assert bib.startswith("@misc{Mine,") and "author = {A. One and B. Two}" in bib
    api = client.get(f"/api/v1/methods/{entry.method_id}").json()
    assert api["results"][0]["scores"]["What/EM"] == 0.3


def test_a_method_without_public_results_is_404(client, split, owner):
    method = Method.objects.create(team=personal_team(owner), name="Private")
    assert client.get(f"/methods/{method.pk}/").status_code == 404
    assert client.get(f"/api/v1/methods/{method.pk}").status_code == 404


def test_compare_shows_differences_against_the_first_pick(client, split):
    a, b = add(split, "A", 0.5, what=0.2), add(split, "B", 0.6, what=0.1)
    page = client.get(f"/benchmarks/sqa3d/compare/?e={a.pk}&e={b.pk}").content.decode()
    assert "(+10.0)" in page and "(-10.0)" in page and "<svg" in page
    api = client.get(f"/api/v1/leaderboards/sqa3d/compare?e={b.pk}&e={a.pk}").json()
    assert [e["method"] for e in api["entries"]] == ["B", "A"]


def test_progress_records_only_improvements_of_the_rows_shown(client, split):
    add(split, "first", 0.3, days=30)
    add(split, "worse", 0.2, days=20)
    add(split, "better", 0.5, days=10)
    add(split, "paper", 0.4, paper=True, days=40)
    points = client.get("/api/v1/leaderboards/sqa3d/progress").json()["points"]
    assert [(p["method"], p["best"]) for p in points] == [("paper", 0.4), ("better", 0.5)]
    points = client.get("/api/v1/leaderboards/sqa3d/progress?paper=0").json()["points"]
    assert [(p["method"], p["best"]) for p in points] == [("first", 0.3), ("better", 0.5)]
    assert "Best EM over time" in client.get("/benchmarks/sqa3d/").content.decode()


def test_embargoed_scores_are_hidden_from_the_public_but_not_from_maintainers(client, split, maintainer):
    add(split, "scored", 0.5)
    add(split, "paper", 0.4, paper=True)
    split.results_visible_after = timezone.now() + timedelta(days=3)
    split.save()
    body = client.get("/api/v1/leaderboards/sqa3d").json()
    assert body["results_embargoed"] and [r["method"] for r in body["rows"]] == ["paper"]
    assert "become visible" in client.get("/benchmarks/sqa3d/").content.decode()
    client.force_login(maintainer)
    assert [r["method"] for r in client.get("/api/v1/leaderboards/sqa3d").json()["rows"]] == ["scored", "paper"]


def test_paper_rows_without_the_viewed_metric_are_kept_and_ranked_last(split):
    """Issue 14: switching the metric never drops rows (it used to drop them silently)."""
    add(split, "scored", 0.5)
    LeaderboardEntry.objects.create(split=split, name="semantic-only paper", is_paper=True,
                                    scores={"EM_R": 0.3})
    assert names(LeaderboardView.from_query(split, {})) == [(1, "scored"), (None, "semantic-only paper")]
    assert [n for _, n in names(LeaderboardView.from_query(split, {"metric": "EM_R"}))] == \
        ["scored", "semantic-only paper"]


def test_csv_cells_that_a_spreadsheet_would_run_are_quoted_and_numbers_stay_numbers(client, owner, sqa3d_split,
                                                                                    sqa3d_files, sent_tasks,
                                                                                    settings):
    """Formula injection: a method or team named '=...' must reach a spreadsheet as text."""
    import csv
    import io

    from evaluation_workers.tracks import get_track
    from leaderboard.accounts.services import do_create_team
    from leaderboard.rankings.models import LeaderboardEntry
    from leaderboard.submissions import lifecycle, services
    from tests.leaderboard.conftest import describe_method

    settings.QUOTA_PER_DAY = 10
    team = do_create_team(owner, "@Lab")
    result = get_track("sqa3d").score(sqa3d_files["labels"], sqa3d_files["predictions"], lambda f, m="": None)
    names = ['=HYPERLINK("http://evil","x")', "+1+1", "-2+3", "@SUM(A1)", "Plain"]
    for name in names:
        submission = services.check_create_submission(
            user=owner, track="sqa3d", split="test", method_name=name, team=team,
            file=io.BytesIO(sqa3d_files["predictions"].read_bytes()), file_name="p.json")
        lifecycle.record_result(submission_id=submission.pk, attempt=1, result=result)
        describe_method(submission.method)
        services.check_publish(owner, submission)
    entry = LeaderboardEntry.objects.get(name="Plain")
    entry.scores = {**entry.scores, "EM": -0.25}
    entry.save()
    rows = list(csv.DictReader(io.StringIO(client.get("/benchmarks/sqa3d/export.csv").content.decode())))
    by_method = {r["method"]: r for r in rows}
    assert set(by_method) == {"'" + n for n in names[:-1]} | {"Plain"}
    assert {r["team"] for r in rows} == {"'@Lab"}
    assert by_method["Plain"]["EM"] == "-0.25"
    # Method and team names are stripped on the way in; tabs and CRs are quoted wherever they come from.
    from leaderboard.rankings.exports import csv_cell as _csv_cell

    assert [_csv_cell(v) for v in ("\tx", "\rx", -1.5, 0, "a=b")] == ["'\tx", "'\rx", -1.5, 0, "a=b"]


def test_exports_write_rows_without_stored_export_texts_and_quote_names(client, split):
    """Rows made by bulk_create (or stored for an older scorer's columns) are encoded afresh."""
    add(split, "saved, with a comma", 0.6, what=0.1)
    LeaderboardEntry.objects.bulk_create([LeaderboardEntry(split=split, name="bulk", primary_score=0.5,
                                                           scores={"EM": 0.5, "What/EM": 0.25})])
    body = client.get("/benchmarks/sqa3d/export.json").json()
    assert [(r["method"], r["scores"]["What/EM"], r["scores"]["Is/EM"]) for r in body["rows"]] == \
        [("saved, with a comma", 0.1, 0.6), ("bulk", 0.25, None)]
    rows = list(csv.DictReader(io.StringIO(client.get("/benchmarks/sqa3d/export.csv").content.decode())))
    assert [(r["method"], r["What/EM"], r["Is/EM"]) for r in rows] == \
        [("saved, with a comma", "0.1", "0.6"), ("bulk", "0.25", "")]


def test_export_rows_match_the_api_rows_field_for_field(client, split):
    """The exports write their rows apart from the API (plain values, stored score texts, orjson):
    every field, the competition ranks of tied rows and the ISO 8601 dates are the same."""
    add(split, "Zweiter Ansatz ü", 0.5, days=2)
    add(split, "tied below", 0.5, days=1)
    add(split, "first", 0.7, days=3)
    add(split, "unscored", None)
    LeaderboardEntry.objects.filter(name="tied below").update(is_anonymous=True, team_name="hidden team")
    LeaderboardEntry.objects.filter(name="first").update(
        published_at=datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC))  # whole seconds: no fraction
    api = client.get("/api/v1/leaderboards/sqa3d?per_page=100").json()["rows"]
    exported = client.get("/benchmarks/sqa3d/export.json").json()["rows"]
    assert [(r["method"], r["rank"], r["team"]) for r in exported] == [
        ("first", 1, ""), ("Zweiter Ansatz ü", 2, ""), ("tied below", 2, None), ("unscored", None, "")]
    assert exported[0]["published_at"] == "2026-01-02T03:04:05+00:00"
    for row, shown in zip(exported, api, strict=True):
        assert row == shown
    by_method = {r["method"]: r for r in csv.DictReader(io.StringIO(
        client.get("/benchmarks/sqa3d/export.csv").content.decode()))}
    for row in exported:
        assert by_method[row["method"]]["published_at"] == row["published_at"]
        assert by_method[row["method"]]["rank"] == ("" if row["rank"] is None else str(row["rank"]))
