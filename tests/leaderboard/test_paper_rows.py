"""Rows that say what they are (issue 13): paper rows carry their paper link, venue and
publication date, ties list the earlier publication first, and each row names the
protocol that produced it where a track has more than one."""

from __future__ import annotations

import io
from datetime import UTC, date, datetime

import pytest
from django.apps import apps

from evaluation_workers.tracks import get_track
from leaderboard.benchmarks.bundle_apply import load_bundled_benchmarks, load_bundled_paper_rows
from leaderboard.benchmarks.bundles import BUNDLES_DIR, BundleError, parse_bundle, read_bundle
from leaderboard.benchmarks.models import Split
from leaderboard.rankings.models import LeaderboardEntry, export_columns
from leaderboard.rankings.selectors import LeaderboardView, best_over_time, leaderboard_page
from leaderboard.rankings.services import do_load_paper_rows
from leaderboard.submissions import lifecycle, services
from tests.leaderboard.conftest import describe_method

TRACKS = ("sqa3d", "openscan", "mmscan-vg")
PAPERS = {"sqa3d": ("ICLR 2023", "https://arxiv.org/abs/2210.07474", date(2022, 10, 14)),
          "openscan": ("AAAI 2026", "https://arxiv.org/abs/2408.11030", date(2024, 8, 20)),
          "mmscan-vg": ("NeurIPS 2024", "https://arxiv.org/abs/2406.09401", date(2024, 6, 13))}


@pytest.fixture
def seeded(db):
    load_bundled_benchmarks()
    return {track: load_bundled_paper_rows(track) for track in TRACKS}


@pytest.mark.parametrize("track", TRACKS)
def test_paper_rows_carry_their_venue_link_publication_date_and_a_known_protocol(seeded, track):
    venue, url, published = PAPERS[track]
    rows = LeaderboardEntry.objects.filter(split__benchmark__track=track, is_paper=True)
    assert rows.count() == seeded[track] > 0
    spec = get_track(track)
    columns = set(export_columns(spec))
    for row in rows:
        assert (row.venue, row.paper_url) == (venue, url), row.name
        assert row.published_at == datetime(published.year, published.month, published.day, tzinfo=UTC), row.name
        assert row.protocol == "" if len(spec.protocols) < 2 else spec.protocol(row.protocol) is not None
        assert set(row.scores) <= columns, set(row.scores) - columns  # only metrics we compute
        assert 0 < len(row.paper_note) <= 300  # the column's width on PostgreSQL


