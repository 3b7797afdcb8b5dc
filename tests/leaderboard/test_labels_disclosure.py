"""A split's labels say what they are (issue 35; METRICS.md, "Uncertainty"): synthetic labels are
disclosed as "synthetic labels" wherever the split's numbers appear, with the loaded labels'
counts (never the real split's), paper rows are not ranked with rows scored on them, and a
split with real labels never says "synthetic" on a page."""

from __future__ import annotations

import csv
import io
import re
from typing import Any

import pytest

from evaluation_workers.synthetic import sqa3d
from leaderboard.benchmarks.bundle_apply import load_bundle
from leaderboard.benchmarks.bundles import BUNDLES_DIR
from leaderboard.benchmarks.models import LabelSet, Split
from leaderboard.benchmarks.services import do_load_labels
from leaderboard.rankings.models import LeaderboardEntry
from leaderboard.rankings.selectors import LeaderboardView, group_profile, leaderboard_page, track_summary
from tests.leaderboard.conftest import publish, scored_submission


def _scenes(labels: Any) -> int:
    return len(set(LabelSet.objects.get(sha256=labels.sha256).manifest["scenes"]))


@pytest.fixture
def board(owner, sqa3d_split, sqa3d_files, sent_tasks, django_capture_on_commit_callbacks) -> dict[str, Any]:
    """SQA3D's test split with a published scored row and the paper's rows, on labels loaded as real."""
    submission = scored_submission(owner, sqa3d_files, django_capture_on_commit_callbacks, "OpenNet")
    publish(owner, submission, django_capture_on_commit_callbacks)
    return {"split": sqa3d_split, "submission": submission,
            "entry": LeaderboardEntry.objects.get(method=submission.method),
            "paper": LeaderboardEntry.objects.get(split=sqa3d_split, name="MCAN")}


def _synthetic(split: Split, labels: Any) -> Split:
    do_load_labels(split, labels, synthetic=True)
    return Split.objects.select_related("benchmark").get(pk=split.pk)


def test_the_split_keeps_what_its_active_labels_are(sqa3d_split, sqa3d_files, tmp_path):
    split = Split.objects.get(pk=sqa3d_split.pk)
    active = split.active_labels
    assert (split.labels_synthetic, split.labels_units, split.labels_scenes, split.labels_sha256) == (
        False, 300, _scenes(active), active.sha256)
    # The same labels loaded as synthetic stay synthetic; other labels loaded later are what they are.
    synthetic = _synthetic(split, sqa3d_files["labels"])
    assert synthetic.labels_synthetic and synthetic.labels_units == 300
    sqa3d.write_labels(tmp_path / "real", 120, seed=5, split="test")
    do_load_labels(synthetic, tmp_path / "real")
    real = Split.objects.get(pk=split.pk)
    assert (real.labels_synthetic, real.labels_units) == (False, 120)
    assert real.labels_sha256 == real.active_labels.sha256 != active.sha256


def test_a_bundles_synthetic_split_is_loaded_as_synthetic_with_the_demos_counts(db, settings, tmp_path):
    settings.DATA_DIR = tmp_path
    plan = load_bundle(BUNDLES_DIR / "sqa3d.yaml", audit=False)
    assert any("synthetic demo labels" in n for n in plan.notes)
    split = Split.objects.get(benchmark__track="sqa3d", name="test")
    assert split.labels_synthetic and split.active_labels.synthetic
    assert (split.labels_units, split.labels_scenes) == (600, 67)  # the demo's, not the real 3,519 questions


def test_a_synthetic_split_says_so_with_its_loaded_counts_on_every_page_and_answer(client, board, sqa3d_files):
    split = _synthetic(board["split"], sqa3d_files["labels"])
    counts = f"300 questions in {split.labels_scenes} scenes"
    entry, paper = board["entry"], board["paper"]
    for url in ["/benchmarks/sqa3d/", "/", f"/methods/{entry.method_id}/", f"/entries/{paper.pk}/",
                f"/benchmarks/sqa3d/compare/?e={entry.pk}&e={paper.pk}"]:
        page = client.get(url).content.decode()
        assert "synthetic labels" in page and counts in page, url
        assert "3,519" not in page, url  # the real split's count (it was in the track's description)
    labels = {"loaded": True, "synthetic": True, "unit": "question", "units": 300, "scenes": split.labels_scenes,
              "checksum": split.labels_sha256}
    assert client.get("/api/v1/leaderboards/sqa3d").json()["labels"] == labels
    [test] = next(t for t in client.get("/api/v1/tracks").json()["tracks"] if t["track"] == "sqa3d")["splits"]
    assert test["labels"] == labels
    assert client.get("/benchmarks/sqa3d/export.json").json()["labels"] == labels
    assert client.get(f"/api/v1/leaderboards/sqa3d/compare?e={entry.pk}&e={paper.pk}").json()["labels"] == labels
    assert client.get(f"/api/v1/methods/{entry.method_id}").json()["results"][0]["labels"] == labels
    exported = client.get("/benchmarks/sqa3d/export.csv")
    assert 'filename="sqa3d-test-EM-synthetic-labels.csv"' in exported["Content-Disposition"]
    rows = list(csv.DictReader(io.StringIO(exported.content.decode())))
    assert {(r["method"], r["labels"]) for r in rows if r["method"] in ("OpenNet", "MCAN")} == {
        ("OpenNet", "synthetic"), ("MCAN", "real")}


