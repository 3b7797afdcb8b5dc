"""Limits per split, per team and per user (issue 13): a new team buys no submissions, the
minimum interval, the split's own limits, refunds, and errors that say which limit and when."""

from __future__ import annotations

import io
from datetime import timedelta

import pytest
from django.utils import timezone

from leaderboard.accounts.services import do_create_team, do_create_token
from leaderboard.submissions import lifecycle, quotas, services
from leaderboard.submissions.models import QuotaOverride, SplitLimit, Submission


def create(user, content: bytes, team=None) -> Submission:
    return services.check_create_submission(user=user, track="sqa3d", split="test", method_name="QNet",
                                            file=io.BytesIO(content), file_name="p.json", team=team)


@pytest.fixture
def good(sqa3d_files) -> bytes:
    return sqa3d_files["predictions"].read_bytes()


def test_a_new_team_does_not_reset_the_users_daily_limit(owner, sqa3d_split, good, sent_tasks, settings):
    settings.QUOTA_PER_DAY, settings.QUOTA_IN_FLIGHT = 2, 10
    create(owner, good), create(owner, good)
    fresh = do_create_team(owner, "Second Chance")
    with pytest.raises(services.QuotaExceeded, match=r"2 of 2 submissions today by user alice on sqa3d/test "
                                                     r"\(a limit per user, over all their teams\); the count "
                                                     r"resets at \d{4}-\d\d-\d\d 00:00 UTC"):
        create(owner, good, team=fresh)
    assert Submission.objects.filter(team=fresh).count() == 0


def test_a_refunded_submission_gives_the_user_their_submission_back(owner, sqa3d_split, good, sent_tasks,
                                                                    settings):
    settings.QUOTA_PER_DAY, settings.QUOTA_IN_FLIGHT = 1, 10
    crashed = create(owner, good)
    lifecycle.record_failure(submission_id=crashed.pk, attempt=1, kind="platform_error", message="worker died")
    second_team = do_create_team(owner, "Other")
    assert create(owner, good, team=second_team).status == "queued"
    with pytest.raises(services.QuotaExceeded, match="by user alice"):
        create(owner, good)


def test_the_minimum_interval_names_its_value_and_the_next_allowed_time(owner, sqa3d_split, good, sent_tasks,
                                                                         client):
    SplitLimit.objects.create(split=sqa3d_split, scope=SplitLimit.Scope.TEAM, min_interval=3600, in_flight=5)
    first = create(owner, good)
    with pytest.raises(services.QuotaExceeded) as refused:
        create(owner, good)
    next_at = first.created_at + timedelta(seconds=3600)
    assert f"at most one submission every 3600 s for team {owner.username}" in str(refused.value)
    assert f"the next one is allowed at {next_at:%Y-%m-%d %H:%M} UTC" in str(refused.value)
    assert refused.value.retry_at == next_at

    headers = {"Authorization": f"Token {do_create_token(owner)}"}
    with open(__file__, "rb") as f:
        response = client.post("/api/v1/submissions", {"track": "sqa3d", "split": "test", "method_name": "Q",
                                                        "file": f}, headers=headers)
    assert response.status_code == 429
    error = response.json()["error"]
    assert error["code"] == "quota_exceeded" and error["retry_at"] == next_at.isoformat()
    assert 3500 < int(response["Retry-After"]) <= 3600
    body = client.get("/api/v1/quota?track=sqa3d&split=test", headers=headers).json()
    assert body["min_interval"] == {"seconds": 3600, "next_at": next_at.isoformat()}

    Submission.objects.filter(pk=first.pk).update(created_at=timezone.now() - timedelta(seconds=3601))
    assert create(owner, good).status == "queued"


def test_a_cancelled_submission_does_not_start_the_interval(owner, sqa3d_split, good, sent_tasks):
    SplitLimit.objects.create(split=sqa3d_split, scope=SplitLimit.Scope.USER, min_interval=600)
    services.check_cancel(owner, create(owner, good))
    assert create(owner, good).status == "queued"
    with pytest.raises(services.QuotaExceeded, match=r"every 600 s by user alice"):
        create(owner, good, team=do_create_team(owner, "Elsewhere"))


def test_the_splits_user_limits_bind_across_teams_and_a_split_override_beats_the_split_limit(
        owner, member, sqa3d_split, good, sent_tasks, settings):
    settings.QUOTA_IN_FLIGHT = 10
    SplitLimit.objects.create(split=sqa3d_split, scope=SplitLimit.Scope.USER, total=2)
    SplitLimit.objects.create(split=sqa3d_split, scope=SplitLimit.Scope.TEAM, per_day=3)
    create(owner, good), create(owner, good)
    with pytest.raises(services.QuotaExceeded, match=r"2 of 2 submissions in total by user alice .*refunded"):
        create(owner, good, team=do_create_team(owner, "Third"))
    create(member, good)  # the team's third today: bob has his own user count
    with pytest.raises(services.QuotaExceeded, match=r"3 of 3 submissions today for team alice"):
        create(member, good)
    team = owner.teams.get(is_personal=True)
    QuotaOverride.objects.create(team=team, split=sqa3d_split, per_day=4)
    assert quotas.limits_for(team, sqa3d_split).per_day == 4
    QuotaOverride.objects.filter(team=team).update(split=None)
    assert quotas.limits_for(team, sqa3d_split).per_day == 3  # the split's limit beats an override for all splits


def test_the_in_flight_limit_per_user_says_when_the_next_is_allowed(owner, sqa3d_split, good, sent_tasks, settings):
    settings.QUOTA_IN_FLIGHT, settings.QUOTA_USER_IN_FLIGHT = 5, 1
    create(owner, good)
    with pytest.raises(services.QuotaExceeded, match=r"1 submissions by user alice .* \(at most 1 at once\); the "
                                                     r"next one is allowed when one of them finishes"):
        create(owner, good, team=do_create_team(owner, "Parallel"))


def test_lb_quota_shows_the_users_own_limits_and_the_interval(live_server, owner, lb_config, sqa3d_split, good,
                                                              sent_tasks, capsys):
    from leaderboard_cli.main import main

    SplitLimit.objects.create(split=sqa3d_split, scope=SplitLimit.Scope.USER, per_day=3, min_interval=600)
    create(owner, good)
    assert main(["login", "--server", live_server.url, "--token", do_create_token(owner)]) == 0
    capsys.readouterr()
    assert main(["quota", "--track", "sqa3d", "--split", "test"]) == 0
    out = capsys.readouterr().out
    assert "you, over all your teams:" in out and "per day              1 of 3" in out
    assert "min interval      600 s; the next is allowed at " in out