def test_sqa3d_paper_rows_say_the_papers_protocol_and_scored_rows_this_services(owner, sqa3d_split, sqa3d_files,
                                                                                 sent_tasks, client):
    load_bundled_paper_rows("sqa3d")
    sub = services.check_create_submission(user=owner, track="sqa3d", split="test", method_name="OpenNet",
                                           file=io.BytesIO(sqa3d_files["predictions"].read_bytes()),
                                           file_name="p.json")
    result = get_track("sqa3d").score(sqa3d_files["labels"], sqa3d_files["predictions"], lambda f, m="": None)
    lifecycle.record_result(submission_id=sub.pk, attempt=1, result=result)
    describe_method(sub.method)
    services.check_publish(owner, sub)
    assert set(LeaderboardEntry.objects.filter(is_paper=True).values_list("protocol", flat=True)) == {
        "answer-classification-706"}
    assert LeaderboardEntry.objects.get(method=sub.method).protocol == "open-answer-em"
    page = client.get("/benchmarks/sqa3d/").content.decode()
    assert page.count("706-way answer classification") >= 11 and "EM on the open answer" in page
    assert 'href="https://arxiv.org/abs/2210.07474"' in page and "ICLR 2023" in page
    # Human performance is a reference (issue 27): listed apart from the ranked rows, with its citation.
    [human] = client.get("/api/v1/leaderboards/sqa3d").json()["references"]
    assert (human["venue"], human["paper_url"], human["protocol"]) == ("ICLR 2023", PAPERS["sqa3d"][1],
                                                                       "answer-classification-706")
    assert human["published_at"].startswith("2022-10-14")
    exported = client.get("/benchmarks/sqa3d/export.csv").content.decode().splitlines()
    header = exported[0].split(",")
    assert header[8:11] == ["venue", "paper_url", "protocol"]
    assert any(line.startswith(",Human (amateur),,True") and ",ICLR 2023,https://arxiv.org/abs/2210.07474,"
               "answer-classification-706,True," in line for line in exported)
    method_page = client.get(f"/methods/{sub.method_id}/").content.decode()
    assert "EM on the open answer" in method_page
    entry = LeaderboardEntry.objects.get(name="Human (amateur)")
    paper_page = client.get(f"/entries/{entry.pk}/").content.decode()
    assert "ICLR 2023" in paper_page and "published 2022-10-14" in paper_page and "706 answer candidates" in paper_page
    # The paper's rows share its date: ranked with every protocol, the progress chart has one point there,
    # their best (not the human one); by default only this service's protocol is ranked (issue 35).
    points = client.get("/api/v1/leaderboards/sqa3d/progress?protocol=all").json()["points"]
    assert points[0] == {"date": "2022-10-14T00:00:00+00:00", "best": 0.472, "method": "ScanQA + aux. task"}
    assert [p["method"] for p in points[1:]] == ["OpenNet"]  # then the scored row, better than every paper row
    assert [p["method"] for p in client.get("/api/v1/leaderboards/sqa3d/progress").json()["points"]] == ["OpenNet"]
    tracks = {t["track"]: t for t in client.get("/api/v1/tracks").json()["tracks"]}
    assert [p["key"] for p in tracks["sqa3d"]["protocols"]] == ["open-answer-em", "answer-classification-706"]
    assert tracks["openscan"]["protocols"] == []


def test_a_track_with_one_protocol_shows_none(seeded, client):
    page = client.get("/benchmarks/openscan/").content.decode()
    assert 'class="protocol' not in page and "AAAI 2026" in page


def test_mmscan_rows_are_the_devkit_readme_table_as_published(seeded, client):
    [data] = read_bundle(BUNDLES_DIR / "mmscan-vg.yaml").paper_rows
    assert data["split"] == "val" and "README" in data["source"]
    by_name = {r.name: r for r in LeaderboardEntry.objects.filter(split__benchmark__track="mmscan-vg")}
    assert list(by_name) and set(by_name) == {"ScanRefer", "MVT", "BUTD-DETR", "ReGround3D", "EmbodiedScan",
                                              "3D-VisTA", "ViL3DRef"}
    assert by_name["ViL3DRef"].scores == {"gTop-1@0.25": 0.2634, "gTop-3@0.25": 0.3758, "AP_sample@0.25": 0.3509,
                                          "AP_box@0.25": 0.0665, "AR@0.25": 0.8686}
    assert by_name["EmbodiedScan"].scores["gTop-1@0.5"] == 0.0882
    assert all(r.protocol == "devkit-iou" and "README" in r.paper_note for r in by_name.values())
    board = client.get("/api/v1/leaderboards/mmscan-vg?split=val").json()
    # Read with the devkit's IoU, not this service's: listed apart, not ranked, until asked (issue 35).
    assert board["rows"] == [] and [r["method"] for r in board["apart"]][:2] == ["ViL3DRef", "3D-VisTA"]
    rows = client.get("/api/v1/leaderboards/mmscan-vg?split=val&protocol=all").json()["rows"]
    assert [r["method"] for r in rows][:2] == ["ViL3DRef", "3D-VisTA"]
    assert "devkit (pytorch3d) IoU" in client.get("/benchmarks/mmscan-vg/?split=val").content.decode()


