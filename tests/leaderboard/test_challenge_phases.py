"""Challenge phases of a split (issue 13): before the start, open, frozen, closed and revealed,
through the API, the pages, `lb submit` and the moderation desk. Time is controlled by setting
the split's dates relative to now."""

from __future__ import annotations

import io
from datetime import timedelta

import pytest
from django.utils import timezone

from evaluation_workers.tracks import get_track
from leaderboard.accounts.services import do_create_token
from leaderboard.benchmarks.models import Split
from leaderboard.moderation.models import AuditEntry
from leaderboard.rankings.models import LeaderboardEntry
from leaderboard.rankings.services import do_reveal_due
from leaderboard.submissions import lifecycle, services
from leaderboard.submissions.models import Submission
from leaderboard_cli.main import main
from tests.leaderboard.conftest import describe_method

HOUR = timedelta(hours=1)


@pytest.fixture(autouse=True)
def _uncached_pages(settings) -> None:
    # The tests move the split's dates instead of the clock; a cached page would outlive them
    # (with the real clock, a page is cached only until the next phase change: ``cache_until``).
    settings.PAGE_CACHE_SECONDS = 0


def schedule(split: Split, **offsets: timedelta | None) -> Split:
    """Set the split's dates to now + each offset (None clears one)."""
    now = timezone.now()
    fields = {name: (now + offset if offset is not None else None) for name, offset in offsets.items()}
    Split.objects.filter(pk=split.pk).update(**fields)
    split.refresh_from_db()
    return split


@pytest.fixture
def good(sqa3d_files) -> bytes:
    return sqa3d_files["predictions"].read_bytes()


@pytest.fixture
def scored(sqa3d_files):
    return get_track("sqa3d").score(sqa3d_files["labels"], sqa3d_files["predictions"], lambda f, m="": None)


def create(user, content: bytes, method: str = "QNet") -> Submission:
    return services.check_create_submission(user=user, track="sqa3d", split="test", method_name=method,
                                            file=io.BytesIO(content), file_name="p.json")


def publish(owner, submission: Submission, result: dict) -> None:
    lifecycle.record_result(submission_id=submission.pk, attempt=1, result=result)
    describe_method(submission.method)
    services.check_publish(owner, submission)


def post_api(client, user, content: bytes):
    headers = {"Authorization": f"Token {do_create_token(user)}"}
    return client.post("/api/v1/submissions", {"track": "sqa3d", "split": "test", "method_name": "Q",
                                                "file": io.BytesIO(content)}, headers=headers)


def board(client) -> dict:
    return client.get("/api/v1/leaderboards/sqa3d?split=test").json()


def test_before_the_start_nothing_is_accepted_and_the_page_says_when_it_opens(
        client, owner, sqa3d_split, good, sent_tasks):
    split = schedule(sqa3d_split, starts_at=3 * HOUR, deadline=48 * HOUR)
    with pytest.raises(services.PhaseClosed, match=r"sqa3d/test opens for submissions at \d{4}-\d\d-\d\d "
                                                   r"\d\d:\d\d UTC \(in 2 h 59 min\)"):
        create(owner, good)
    response = post_api(client, owner, good)
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "phase_closed"
    upload = client.post("/api/v1/uploads", {"track": "sqa3d", "split": "test", "method_name": "Q",
                                             "file_name": "p.json", "size": 100}, content_type="application/json",
                         headers={"Authorization": f"Token {do_create_token(owner)}"})
    assert upload.status_code == 403 and "opens for submissions" in upload.json()["error"]["message"]
    client.force_login(owner)
    form = client.post("/submissions/new/sqa3d/", {"split": "test", "method_name": "Q",
                                                   "file": io.BytesIO(good)})
    assert "opens for submissions at" in form.content.decode()
    assert not Submission.objects.exists()
    assert 'class="alert warning phase-closed">sqa3d/test opens for submissions at' in client.get(
        "/submissions/new/sqa3d/").content.decode()  # said before a file is chosen

    page = client.get("/benchmarks/sqa3d/").content.decode()
    assert 'data-phase="upcoming"' in page and "Open in <time" in page
    body = board(client)
    assert body["phase"] == "upcoming" and body["next_phase"] == "open" and body["accepting_submissions"] is False
    assert 3 * 3600 - 60 < body["seconds_to_next_phase"] <= 3 * 3600
    assert body["starts_at"] == split.starts_at.isoformat()
    [track] = [t for t in client.get("/api/v1/tracks").json()["tracks"] if t["track"] == "sqa3d"]
    assert track["splits"][0]["phase"] == "upcoming" and track["splits"][0]["accepting_submissions"] is False


