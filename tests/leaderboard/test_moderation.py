"""The moderation desk: actions, their effects, the audit log, and who may act."""

from __future__ import annotations

import io
from datetime import timedelta

import pytest
from django.utils import timezone

from evaluation_workers.tracks import get_track
from leaderboard.moderation.models import AuditEntry
from leaderboard.rankings.models import LeaderboardEntry
from leaderboard.submissions import lifecycle, services
from leaderboard.submissions.models import Result, Submission
from tests.leaderboard.conftest import describe_method


@pytest.fixture
def published(owner, sqa3d_split, sqa3d_files, sent_tasks):
    submission = services.check_create_submission(
        user=owner, track="sqa3d", split="test", method_name="ModNet",
        file=io.BytesIO(sqa3d_files["predictions"].read_bytes()), file_name="p.json")
    result = get_track("sqa3d").score(sqa3d_files["labels"], sqa3d_files["predictions"], lambda f, m="": None)
    lifecycle.record_result(submission_id=submission.pk, attempt=1, result=result)
    describe_method(submission.method)
    services.check_publish(owner, submission)
    submission.refresh_from_db()
    return submission


def act(client, submission, action, **data):
    return client.post(f"/moderation/submissions/{submission.pk}/{action}/", data)


def board_names():
    return list(LeaderboardEntry.objects.filter(is_paper=False).values_list("name", flat=True))


def test_hiding_needs_a_reason_and_removes_the_row_until_unhidden(client, maintainer, published):
    client.force_login(maintainer)
    act(client, published, "hide", on="1", reason="")
    assert board_names() == ["ModNet"] and not AuditEntry.objects.exists()
    act(client, published, "hide", on="1", reason="Trained on the test scenes")
    assert board_names() == []
    entry = AuditEntry.objects.get()
    assert (entry.actor_name, entry.action, entry.reason, entry.submission_id) == \
        ("mallory", "hide", "Trained on the test scenes", published.pk)
    act(client, published, "hide", on="0")
    assert board_names() == ["ModNet"]


def test_verifying_puts_a_badge_on_the_row(client, maintainer, published):
    client.force_login(maintainer)
    act(client, published, "verify", on="1")
    assert LeaderboardEntry.objects.get(name="ModNet").is_verified
    assert "verified" in client.get("/benchmarks/sqa3d/").content.decode()


def test_disqualifying_shows_the_reason_on_the_method_page(client, maintainer, published):
    client.force_login(maintainer)
    act(client, published, "disqualify", on="1", reason="Used test labels")
    assert board_names() == []
    client.logout()
    page = client.get(f"/methods/{published.method_id}/").content.decode()
    assert "Disqualified on SQA3D test: Used test labels" in page


def test_rescoring_keeps_old_results_and_queues_again(client, maintainer, published, sent_tasks,
                                                      django_capture_on_commit_callbacks):
    client.force_login(maintainer)
    with django_capture_on_commit_callbacks(execute=True):
        act(client, published, "rescore", reason="scorer fix")
    published.refresh_from_db()
    assert published.status == "queued" and published.attempt == 2
    assert sent_tasks[-1]["kwargs"]["attempt"] == 2
    old = Result.objects.get(submission=published)
    lifecycle.record_result(submission_id=published.pk, attempt=2,
                           result={**old.as_json(), "scorer_version": "9.9.9", "track": "sqa3d"})
    assert set(Result.objects.filter(submission=published).values_list("scorer_version", flat=True)) == \
        {old.scorer_version, "9.9.9"}


def test_rescoring_a_whole_split_needs_a_reason_and_queues_each(client, maintainer, published, sent_tasks,
                                                                 django_capture_on_commit_callbacks):
    client.force_login(maintainer)
    with django_capture_on_commit_callbacks(execute=True):
        client.post("/moderation/tracks/sqa3d/", {"action": "rescore_all", "split": "test", "reason": "1.0.1"})
    assert Submission.objects.get(pk=published.pk).status == "queued"
    assert AuditEntry.objects.get(action="rescore_all").details == {"count": 1}


def test_cancelling_a_queued_submission(client, maintainer, owner, sqa3d_split, sqa3d_files, sent_tasks):
    queued = services.check_create_submission(
        user=owner, track="sqa3d", split="test", method_name="Q",
        file=io.BytesIO(sqa3d_files["predictions"].read_bytes()), file_name="p.json")
    client.force_login(maintainer)
    act(client, queued, "cancel", reason="stuck")
    queued.refresh_from_db()
    assert queued.status == "cancelled" and "stuck" in queued.status_detail


