"""MMScan's 14 metrics, one IoU threshold at a time (issue 27): the tables of the method,
paper-row and compare pages and the board follow ``iou`` in the URL; charts have axis
titles, the metric's name and round ticks."""

from __future__ import annotations

import re

import pytest

from evaluation_workers.tracks import get_track
from leaderboard.accounts.services import personal_team
from leaderboard.benchmarks.bundle_apply import load_bundled_benchmarks
from leaderboard.benchmarks.models import Split
from leaderboard.lib.thresholds import metric_at, metrics_at, thresholds
from leaderboard.rankings import charts
from leaderboard.rankings.models import LeaderboardEntry
from leaderboard.rankings.selectors import LeaderboardView
from leaderboard.submissions.models import Method

SPEC = get_track("mmscan-vg")


@pytest.fixture
def mmscan(db, owner):
    """A scored MMScan row (every metric, every category) and a paper row."""
    load_bundled_benchmarks()
    split = Split.objects.select_related("benchmark").get(benchmark__track="mmscan-vg", name="val")
    method = Method.objects.create(team=personal_team(owner), name="GroundNet")
    scores = {}
    for i, metric in enumerate(SPEC.metrics):
        scores[metric] = 0.3 + i / 100
        for j, group in enumerate(SPEC.groups):
            scores[f"{group}/{metric}"] = 0.2 + i / 100 + j / 50
    entry = LeaderboardEntry.objects.create(split=split, method=method, name="GroundNet", scores=scores,
                                            primary_score=scores[SPEC.primary_metric],
                                            protocol="exact-iou")
    paper = LeaderboardEntry.objects.create(split=split, name="PaperNet", is_paper=True, protocol="devkit-iou",
                                            scores={"gTop-1@0.25": 0.26, "gTop-1@0.5": 0.1},
                                            primary_score=0.26)
    return {"split": split, "entry": entry, "paper": paper, "method": method}


def headers(page: str) -> list[str]:
    table = page[page.index('<table class="scores'):]
    table = table[:table.index("</thead>")]
    return re.findall(r'<th class="num"[^>]*>([^<]+)</th>', table)


def test_the_track_s_thresholds_and_the_metrics_at_each():
    assert thresholds(SPEC) == ["0.25", "0.5"]
    assert metrics_at(SPEC, "0.5") == [m for m in SPEC.metrics if m.endswith("@0.5")] and len(
        metrics_at(SPEC, "0.5")) == 7
    assert metric_at("AR_box@0.25", "0.5") == "AR_box@0.5" and metric_at("EM", "0.5") == "EM"
    assert thresholds(get_track("sqa3d")) == []


def test_the_method_page_shows_one_threshold_at_a_time(client, mmscan):
    url = f"/methods/{mmscan['method'].pk}/"
    page = client.get(url).content.decode()
    assert headers(page) == list(metrics_at(SPEC, "0.25"))
    assert 'href="?iou=0.5"' in page and 'aria-current="true">IoU 0.25' in page
    page = client.get(url + "?iou=0.5").content.decode()
    assert headers(page) == list(metrics_at(SPEC, "0.5"))
    assert "gTop-1@0.5 per category" in page  # the chart follows the threshold
    # An unknown threshold falls back to the primary metric's.
    assert headers(client.get(url + "?iou=0.7").content.decode()) == list(metrics_at(SPEC, "0.25"))


def test_the_paper_row_page_follows_the_threshold_too(client, mmscan):
    page = client.get(f"/entries/{mmscan['paper'].pk}/?iou=0.5").content.decode()
    assert headers(page) == list(metrics_at(SPEC, "0.5")) and "10.0" in page


def test_a_track_without_thresholds_shows_every_metric_and_no_toggle(client, db, owner):
    load_bundled_benchmarks()
    split = Split.objects.select_related("benchmark").get(benchmark__track="sqa3d", name="test")
    method = Method.objects.create(team=personal_team(owner), name="QA")
    LeaderboardEntry.objects.create(split=split, method=method, name="QA", scores={"EM": 0.5, "EM_R": 0.6},
                                    primary_score=0.5)
    page = client.get(f"/methods/{method.pk}/").content.decode()
    assert headers(page) == ["EM", "EM_R"] and "iou=" not in page


