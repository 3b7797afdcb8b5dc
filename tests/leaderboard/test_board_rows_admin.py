"""Every change to a board row goes through the rules (issue 34): in /admin/ a scored row is read-only
(which submission it shows above all), a submission shown by a row cannot be deleted under it, and
the desk's audited withdrawal (with a reason) is the way to take it off before deleting it."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from leaderboard.benchmarks.models import Split
from leaderboard.moderation.models import AuditEntry
from leaderboard.rankings.models import LeaderboardEntry
from leaderboard.submissions import services
from leaderboard.submissions.models import Submission
from tests.leaderboard.conftest import scored_submission


@pytest.fixture
def root(db, django_user_model) -> Client:
    client = Client()
    client.force_login(django_user_model.objects.create_superuser("root", password="x", email="root@example.org"))
    return client


@pytest.fixture
def two(owner, sqa3d_split, sqa3d_files, sent_tasks, django_capture_on_commit_callbacks) -> list[Submission]:
    """Two scored submissions of the method LockNet, the first published (its board row)."""
    first, second = (scored_submission(owner, sqa3d_files, django_capture_on_commit_callbacks, "LockNet")
                     for _ in range(2))
    with django_capture_on_commit_callbacks(execute=True):
        services.check_publish(owner, first)
    return [first, second]


def test_a_scored_row_is_read_only_in_the_admin_and_says_where_its_selection_changes(root, two):
    first, second = two
    row = LeaderboardEntry.objects.get(submission=first)
    url = f"/admin/rankings/leaderboardentry/{row.pk}/change/"
    page = root.get(url)
    text = page.content.decode()
    assert 'name="submission"' not in text and 'name="scores"' not in text and 'name="result"' not in text
    assert "cannot be edited here" in text and "moderation desk, with a reason" in text
    form = {k: v for k, v in page.context["adminform"].form.initial.items() if v is not None}
    root.post(url, {**form, "submission": second.pk, "scores": '{"EM": 0.99}', "primary_score": "0.99"})
    row.refresh_from_db()
    assert row.submission_id == first.pk and row.primary_score != 0.99
    assert not AuditEntry.objects.filter(action=AuditEntry.Action.ADMIN_CHANGE).exists()
    # Nor is the published submission moved to another method or split from its own form.
    assert 'name="method"' not in root.get(f"/admin/submissions/submission/{first.pk}/change/").content.decode()
    assert 'name="method"' in root.get(f"/admin/submissions/submission/{second.pk}/change/").content.decode()


def test_a_submission_with_a_board_row_is_deleted_only_after_the_desk_withdraws_it(root, owner, maintainer, two,
                                                                                  sqa3d_split):
    first, second = two
    url = f"/admin/submissions/submission/{first.pk}/delete/"
    page = root.get(url).content.decode()
    assert "Cannot delete submission" in page and "withdraw it on the moderation desk with a reason" in page
    assert root.post(url, {"post": "yes"}).status_code == 200  # the same refusal, nothing deleted
    bulk = root.post("/admin/submissions/submission/", {"action": "delete_selected", "post": "yes",
                                                        "_selected_action": [first.pk, second.pk]})
    assert "withdraw it on the moderation desk" in bulk.content.decode()
    assert Submission.objects.filter(pk__in=[first.pk, second.pk]).count() == 2
    assert LeaderboardEntry.objects.get(method=first.method).submission_id == first.pk
    assert not AuditEntry.objects.filter(action=AuditEntry.Action.ADMIN_DELETE).exists()

    # After the reveal the selection is locked: the desk withdraws it for the team, with a reason.
    now = timezone.now()
    Split.objects.filter(pk=sqa3d_split.pk).update(freeze_at=now - timedelta(hours=2), deadline=now - timedelta(seconds=1))
    desk = Client()
    desk.force_login(maintainer)
    desk.post(f"/moderation/submissions/{first.pk}/publish/", {"on": "0", "reason": "a mislabelled upload"})
    assert AuditEntry.objects.get(action="withdraw_for_team").reason == "a mislabelled upload"
    assert root.post(url, {"post": "yes"}).status_code == 302
    assert not Submission.objects.filter(pk=first.pk).exists()
    assert not LeaderboardEntry.objects.filter(is_paper=False).exists(), "no row left without its submission"
