"""One spec per metric (issue 40): a track says each metric's direction, range or unit and
precision, and boards, ranks, charts' "best", the compare page's wording, exports, the API, `lb`
and the paper-row range check follow it. The fixture plugin's "example-error" ranks a localisation
error in cm (lower is better, two decimals) beside a hit rate (a fraction, higher is better)."""

from __future__ import annotations

import csv
import io

import pytest

from evaluation_workers.tracks import get_track
from evaluation_workers.tracks.base import FRACTION, MetricSpec
from evaluation_workers.tracks.metric_ranges import metric_range
from leaderboard.benchmarks.bundle_apply import load_bundle
from leaderboard.benchmarks.bundles import BundleError, read_bundle
from leaderboard.benchmarks.models import Benchmark, Split
from leaderboard.moderation.live_board import live_board
from leaderboard.rankings.models import LeaderboardEntry, PairedTest
from leaderboard.rankings.numbers import number
from leaderboard.rankings.paired_tests import record_paired_test
from leaderboard.rankings.selectors import group_profile
from leaderboard_cli.show import print_results
from tests.leaderboard.metric_tracks import submit_scored, write_bundle

BEST, WORST = [0.06, 0.1, 0.2, 0.3], [0.2, 0.3, 0.2, 0.3]  # errors 1.5 cm and 10 cm; hit rates 1.0 and 0.5


@pytest.fixture
def board(error_track, owner, outsider, tmp_path, settings, sent_tasks, django_capture_on_commit_callbacks):
    """An example-error board: PaperNet (4.0 cm, a paper of 2024), Best (1.5 cm) and Worst (10 cm)."""
    settings.VALIDATE_AT_UPLOAD_MAX_BYTES = 0  # the checking child process does not know the fixture's track
    settings.PAGE_CACHE_SECONDS = 0
    load_bundle(write_bundle(tmp_path / "bundle"), allow_rescore=True)
    with django_capture_on_commit_callbacks(execute=True):
        worst = submit_scored(outsider, WORST, "Worst", tmp_path)
        best = submit_scored(owner, BEST, "Best", tmp_path)
    return {"best": best, "worst": worst}


def methods(rows: list[dict]) -> list[str]:
    return [r["method"] for r in rows]


def test_a_spec_says_direction_unit_range_and_precision(error_track):
    spec = error_track.metric_spec("near/error")
    assert spec == MetricSpec.value("cm", lower_is_better=True, low=0.0, precision=2)
    assert error_track.metric_spec("hit_rate") is FRACTION and get_track("sqa3d").metric_spec("What/EM") is FRACTION
    assert number(0.0123, FRACTION) == "1.2" and number(1.5, spec) == "1.50" and number(0.001, spec) == "<0.01"
    assert number(-0.5, spec, signed=True) == "-0.50" and number(0.0, spec) == "0.00"
    assert metric_range(error_track, "error").refusal(-1.0) == "expected a value (cm) in [0, inf], but got -1.0"
    assert metric_range(error_track, "error").refusal(250.0) is None
    with pytest.raises(ValueError, match="not one of its metrics"):
        error_track.__class__(**{**error_track.__dict__, "metric_specs": {"nope": spec}})


def test_a_paper_row_is_checked_against_the_spec(error_track, tmp_path, db):
    with pytest.raises(BundleError, match=r"paper_rows\[0\]\.rows\[0\]\.scores\.error: expected a value \(cm\) "
                                          r"in \[0, inf\], but got -3\.0"):
        read_bundle(write_bundle(tmp_path, paper_error=-3.0))
    assert read_bundle(write_bundle(tmp_path, paper_error=37.5)).paper_rows[0]["rows"][0]["scores"]["error"] == 37.5