def test_ties_list_the_earlier_publication_first_whatever_the_loading_order(seeded):
    split = Split.objects.get(benchmark__track="sqa3d", name="test")
    LeaderboardEntry.objects.filter(split=split).delete()
    scores = {"EM": 0.5}
    # Loaded first, published later; loaded last, published earlier; a scored row published today.
    LeaderboardEntry.objects.create(split=split, name="later paper", is_paper=True, scores=scores, primary_score=0.5,
                                    published_at=datetime(2024, 3, 1, tzinfo=UTC))
    LeaderboardEntry.objects.create(split=split, name="scored today", scores=scores, primary_score=0.5)
    LeaderboardEntry.objects.create(split=split, name="earlier paper", is_paper=True, scores=scores,
                                    primary_score=0.5, published_at=datetime(2022, 10, 14, tzinfo=UTC))
    view = LeaderboardView.from_query(split, {})
    assert [(r.rank, r.entry.name) for r in leaderboard_page(view).rows] == [
        (1, "earlier paper"), (1, "later paper"), (1, "scored today")]
    # The progress chart dates a paper row by its publication too.
    assert [(when.year, name) for when, _, name in best_over_time(view)] == [(2022, "earlier paper")]


def test_reseeding_and_the_migration_give_rows_loaded_before_their_metadata(seeded):
    from importlib import import_module

    LeaderboardEntry.objects.filter(is_paper=True).update(venue="", paper_url="", protocol="",
                                                          published_at=datetime(2026, 1, 1, tzinfo=UTC))
    LeaderboardEntry.objects.filter(is_paper=False).update(protocol="")
    import_module("leaderboard.rankings.migrations.0004_paper_row_metadata").fill_metadata(apps, None)
    human = LeaderboardEntry.objects.get(name="Human (amateur)")
    assert (human.venue, human.protocol, human.published_at.date()) == ("ICLR 2023", "answer-classification-706",
                                                                        date(2022, 10, 14))
    LeaderboardEntry.objects.filter(is_paper=True).update(venue="")
    load_bundled_paper_rows("sqa3d")
    assert LeaderboardEntry.objects.get(name="Human (amateur)").venue == "ICLR 2023"


def test_an_unknown_protocol_in_paper_rows_is_refused(seeded):
    path = BUNDLES_DIR / "sqa3d.yaml"
    text = path.read_text().replace("protocol: answer-classification-706", "protocol: made-up", 1)
    line = text.splitlines().index("  protocol: made-up") + 1
    with pytest.raises(BundleError, match=rf"sqa3d.yaml:{line}: paper_rows\[0\].protocol: unknown protocol 'made-up'"):
        parse_bundle(text, path)
    [data] = read_bundle(path).paper_rows
    split = Split.objects.select_related("benchmark").get(benchmark__track="sqa3d", name="test")
    with pytest.raises(ValueError, match="unknown protocol 'made-up'"):
        do_load_paper_rows(split, {**data, "protocol": "made-up"}, "sqa3d.yaml")


# Credit the method (issue 35): each paper row names its method's own paper beside the source of its numbers.

ALL_TRACKS = (*TRACKS, "scanrefer")


@pytest.mark.parametrize("track", ALL_TRACKS)
def test_every_bundled_paper_row_names_its_methods_own_paper_or_why_it_has_none(track):
    bundle = read_bundle(BUNDLES_DIR / f"{track}.yaml")
    for block in bundle.paper_rows:
        for row in block["rows"]:
            paper = row.get("method_paper")
            assert paper, f"{track}: {row['method']} names no paper of its method"
            if "none" in paper:
                continue
            assert paper["url"].startswith("https://") and 2000 <= paper["year"] <= 2025, row["method"]
            assert paper["authors"].endswith("et al.") and paper["venue"] and paper["title"], row["method"]
            source = {**block.get("paper", {}), **row.get("paper", {})}
            # The source of the numbers is another field: MMScan's ScanRefer row was copied from MMScan's paper.
            assert "venue" in source and "url" in source