def test_lb_submit_shows_the_phase_refusal(live_server, owner, lb_config, sqa3d_split, sqa3d_files, capsys):
    schedule(sqa3d_split, freeze_at=-HOUR, deadline=HOUR)
    assert main(["login", "--server", live_server.url, "--token", do_create_token(owner)]) == 0
    capsys.readouterr()
    assert main(["-q", "submit", "--track", "sqa3d", "--method", "CliNet", str(sqa3d_files["predictions"])]) != 0
    assert "sqa3d/test is frozen since" in capsys.readouterr().err


def test_open_then_frozen_holds_new_rows_back_until_the_reveal(client, owner, outsider, maintainer, sqa3d_split,
                                                               good, scored, sent_tasks, settings):
    settings.QUOTA_IN_FLIGHT = 10
    schedule(sqa3d_split, freeze_at=HOUR, deadline=2 * HOUR)
    early = create(owner, good, "Early")
    publish(owner, early, scored)
    body = board(client)
    assert body["phase"] == "open" and body["next_phase"] == "frozen" and body["accepting_submissions"]
    assert [r["method"] for r in body["rows"]] == ["Early"]
    late = create(outsider, good, "Late")
    assert 'data-phase="open"' in client.get("/benchmarks/sqa3d/").content.decode()

    schedule(sqa3d_split, freeze_at=-HOUR, deadline=HOUR)
    with pytest.raises(services.PhaseClosed, match="is frozen since .* no new submission is accepted until the "
                                                   "deadline"):
        create(owner, good)
    # Sent while open: before the freeze that the dates just moved to (the clock stays).
    Submission.objects.filter(pk=late.pk).update(created_at=timezone.now() - 2 * HOUR)
    publish(outsider, late, scored)  # scored and published after the freeze (allowed until the reveal): held back
    rescored = dict(scored, metrics={**scored["metrics"], "EM": 0.99})
    lifecycle.do_enqueue(early.pk)
    lifecycle.record_result(submission_id=early.pk, attempt=2, result=rescored)  # re-scored: not shown yet
    body = board(client)
    assert body["phase"] == "frozen" and body["next_phase"] == "revealed"
    assert [(r["method"], r["scores"]["EM"]) for r in body["rows"]] == [("Early", scored["metrics"]["EM"])]
    page = client.get("/benchmarks/sqa3d/").content.decode()
    assert 'data-phase="frozen"' in page and "appear at the reveal" in page and "Late" not in page
    client.force_login(maintainer)
    desk = client.get("/moderation/tracks/sqa3d/").content.decode()
    assert "Late" in desk and desk.count("held until the reveal") == 2  # the maintainers' live board
    client.logout()

    schedule(sqa3d_split, freeze_at=-2 * HOUR, deadline=-timedelta(seconds=1))
    body = board(client)  # the first reader reveals a board whose deadline passed
    assert body["phase"] == "revealed" and body["next_phase"] is None and not body["accepting_submissions"]
    assert {(r["method"], r["scores"]["EM"]) for r in body["rows"]} == {("Early", 0.99),
                                                                       ("Late", scored["metrics"]["EM"])}
    assert Split.objects.get(pk=sqa3d_split.pk).revealed_at is not None
    with pytest.raises(services.PhaseClosed, match="closed at its deadline"):
        create(owner, good)


