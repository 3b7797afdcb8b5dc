"""Anonymous entries (issue 13): the rules of publishing anonymously and revealing.
Who sees what, through every page and the API, is in test_permissions.py."""

from __future__ import annotations

import io

import pytest
from django.core.exceptions import PermissionDenied

from evaluation_workers.tracks import get_track
from leaderboard.moderation import services as moderation
from leaderboard.moderation.models import AuditEntry
from leaderboard.rankings.models import LeaderboardEntry
from leaderboard.submissions import lifecycle, services
from leaderboard.submissions.models import Method, Submission
from tests.leaderboard.conftest import describe_method


@pytest.fixture
def scored(owner, sqa3d_split, sqa3d_files, sent_tasks, settings):
    """A function making finished, described submissions of a method on sqa3d/test."""
    settings.QUOTA_PER_DAY = settings.QUOTA_TOTAL = settings.QUOTA_IN_FLIGHT = 50
    result = get_track("sqa3d").score(sqa3d_files["labels"], sqa3d_files["predictions"], lambda f, m="": None)

    def make(name: str) -> Submission:
        sub = services.check_create_submission(user=owner, track="sqa3d", split="test", method_name=name,
                                               file=io.BytesIO(sqa3d_files["predictions"].read_bytes()),
                                               file_name="p.json")
        lifecycle.record_result(submission_id=sub.pk, attempt=1, result=result)
        describe_method(sub.method)
        return Submission.objects.select_related("method", "team").get(pk=sub.pk)

    return make


def entry(sub: Submission) -> LeaderboardEntry:
    return LeaderboardEntry.objects.get(method_id=sub.method_id)


def test_anonymity_belongs_to_the_method_and_survives_republishing_and_moderation(owner, maintainer, scored):
    first = scored("BlindNet")
    services.check_publish(owner, first, anonymous=True)
    row = entry(first)
    assert row.is_anonymous and row.team_name == ""
    second = scored("BlindNet")  # a better run of the same method, published without the option
    services.check_publish(owner, second)
    assert entry(second).is_anonymous and entry(second).submission_id == second.pk
    moderation.check_toggle(maintainer, second, "hide", True, "checking")
    moderation.check_toggle(maintainer, second, "hide", False)
    moderation.check_toggle(maintainer, second, "verify", True)
    row = entry(second)
    assert row.is_anonymous and row.team_name == "" and row.is_verified
    services.check_publish(owner, second, publish=False)
    services.check_publish(owner, second)
    assert entry(second).is_anonymous


def test_a_method_public_under_its_team_or_revealed_cannot_become_anonymous(owner, scored):
    public = scored("OpenNet")
    services.check_publish(owner, public)
    with pytest.raises(services.SubmissionRejected, match="public under its team"):
        services.check_publish(owner, scored("OpenNet"), anonymous=True)
    assert not entry(public).is_anonymous and entry(public).team_name == public.team.name

    hidden = scored("BlindNet")
    services.check_publish(owner, hidden, anonymous=True)
    services.check_reveal(owner, hidden.method)
    with pytest.raises(services.SubmissionRejected, match="nothing to reveal"):
        services.check_reveal(owner, hidden.method)
    services.check_publish(owner, hidden, publish=False)
    with pytest.raises(services.SubmissionRejected, match="revealed on"):
        services.check_publish(owner, hidden, anonymous=True)
    assert not Method.objects.get(pk=hidden.method_id).is_anonymous


def test_only_the_team_reveals_and_each_act_is_in_the_audit_log(owner, member, outsider, maintainer, scored):
    hidden = scored("BlindNet")
    services.check_publish(member, hidden, anonymous=True)
    for user in (outsider, maintainer):
        with pytest.raises(PermissionDenied):
            services.check_reveal(user, hidden.method)
    services.check_publish(owner, hidden, publish=False)  # a withdrawn method is revealed all the same
    method = services.check_reveal(owner, hidden.method)
    assert not method.is_anonymous and method.revealed_at is not None
    log = list(AuditEntry.objects.order_by("id").values_list("action", "actor_name", "track", "split"))
    assert log == [("anonymize", "bob", "sqa3d", "test"), ("reveal", "alice", "sqa3d", "test")]


def test_publish_and_reveal_through_the_api(owner, scored, client):
    from leaderboard.accounts.services import do_create_token

    headers = {"Authorization": f"Token {do_create_token(owner)}"}
    sub = scored("ApiBlindNet")
    response = client.post(f"/api/v1/submissions/{sub.pk}/publish", {"anonymous": True},
                           content_type="application/json", headers=headers)
    assert response.status_code == 200 and entry(sub).is_anonymous
    mine = client.get(f"/api/v1/my/methods/{sub.method_id}", headers=headers).json()
    assert mine["anonymous"] is True and mine["revealed_at"] is None
    revealed = client.post(f"/api/v1/my/methods/{sub.method_id}/reveal", headers=headers)
    assert revealed.status_code == 200 and revealed.json()["anonymous"] is False
    assert entry(sub).team_name == sub.team.name
    again = client.post(f"/api/v1/my/methods/{sub.method_id}/reveal", headers=headers)
    assert again.status_code == 409 and again.json()["error"]["code"] == "conflict"
    other = scored("FormNet")  # a form field works too
    assert client.post(f"/api/v1/submissions/{other.pk}/publish", {"anonymous": "1"},
                       headers=headers).status_code == 200
    assert entry(other).is_anonymous


def test_the_publish_form_offers_anonymity_and_the_method_page_the_reveal(owner, scored, client):
    sub = scored("FormBlindNet")
    client.force_login(owner)
    assert "Anonymous (under review)" in client.get(f"/submissions/{sub.pk}/").content.decode()
    client.post(f"/submissions/{sub.pk}/publish/", {"publish": "1", "anonymous": "1"})
    assert entry(sub).is_anonymous
    page = client.get(f"/submissions/methods/{sub.method_id}/").content.decode()
    assert 'id="reveal-button"' in page
    public = client.get(f"/methods/{sub.method_id}/").content.decode()
    assert 'id="anonymous-note"' in public  # only its members get the note (their pages are never cached)
    client.post(f"/submissions/methods/{sub.method_id}/reveal/")
    assert 'id="reveal-button"' not in client.get(f"/submissions/methods/{sub.method_id}/").content.decode()
    assert f"by team {sub.team.name}" in client.get(f"/methods/{sub.method_id}/").content.decode()


def test_lb_publish_anonymous_and_lb_method_reveal_send_what_the_api_expects(monkeypatch, capsys, lb_config):
    from leaderboard_cli import main as cli

    calls = []

    class FakeClient:
        def post(self, path, **kwargs):
            calls.append((path, kwargs))
            if path.endswith("/publish"):
                return {"id": 7, "method": "BlindNet", "track": "sqa3d", "split": "test"}
            return {**method, "anonymous": False}

        def get(self, path, **kwargs):
            return {"methods": [method]}

    method = {"id": 3, "name": "BlindNet", "team": "alice", "description": "d", "authors": "a", "paper_url": "",
              "code_url": "", "uses_extra_data": False, "details": "", "anonymous": True,
              "missing_for_publishing": []}
    monkeypatch.setattr(cli, "_client", lambda args: FakeClient())
    assert cli.main(["publish", "7", "--anonymous"]) == 0
    assert "as Anonymous (under review)" in capsys.readouterr().out
    assert cli.main(["method", "reveal", "BlindNet"]) == 0
    assert calls == [("submissions/7/publish", {"json": {"anonymous": True}}), ("my/methods/3/reveal", {})]