def test_the_method_papers_are_those_of_the_methods_not_of_the_benchmark(seeded):
    def cited(track, name):
        return LeaderboardEntry.objects.get(split__benchmark__track=track, name=name)

    scanrefer = cited("mmscan-vg", "ScanRefer")
    assert (scanrefer.method_citation, scanrefer.method_paper["url"]) == ("Chen et al., ECCV 2020",
                                                                           "https://arxiv.org/abs/1912.08830")
    assert scanrefer.venue == "NeurIPS 2024"  # where its numbers come from: the MMScan paper
    assert cited("sqa3d", "MCAN").method_citation == "Yu et al., CVPR 2019"
    assert cited("sqa3d", "ClipBERT").method_citation == "Lei et al., CVPR 2021"
    assert cited("sqa3d", "ClipBERT").venue == "ICLR 2023"
    assert cited("openscan", "Open3DIS").method_citation == "Nguyen et al., CVPR 2024"
    assert "baseline of the SQA3D paper" in cited("sqa3d", "Blind test").method_paper["none"]


def test_pages_the_api_exports_and_bibtex_show_the_methods_paper_beside_the_source(seeded, client):
    import csv

    board = client.get("/benchmarks/mmscan-vg/?split=val").content.decode()
    row = board.split("ScanRefer</a>")[1].split("</tr>")[0]
    assert 'class="small method-paper" href="https://arxiv.org/abs/1912.08830"' in row and "Chen et al., ECCV 2020" in row
    assert "numbers: " in row and ">NeurIPS 2024</a>" in row
    sqa = client.get("/benchmarks/sqa3d/").content.decode()
    blind = sqa.split("Blind test</a>")[1].split("</tr>")[0]
    assert "no paper of its own" in blind and ">ICLR 2023</a>" in blind
    entry = LeaderboardEntry.objects.get(split__benchmark__track="mmscan-vg", name="ScanRefer")
    page = client.get(f"/entries/{entry.pk}/").content.decode()
    credits = page.split('id="credits"')[1].split("</dl>")[0]
    assert "Chen et al., “ScanRefer: 3D Object Localization in RGB-D Scans using Natural Language”, ECCV 2020" in credits
    assert "https://arxiv.org/abs/2406.09401" in credits and "MMScan devkit README" in credits
    bib = client.get(f"/entries/{entry.pk}/bibtex")
    assert bib["Content-Type"].startswith("application/x-bibtex")
    text = bib.content.decode()
    assert "@inproceedings{chen2020scanrefer," in text and "author = {Chen and others}" in text
    assert "booktitle = {ECCV}" in text and "year = {2020}" in text
    assert "@misc{" in text and "\\url{https://arxiv.org/abs/2406.09401}" in text
    blind_entry = LeaderboardEntry.objects.get(split__benchmark__track="sqa3d", name="Blind test")
    assert "% Blind test: no paper of its own" in client.get(f"/entries/{blind_entry.pk}/bibtex").content.decode()
    api = client.get("/api/v1/leaderboards/mmscan-vg?split=val").json()
    by_name = {r["method"]: r for r in api["rows"] + api["apart"]}
    assert by_name["ScanRefer"]["method_paper"]["venue"] == "ECCV" and by_name["ScanRefer"]["venue"] == "NeurIPS 2024"
    rows = {r["method"]: r for r in csv.DictReader(io.StringIO(
        client.get("/benchmarks/sqa3d/export.csv").content.decode()))}
    assert (rows["MCAN"]["method_paper"], rows["MCAN"]["method_paper_url"]) == (
        "Yu et al., CVPR 2019", "https://arxiv.org/abs/1906.10770")
    assert rows["Blind test"]["method_paper"].startswith("none: a baseline")


def test_a_method_paper_without_its_year_is_refused_with_the_line_and_key(seeded):
    path = BUNDLES_DIR / "sqa3d.yaml"
    text = path.read_text().replace("      year: 2019\n", "", 1)
    line = text.splitlines().index("  - method: MCAN") + 2
    with pytest.raises(BundleError, match=rf"sqa3d.yaml:{line}: paper_rows\[0\].rows\[4\].method_paper: expected "
                                          r"the method's own paper \(authors, venue, year and url"):
        parse_bundle(text, path)