def test_on_synthetic_labels_paper_rows_are_listed_apart_from_the_scored_rows(client, board, sqa3d_files):
    split = _synthetic(board["split"], sqa3d_files["labels"])
    view = LeaderboardView.from_query(split, {"protocol": "all"})  # not even every protocol ranked together
    assert [(r.rank, r.entry.name) for r in leaderboard_page(view).rows] == [(1, "OpenNet")]
    api = client.get("/api/v1/leaderboards/sqa3d?protocol=all").json()
    assert [r["method"] for r in api["rows"]] == ["OpenNet"] and api["apart_reason"] == "synthetic_labels"
    assert len(api["apart"]) == 10 and all(r["listed_apart"] and r["rank"] is None for r in api["apart"])
    page = client.get("/benchmarks/sqa3d/").content.decode()
    ranked, _, apart = page.partition('id="apart"')
    assert "MCAN" not in ranked.split("<tbody>")[1] and "MCAN" in apart
    assert "on the real split" in apart and "not ranked with rows scored on synthetic labels" in apart
    # Nor the best or median of a chart, nor a leader on the home page.
    assert group_profile(split, "EM")["What"]["best"] == board["entry"].scores["What/EM"]
    assert [e.name for _, e, _ in track_summary(split, embargoed=False).leaders] == ["OpenNet"]
    home = client.get("/").content.decode()
    card = home.split('data-track="sqa3d"')[1].split("</section>")[0]
    assert "(on the real split: not ranked here)" in card
    # Comparing a paper row with a scored row says they are not alike.
    compare = client.get(f"/benchmarks/sqa3d/compare/?e={board['entry'].pk}&e={board['paper'].pk}").content.decode()
    assert "≠)" in compare and "synthetic labels" in compare.split('id="unlike-note"')[1].split("</p>")[0]


def test_a_split_with_real_labels_never_says_synthetic_on_a_page(client, board):
    entry, paper = board["entry"], board["paper"]
    client.force_login(board["submission"].created_by)
    for url in ["/benchmarks/sqa3d/", "/benchmarks/sqa3d/?protocol=all", "/", f"/methods/{entry.method_id}/",
                f"/entries/{paper.pk}/", f"/benchmarks/sqa3d/compare/?e={entry.pk}&e={paper.pk}",
                "/benchmarks/sqa3d/format/", "/submissions/new/sqa3d/", f"/submissions/{board['submission'].pk}/",
                "/submissions/", "/metrics/", "/benchmarks/sqa3d/export.csv"]:
        page = client.get(url).content.decode()
        assert not re.search("synthetic", page, re.I), url
    # Its loaded counts are shown all the same (the board's header, the home card).
    counts = f"300 questions in {board['split'].labels_scenes} scenes"
    assert counts in client.get("/benchmarks/sqa3d/").content.decode() and counts in client.get("/").content.decode()
    assert client.get("/api/v1/leaderboards/sqa3d").json()["labels"]["synthetic"] is False


def test_the_migration_notes_the_active_labels_of_splits_loaded_before(board):
    from importlib import import_module

    from django.apps import apps

    split = board["split"]
    LabelSet.objects.filter(split=split).update(loaded_by="manage.py load_demo")  # as load_demo loaded them
    Split.objects.filter(pk=split.pk).update(labels_synthetic=False, labels_units=None, labels_scenes=None,
                                             labels_sha256="")
    import_module("leaderboard.benchmarks.migrations.0008_split_labels_facts").note_active_labels(apps, None)
    split = Split.objects.get(pk=split.pk)
    assert (split.labels_synthetic, split.labels_units, split.labels_sha256) == (
        True, 300, split.active_labels.sha256)