def test_the_beat_task_reveals_due_splits(sqa3d_split):
    split = schedule(sqa3d_split, freeze_at=-2 * HOUR, deadline=-HOUR)
    assert do_reveal_due() == 1 and do_reveal_due() == 0
    split.refresh_from_db()
    assert split.revealed_at == split.deadline and split.phase == "revealed"


def test_a_deadline_without_automatic_reveal_is_closed_until_a_maintainer_reveals(
        client, owner, maintainer, sqa3d_split, good, scored, sent_tasks):
    schedule(sqa3d_split, freeze_at=HOUR, deadline=2 * HOUR)
    Split.objects.filter(pk=sqa3d_split.pk).update(reveal_at_deadline=False)
    entry = create(owner, good)
    schedule(sqa3d_split, freeze_at=-2 * HOUR, deadline=-HOUR)
    Submission.objects.filter(pk=entry.pk).update(created_at=timezone.now() - 3 * HOUR)  # sent before the freeze
    publish(owner, entry, scored)  # finished after it: publishable until the reveal
    assert board(client)["phase"] == "closed" and board(client)["rows"] == []
    assert 'data-phase="closed"' in client.get("/benchmarks/sqa3d/").content.decode()

    client.force_login(maintainer)
    response = client.post("/moderation/tracks/sqa3d/", {"action": "reveal", "split": "test",
                                                         "reason": "results day"}, follow=True)
    assert "is revealed" in response.content.decode()
    audit = AuditEntry.objects.get(action="reveal")
    assert audit.reason == "results day" and audit.split == "test"
    client.logout()
    body = board(client)
    assert body["phase"] == "revealed" and [r["method"] for r in body["rows"]] == ["QNet"]

    client.force_login(maintainer)
    client.post("/moderation/tracks/sqa3d/", {"action": "reopen", "split": "test", "reason": "post-challenge"})
    assert Split.objects.get(pk=sqa3d_split.pk).reopened
    assert create(owner, good).status == "queued"


def test_maintainers_set_the_schedule_on_the_desk_and_outsiders_cannot(client, owner, maintainer, sqa3d_split):
    client.force_login(owner)
    assert client.post("/moderation/tracks/sqa3d/", {"action": "phases", "split": "test"}).status_code == 403
    client.force_login(maintainer)
    response = client.post("/moderation/tracks/sqa3d/", {
        "action": "phases", "split": "test", "starts_at": "2030-01-01T10:00", "freeze_at": "2030-02-01T10:00",
        "deadline": "2030-01-15T10:00", "reveal_at_deadline": "1"}, follow=True)
    assert "Expected the freeze before the deadline" in response.content.decode()
    response = client.post("/moderation/tracks/sqa3d/", {
        "action": "phases", "split": "test", "starts_at": "2030-01-01T10:00", "freeze_at": "2030-01-14T10:00",
        "deadline": "2030-01-15T10:00", "reason": "the 2030 challenge"}, follow=True)
    assert "Schedule of sqa3d/test saved" in response.content.decode()
    split = Split.objects.get(pk=sqa3d_split.pk)
    assert (split.starts_at.isoformat(), split.deadline.isoformat()) == ("2030-01-01T10:00:00+00:00",
                                                                        "2030-01-15T10:00:00+00:00")
    assert split.reveal_at_deadline is False and split.phase == "upcoming"
    assert AuditEntry.objects.get(action="set_phases").details["freeze_at"] == "2030-01-14T10:00:00+00:00"
    assert 'value="2030-01-14T10:00"' in client.get("/moderation/tracks/sqa3d/").content.decode()


def test_a_split_without_a_schedule_shows_no_phase_and_stays_open(client, owner, sqa3d_split, good, sent_tasks):
    assert create(owner, good).status == "queued"
    assert 'id="phase"' not in client.get("/benchmarks/sqa3d/").content.decode()
    body = board(client)
    assert body["phase"] == "open" and body["next_phase"] is None and body["scores_of"] == "all"
    assert LeaderboardEntry.objects.count() == 0
