"""A benchmark whose track package was removed: its board stays readable from the facts it
recorded, its splits refuse submissions saying why, and nothing crashes (issue 29)."""

from __future__ import annotations

import pytest
from django.core.management import call_command

from evaluation_workers.tracks import get_track
from leaderboard.accounts.services import do_create_token
from leaderboard.benchmarks.models import Benchmark, Split, track_facts
from leaderboard.rankings.models import LeaderboardEntry

REFUSAL = "retired/test is not accepting submissions: its track 'retired' is not installed on this site."


@pytest.fixture
def retired(db):
    """A board of a track called "retired", recorded when it was installed (SQA3D's facts stand in)."""
    facts = {**track_facts(get_track("sqa3d")), "title": "Retired QA"}
    benchmark = Benchmark.objects.create(track="retired", title="Retired QA", track_facts=facts)
    split = Split.objects.create(benchmark=benchmark, name="test", is_default=True)
    LeaderboardEntry.objects.create(split=split, name="OldNet", is_paper=True, paper_note="A paper",
                                    scores={"EM": 0.512, "EM_R": 0.55, "What/EM": 0.4}, primary_score=0.512)
    return benchmark


def test_the_facts_of_an_installed_track_are_recorded_on_save(db):
    benchmark = Benchmark.objects.create(track="sqa3d", title="SQA3D")
    assert benchmark.track_facts["metrics"] == ["EM", "EM_R"] and benchmark.track_facts["primary_metric"] == "EM"


def test_its_board_pages_and_api_stay_readable(client, retired):
    assert not retired.track_installed
    board = client.get("/benchmarks/retired/")
    assert board.status_code == 200
    assert b"OldNet" in board.content and b"51.2" in board.content
    rows = client.get("/api/v1/leaderboards/retired").json()
    assert [r["method"] for r in rows["rows"]] == ["OldNet"], rows["rows"][0].keys()
    entry = LeaderboardEntry.objects.get(name="OldNet")
    for path in ("/", f"/entries/{entry.pk}/", "/benchmarks/retired/export.csv", "/benchmarks/retired/format/",
                 "/api/v1/tracks"):
        assert client.get(path).status_code == 200, path


def test_its_splits_refuse_submissions_saying_why(client, retired, owner, tmp_path):
    predictions = tmp_path / "p.json"
    predictions.write_text("[]")
    with predictions.open("rb") as f:
        answer = client.post("/api/v1/submissions", {"track": "retired", "split": "test", "method_name": "X",
                                                     "file": f},
                             headers={"Authorization": f"Token {do_create_token(owner)}"})
    assert answer.status_code in (400, 409, 422) and REFUSAL in answer.json()["error"]["message"]
    [track] = [t for t in client.get("/api/v1/tracks").json()["tracks"] if t["track"] == "retired"]
    assert track["splits"][0]["refusal"] == REFUSAL


def test_migrating_again_keeps_its_recorded_facts(retired):
    call_command("migrate", verbosity=0)
    assert Benchmark.objects.get(track="retired").track_facts["title"] == "Retired QA"
