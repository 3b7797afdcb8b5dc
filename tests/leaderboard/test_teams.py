"""Teams (labs): create, add and remove members, submit for a team, quotas per team."""

from __future__ import annotations

import io

import pytest

from leaderboard.accounts.models import Membership, Team
from leaderboard.accounts.services import TeamError, check_add_member, check_remove_member, do_create_team
from leaderboard.submissions import services


@pytest.fixture
def lab(owner):
    return do_create_team(owner, "Vision Lab")


def test_it_creates_a_team_on_the_teams_page(client, owner):
    client.force_login(owner)
    response = client.post("/accounts/teams/", {"name": "Vision Lab"})
    assert response.status_code == 302 and response.url == "/accounts/teams/vision-lab/"
    assert Membership.objects.get(team__slug="vision-lab", user=owner).role == "owner"
    assert "already" in client.post("/accounts/teams/", {"name": "vision lab"}).content.decode()


def test_owners_add_members_and_members_cannot(client, owner, outsider, member, lab):
    client.force_login(owner)
    client.post(f"/accounts/teams/{lab.slug}/", {"username": "charlie", "role": "member"})
    assert lab.members.filter(pk=outsider.pk).exists()
    with pytest.raises(TeamError, match="Only the team's owners"):
        check_add_member(outsider, lab, member)


def test_a_team_keeps_its_last_owner(client, owner, outsider, lab):
    check_add_member(owner, lab, outsider)
    with pytest.raises(TeamError, match="last owner"):
        check_remove_member(owner, lab, owner)
    client.force_login(outsider)
    client.post(f"/accounts/teams/{lab.slug}/members/{outsider.pk}/remove/")
    assert not lab.members.filter(pk=outsider.pk).exists()


def test_members_submit_for_their_team_and_quotas_count_per_team(owner, outsider, lab, sqa3d_split, sqa3d_files,
                                                                 sent_tasks, settings):
    settings.QUOTA_PER_DAY, settings.QUOTA_IN_FLIGHT = 1, 5
    check_add_member(owner, lab, outsider)
    content = sqa3d_files["predictions"].read_bytes()

    def create(user, team=None):
        return services.check_create_submission(user=user, track="sqa3d", split="test", method_name="LabNet",
                                                file=io.BytesIO(content), file_name="p.json", team=team)

    assert create(outsider, "vision-lab").team == lab
    with pytest.raises(services.QuotaExceeded, match="team Vision Lab"):
        create(owner, "vision-lab")
    assert create(owner).team.is_personal, "the personal team has its own quota"
    with pytest.raises(services.SubmissionRejected, match="not a member"):
        create(owner, "nobodys-lab")


def test_the_api_names_the_users_teams(client, owner, lab):
    from leaderboard.accounts.services import do_create_token

    body = client.get("/api/v1/me", headers={"Authorization": f"Token {do_create_token(owner)}"}).json()
    assert body["username"] == "alice"
    assert {t["slug"] for t in body["teams"]} == {"alice", "vision-lab"}
    assert Team.objects.count() == 2