def test_pausing_a_track_refuses_new_submissions(client, maintainer, owner, sqa3d_split, sqa3d_files):
    client.force_login(maintainer)
    client.post("/moderation/tracks/sqa3d/", {"action": "pause", "reason": "challenge closed"})
    with pytest.raises(services.SubmissionRejected, match="not accepting"):
        services.check_create_submission(user=owner, track="sqa3d", split="test", method_name="Late",
                                         file=io.BytesIO(b"[]"), file_name="p.json")
    client.post("/moderation/tracks/sqa3d/", {"action": "resume"})
    sqa3d_split.refresh_from_db()
    assert sqa3d_split.accepting_submissions


def test_results_visible_after_is_set_from_the_track_page(client, maintainer, published):
    client.force_login(maintainer)
    when = (timezone.now() + timedelta(days=2)).strftime("%Y-%m-%dT%H:%M")
    client.post("/moderation/tracks/sqa3d/", {"action": "visible_after", "split": "test", "when": when})
    client.logout()
    assert client.get("/api/v1/leaderboards/sqa3d").json()["results_embargoed"]


def test_the_audit_log_is_append_only(maintainer, published):
    from leaderboard.moderation.services import check_toggle

    check_toggle(maintainer, published, "flag", True, "suspicious")
    entry = AuditEntry.objects.get()
    entry.reason = "changed"
    with pytest.raises(PermissionError):
        entry.save()
    with pytest.raises(PermissionError):
        entry.delete()


@pytest.mark.parametrize("who, status", [("anonymous", 403), ("owner", 403), ("member", 403),
                                         ("outsider", 403), ("maintainer", 200), ("track_maintainer", 200)])
def test_only_maintainers_reach_the_desk(request, client, who, status, member, published):
    if who != "anonymous":
        client.force_login(request.getfixturevalue(who))
    for url in ("/moderation/", "/moderation/audit/", f"/moderation/submissions/{published.pk}/",
                "/moderation/tracks/sqa3d/"):
        assert client.get(url).status_code == status, url
    response = act(client, published, "hide", on="1", reason="x")
    assert response.status_code == (302 if status == 200 else 403)
    assert board_names() == ([] if status == 200 else ["ModNet"])


def test_a_track_maintainer_cannot_act_on_another_track(client, track_maintainer, db):
    from leaderboard.benchmarks.bundle_apply import load_bundled_benchmarks

    load_bundled_benchmarks()
    client.force_login(track_maintainer)
    assert client.get("/moderation/tracks/sqa3d/").status_code == 200
    other = [b for b in ("openscan", "mmscan-vg") if client.get(f"/moderation/tracks/{b}/").status_code != 404]
    for track in other:
        assert client.get(f"/moderation/tracks/{track}/").status_code == 403


def test_rescore_outdated_queues_the_splits_scored_by_an_older_scorer(maintainer, outsider, published, sent_tasks,
                                                                     django_capture_on_commit_callbacks):
    """After a scorer upgrade: the desk's bulk re-score, audited, for each split with older results."""
    from django.core.management import CommandError, call_command

    out = io.StringIO()
    call_command("rescore_outdated", "--as", maintainer.username, "--reason", "upgrade", stdout=out)
    assert "0 submissions queued" in out.getvalue()  # every result is of the current scorer
    Result.objects.filter(submission=published).update(scorer_version="1.1.0")
    call_command("rescore_outdated", "--as", maintainer.username, "--reason", "upgrade", "--dry-run", stdout=out)
    assert "sqa3d/test: 1 submissions scored before" in out.getvalue()
    assert Submission.objects.get(pk=published.pk).status == "finished"
    with pytest.raises(CommandError, match="may not re-score"):
        call_command("rescore_outdated", "--as", outsider.username, "--reason", "upgrade")
    with django_capture_on_commit_callbacks(execute=True):
        call_command("rescore_outdated", "--as", maintainer.username, "--reason", "scorer 1.2.0", stdout=out)
    assert "sqa3d/test: 1 submissions queued" in out.getvalue()
    assert Submission.objects.get(pk=published.pk).status == "queued"
    entry = AuditEntry.objects.get(action="rescore_all")
    assert entry.reason == "scorer 1.2.0" and entry.actor == maintainer and entry.details == {"count": 1}