def test_the_board_and_compare_switch_the_metric_to_the_same_one_at_the_other_threshold(client, mmscan):
    view = LeaderboardView.from_query(mmscan["split"], {"metric": "AR@0.25", "sort": "OR/AR@0.25", "iou": "0.5"})
    assert (view.metric, view.sort) == ("AR@0.5", "OR/AR@0.5")
    page = client.get("/benchmarks/mmscan-vg/?split=val&metric=AR%400.25").content.decode()
    toggle = page[page.index('id="iou-toggle"'):]
    toggle = toggle[:toggle.index("</nav>")]
    assert "metric=AR%400.5" in toggle and 'aria-current="true">IoU 0.25' in toggle
    page = client.get("/benchmarks/mmscan-vg/?split=val&iou=0.5").content.decode()
    assert "gTop-1@0.5 by category" in page
    compare = client.get(f"/benchmarks/mmscan-vg/compare/?split=val&iou=0.5&e={mmscan['entry'].pk}"
                         f"&e={mmscan['paper'].pk}").content.decode()
    assert "(val, gTop-1@0.5)" in compare and 'id="iou-toggle"' in compare


def test_the_api_answers_400_to_an_unknown_threshold(client, mmscan):
    client.raise_request_exception = False
    assert client.get("/api/v1/leaderboards/mmscan-vg?split=val&iou=0.5").json()["rows"][0]["method"] == "GroundNet"
    bad = client.get("/api/v1/leaderboards/mmscan-vg?split=val&iou=0.7")
    assert bad.status_code == 400 and "iou" in bad.json()["error"]["message"]


@pytest.mark.parametrize(("top", "ticks"), [
    (0.70, [0, 20, 40, 60, 80]), (0.263, [0, 10, 20, 30]), (0.95, [0, 20, 40, 60, 80, 100]),
    (0.04, [0, 1, 2, 3, 4]), (0.0, [0, 10]), (1.0, [0, 20, 40, 60, 80, 100]),
])
def test_axes_have_round_ticks(top, ticks):
    assert [round(t * 100, 6) for t in charts.nice_ticks(top)] == ticks


def test_a_bar_chart_names_its_axes_and_metric_with_legible_type():
    svg = charts.bars(list(SPEC.groups), [("A", [0.5, 0.6, 0.7, 0.4, 0.3])], "t", metric="gTop-1@0.25",
                      group_label="Category")
    assert 'class="axis-title"' in svg and "gTop-1@0.25 (%)" in svg and ">Category<" in svg
    ticks = re.findall(r'class="tick"[^>]*>(\d+)<', svg)
    assert ticks == ["0", "20", "40", "60", "80"]
    sizes = [float(s) for s in re.findall(r'font-size="([\d.]+)"', svg)]
    assert min(sizes) >= 13  # in a 480-wide box: at least 9 px when a phone draws it 330 px wide


def test_the_radar_and_progress_charts_get_round_ticks_and_titles():
    from datetime import UTC, datetime

    radar = charts.radar(list("ABCDEFGH"), [("m", [0.1, 0.2, 0.3, 0.1, 0.2, 0.25, 0.05, 0.15])], "t", metric="AP")
    assert re.findall(r'class="tick"[^>]*>(\d+)<', radar) == ["10", "20", "30"] and "AP (%)" in radar
    progress = charts.progress([(datetime(2024, 1, 1, tzinfo=UTC), 0.35, "A"),
                                (datetime(2025, 1, 1, tzinfo=UTC), 0.52, "B")], "t", metric="EM")
    assert re.findall(r'class="tick"[^>]*>(\d+)<', progress) == ["0", "20", "40", "60"]
    assert "EM (%)" in progress and "publication date" in progress