def test_a_lower_is_better_metric_is_ranked_ascending_everywhere(client, board, owner, tmp_path):
    body = client.get("/api/v1/leaderboards/example-error").json()
    assert methods(body["rows"]) == ["Best", "PaperNet", "Worst"] and [r["rank"] for r in body["rows"]] == [1, 2, 3]
    assert body["order"] == "asc" and body["metric_specs"]["error"] == {
        "direction": "lower", "kind": "value", "unit": "cm", "low": 0.0, "high": None, "precision": 2}
    assert body["metric_specs"]["hit_rate"]["direction"] == "higher"
    [track] = [t for t in client.get("/api/v1/tracks").json()["tracks"] if t["track"] == "example-error"]
    assert track["metric_specs"]["error"]["unit"] == "cm"
    # Another column ranks by its own direction; asked the other way round, the worst comes first.
    hits = client.get("/api/v1/leaderboards/example-error?sort=hit_rate&metric=hit_rate").json()
    assert methods(hits["rows"]) == ["Best", "Worst", "PaperNet"] and hits["order"] == "desc"  # no hit rate: last
    assert methods(client.get("/api/v1/leaderboards/example-error?order=desc").json()["rows"]) == [
        "Worst", "PaperNet", "Best"]

    page = client.get("/benchmarks/example-error/").content.decode()
    assert "Lower error is better" in page and "best first" in page and "error (cm)" in page
    assert page.index("Best</a>") < page.index("PaperNet</a>") < page.index("Worst</a>")
    assert ">1.50<" in page and ">10.00<" in page and ">4.00<" in page  # two decimals, in cm
    # The sorted column's header turns it round; another column's sorts it best first (asc, the default here).
    assert 'sort=error&amp;order=desc" data-column="error"' in page and 'sort=near%2Ferror" data-column' in page
    assert "worst first" in client.get("/benchmarks/example-error/?order=desc").content.decode()

    exported = list(csv.reader(io.StringIO(client.get("/benchmarks/example-error/export.csv").content.decode())))
    assert [(r[0], r[1]) for r in exported[1:]] == [("1", "Best"), ("2", "PaperNet"), ("3", "Worst")]
    home = client.get("/").content.decode()
    assert home.index("Best") < home.index("Worst") and "1.50" in home

    progress = client.get("/api/v1/leaderboards/example-error/progress").json()["points"]
    assert [(p["method"], p["best"]) for p in progress] == [("PaperNet", 4.0), ("Best", 1.5)]  # lower is a record
    split = Split.objects.get(benchmark__track="example-error")
    assert group_profile(split, "error")["far"]["best"] == 0.0 and group_profile(split, "error")["near"]["best"] == 2.0
    assert [r.submission.method.name for r in live_board(split)] == ["Best", "Worst"]
    method_page = client.get(f"/methods/{board['best'].method_id}/").content.decode()
    assert "error (cm)" in method_page and "lower is better" in method_page


def test_the_compare_page_says_which_is_better_by_the_direction(client, board):
    best, worst = (LeaderboardEntry.objects.get(name=n) for n in ("Best", "Worst"))
    # Neighbours on the board: the change of its rows asked for their test; a worker's answer comes in.
    test = PairedTest.objects.get(result_a=min(best.result_id, worst.result_id),
                                  result_b=max(best.result_id, worst.result_id))
    sign = 1 if test.result_a_id == worst.result_id else -1  # a - b: Worst - Best is +8.5 cm
    record_paired_test(test_id=test.pk, revision_a=test.result_a.revision, revision_b=test.result_b.revision,
                       findings={"error": {"test": "paired-bootstrap-by-scene",
                                                            "difference": sign * 8.5, "p_value": 0.001,
                                                            "interval": sorted([sign * 4.0, sign * 12.0])}},
                       resamples=1000, error="")
    page = client.get(f"/benchmarks/example-error/compare/?e={best.pk}&e={worst.pk}").content.decode()
    assert 'class="diff worse"' in page and "(+8.50)" in page  # Worst's error is 8.5 cm higher: worse
    assert "significant difference (p = 0.001): Best is better (lower is better)" in page
    assert "Differences in cm against Best" in page


def test_a_bundle_sets_the_decimals(client, board, tmp_path):
    load_bundle(write_bundle(tmp_path / "bundle", board="board: {precision: {error: 1}}\n"), allow_rescore=True)
    page = client.get("/benchmarks/example-error/").content.decode()
    assert ">1.5<" in page and ">10.0<" in page and ">1.50<" not in page
    assert client.get("/api/v1/leaderboards/example-error").json()["metric_specs"]["error"]["precision"] == 1
    assert Benchmark.objects.get(track="example-error").metric_spec("hit_rate").precision == 1  # unchanged
    load_bundle(write_bundle(tmp_path / "bundle", board="board: {precision: 3}\n"), allow_rescore=True)
    assert Benchmark.objects.get(track="example-error").metric_spec("hit_rate").precision == 3


def test_lb_prints_a_value_in_its_unit(capsys, error_track):
    specs = {m: error_track.metric_spec(m).as_json() for m in error_track.metrics}
    print_results({"id": 1, "track": "example-error", "split": "test", "method": "Best", "result": {
        "scorer_version": "0.1.0", "metrics": {"error": 1.5, "hit_rate": 1.0},
        "breakdown": {"near": {"error": 3.0, "hit_rate": 1.0, "count": 2}}}}, specs)
    out = capsys.readouterr().out
    assert "error(cm)↓" in out and "1.50" in out and "100.00" in out, out


def test_the_recorded_facts_keep_the_specs(error_track, tmp_path, db):
    load_bundle(write_bundle(tmp_path), allow_rescore=True)
    facts = Benchmark.objects.get(track="example-error").track_facts
    assert facts["metric_specs"]["error"]["direction"] == "lower"
    from leaderboard.benchmarks.models import stand_in

    assert stand_in("example-error", facts).metric_spec("error").unit == "cm"
