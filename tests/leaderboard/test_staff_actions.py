"""Staff see every submission but act on their own teams' only; maintainers act through the audited desk."""

from __future__ import annotations

import io

import pytest
from django.core.exceptions import PermissionDenied

from evaluation_workers.tracks import get_track
from leaderboard.accounts.services import do_create_token
from leaderboard.moderation.models import AuditEntry
from leaderboard.rankings.models import LeaderboardEntry
from leaderboard.submissions import lifecycle, services
from leaderboard.submissions.models import Submission
from tests.leaderboard.conftest import describe_method


@pytest.fixture
def finished(owner, sqa3d_split, sqa3d_files, sent_tasks):
    """A scored, described, private submission of alice's."""
    submission = services.check_create_submission(
        user=owner, track="sqa3d", split="test", method_name="PrivateNet",
        file=io.BytesIO(sqa3d_files["predictions"].read_bytes()), file_name="p.json")
    result = get_track("sqa3d").score(sqa3d_files["labels"], sqa3d_files["predictions"], lambda f, m="": None)
    lifecycle.record_result(submission_id=submission.pk, attempt=1, result=result)
    describe_method(submission.method)
    return Submission.objects.get(pk=submission.pk)


def test_staff_cannot_publish_a_users_private_submission_through_the_api(client, maintainer, finished):
    response = client.post(f"/api/v1/submissions/{finished.pk}/publish",
                           headers={"Authorization": f"Token {do_create_token(maintainer)}"})
    assert response.status_code == 403
    assert not Submission.objects.get(pk=finished.pk).is_published
    assert not LeaderboardEntry.objects.filter(name="PrivateNet").exists()
    assert client.get(f"/api/v1/submissions/{finished.pk}",
                      headers={"Authorization": f"Token {do_create_token(maintainer)}"}).status_code == 200


def test_staff_cannot_publish_withdraw_or_cancel_on_the_pages(client, maintainer, owner, finished):
    client.force_login(maintainer)
    assert client.post(f"/submissions/{finished.pk}/publish/").status_code == 403
    services.check_publish(owner, finished)
    assert client.post(f"/submissions/{finished.pk}/publish/", {"publish": "0"}).status_code == 403
    assert client.post(f"/submissions/{finished.pk}/cancel/").status_code == 403
    finished.refresh_from_db()
    assert finished.is_published and finished.status == "finished"


@pytest.mark.parametrize("action", ["publish", "cancel"])
def test_staff_in_the_team_act_like_any_member(owner, maintainer, finished, action):
    from leaderboard.accounts.models import Membership

    with pytest.raises(PermissionDenied, match="member of the team"):
        getattr(services, f"check_{action}")(maintainer, finished)
    Membership.objects.create(team=finished.team, user=maintainer)
    getattr(services, f"check_{action}")(maintainer, finished)


def test_a_maintainers_cancel_goes_through_the_desk_and_is_audited(client, maintainer, owner, sqa3d_split,
                                                                   sqa3d_files, sent_tasks):
    queued = services.check_create_submission(
        user=owner, track="sqa3d", split="test", method_name="Q",
        file=io.BytesIO(sqa3d_files["predictions"].read_bytes()), file_name="p.json")
    client.force_login(maintainer)
    client.post(f"/moderation/submissions/{queued.pk}/cancel/", {"reason": "stuck"})
    assert Submission.objects.get(pk=queued.pk).status == "cancelled"
    assert AuditEntry.objects.get().action == "cancel"
