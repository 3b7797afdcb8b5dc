"""A split takes submissions only once its labels are loaded (issue 27): until then the form, the API,
``lb tracks`` and the board list it as not open yet and say why, and a submission to it is refused with
its own code; loading the labels opens it."""

from __future__ import annotations

import io

import pytest
from django.template.loader import render_to_string

from leaderboard.accounts.services import do_create_token
from leaderboard.benchmarks import phases
from leaderboard.benchmarks.bundle_apply import load_bundled_benchmarks
from leaderboard.benchmarks.models import Split
from leaderboard.benchmarks.selectors import get_split
from leaderboard.benchmarks.services import do_load_labels
from leaderboard.submissions.models import Method, Submission
from leaderboard_cli.main import main

PENDING = "not open yet (labels not loaded yet: opens when they are)"


@pytest.fixture
def mmscan(db, tmp_path):
    """MMScan with labels on val only, as in the demo: test has none."""
    from evaluation_workers.synthetic import mmscan_vg

    load_bundled_benchmarks()
    labels, predictions = mmscan_vg.write_demo(tmp_path / "mmscan", "val")
    kept = predictions.rename(tmp_path / predictions.name)
    do_load_labels(Split.objects.get(benchmark__track="mmscan-vg", name="val"), labels.parent)
    return {"labels": labels.parent, "predictions": kept}


def test_the_tracks_api_lists_a_split_without_labels_as_not_open(client, mmscan):
    [track] = [t for t in client.get("/api/v1/tracks").json()["tracks"] if t["track"] == "mmscan-vg"]
    splits = {s["name"]: s for s in track["splits"]}
    assert (splits["val"]["labels_loaded"], splits["val"]["accepting_submissions"], splits["val"]["refusal"]) \
        == (True, True, None)
    assert (splits["test"]["labels_loaded"], splits["test"]["accepting_submissions"]) == (False, False)
    assert splits["test"]["refusal"] == f"mmscan-vg/test is {PENDING}."
    board = client.get("/api/v1/leaderboards/mmscan-vg?split=test").json()
    assert board["accepting_submissions"] is False and board["labels_loaded"] is False


def test_a_submission_to_it_is_a_409_with_its_own_code_and_creates_nothing(client, owner, mmscan):
    headers = {"Authorization": f"Token {do_create_token(owner)}"}
    data = mmscan["predictions"].read_bytes()
    response = client.post("/api/v1/submissions", {"track": "mmscan-vg", "split": "test", "method_name": "M",
                                                   "file": io.BytesIO(data)}, headers=headers)
    assert response.status_code == 409
    assert response.json()["error"] == {
        "code": "labels_not_loaded",
        "message": f"mmscan-vg/test is {PENDING}. mmscan-vg takes submissions on: val."}
    started = client.post("/api/v1/uploads", {"track": "mmscan-vg", "split": "test", "method_name": "M",
                                              "file_name": "p.json", "size": 10}, content_type="application/json",
                          headers=headers)
    assert started.status_code == 409 and started.json()["error"]["code"] == "labels_not_loaded"
    assert not Submission.objects.exists() and not Method.objects.exists()


def test_the_code_is_documented_in_the_readme_and_the_openapi_errors(client, db):
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    for code in ("labels_not_loaded", "submission_failed"):
        assert f"| `{code}` |" in readme, code
    doc = client.get("/api/v1/openapi.json").json()
    assert "labels_not_loaded" in doc["components"]["schemas"]["Error"]["properties"]["error"]["properties"][
        "code"]["enum"]
    assert "labels_not_loaded" in doc["paths"]["/api/v1/submissions"]["post"]["responses"]["409"]["description"]


def test_the_form_offers_it_disabled_and_says_why(client, owner, mmscan):
    client.force_login(owner)
    page = client.get("/submissions/new/mmscan-vg/").content.decode()
    select = page.split('name="split"')[1].split("</select>")[0]
    assert '<option value="val" selected>val</option>' in select
    assert ('<option value="test" disabled>test (not open yet: labels not loaded yet: opens when they are)'
            '</option>') in select, select
    assert f"mmscan-vg/test is {PENDING}." in page
    # Sent anyway (a stale form): the service refuses it, on the form.
    refused = client.post("/submissions/new/mmscan-vg/", {"split": "test", "method_name": "M",
                                                         "file": io.BytesIO(mmscan["predictions"].read_bytes())})
    assert refused.status_code == 200 and "mmscan-vg takes submissions on: val." in refused.content.decode()
    assert not Submission.objects.exists()


def test_loading_the_labels_opens_it(client, owner, mmscan):
    split = Split.objects.get(benchmark__track="mmscan-vg", name="test")
    assert phases.describe(get_split("mmscan-vg", "test"))["not_open"] == "labels not loaded yet: opens when they are"
    do_load_labels(split, mmscan["labels"])  # the val labels stand in for test's
    fresh = get_split("mmscan-vg", "test")
    assert phases.describe(fresh)["accepting"] and phases.describe(fresh)["not_open"] == ""
    [track] = [t for t in client.get("/api/v1/tracks").json()["tracks"] if t["track"] == "mmscan-vg"]
    assert all(s["accepting_submissions"] for s in track["splits"])


def test_the_boards_note_says_it_is_not_open_yet(rf, mmscan):
    """The board's empty state includes ``submissions/_split_open_note.html`` with ``phases.describe``."""
    for name, expected in (("test", f"test is {PENDING}."), ("val", "Submit predictions</a> to be the first")):
        split = get_split("mmscan-vg", name)
        note = render_to_string("submissions/_split_open_note.html", {
            "split": split, "benchmark": split.benchmark, "phase": phases.describe(split)})
        assert expected in note, note
    split = get_split("mmscan-vg", "val")
    Split.objects.filter(pk=split.pk).update(accepting_submissions=False)
    split.refresh_from_db()
    note = render_to_string("submissions/_split_open_note.html", {
        "split": split, "benchmark": split.benchmark, "phase": phases.describe(split)})
    assert "not accepting submissions" in note and "Submit" not in note


def test_lb_tracks_lists_it_as_not_open_yet(live_server, mmscan, lb_config, monkeypatch, capsys):
    monkeypatch.setenv("LB_SERVER", live_server.url)
    assert main(["tracks"]) == 0
    out = capsys.readouterr().out
    assert "splits: val, test (not open yet: labels not loaded yet: opens when they are);" in out, out

