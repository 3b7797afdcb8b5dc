"""Login lockout (django-axes, per username and IP) and a cap on new API tokens per user."""

from __future__ import annotations

import pytest
from django.core.management import call_command

from leaderboard.accounts.models import ApiToken

PASSWORD = "correct horse battery"  # conftest's users


def login(client, username, password, ip="10.0.0.1"):
    return client.post("/accounts/login/", {"username": username, "password": password}, REMOTE_ADDR=ip)


def signed_in(client) -> bool:
    return "_auth_user_id" in client.session


def test_thirty_wrong_passwords_lock_the_account_out_from_that_address(client, owner, outsider, settings):
    for _ in range(30):
        assert login(client, "alice", "wrong").status_code in (200, 429)
    locked = login(client, "alice", PASSWORD)
    assert locked.status_code == 429 and not signed_in(client)
    assert f"{settings.AXES_FAILURE_LIMIT} failed" in locked.content.decode()
    # Scoped to username + address: others, and alice elsewhere, still get in.
    assert login(client, "charlie", PASSWORD).status_code == 302 and signed_in(client)
    client.logout()
    assert login(client, "alice", PASSWORD, ip="10.0.0.2").status_code == 302 and signed_in(client)


def test_a_success_before_the_limit_resets_the_count(client, owner, settings):
    for _ in range(3):
        for _ in range(settings.AXES_FAILURE_LIMIT - 1):
            login(client, "alice", "wrong")
        assert login(client, "alice", PASSWORD).status_code == 302
        client.logout()


def test_axes_reset_unlocks(client, owner, settings):
    for _ in range(settings.AXES_FAILURE_LIMIT):
        login(client, "alice", "wrong")
    assert login(client, "alice", PASSWORD).status_code == 429
    call_command("axes_reset")
    assert login(client, "alice", PASSWORD).status_code == 302


def test_token_creation_on_the_page_is_capped_per_hour(client, owner, settings):
    settings.TOKENS_PER_HOUR = 3
    client.force_login(owner)
    for i in range(3):
        assert client.post("/accounts/tokens/", {"name": f"t{i}"}).status_code == 200
    refused = client.post("/accounts/tokens/", {"name": "one too many"})
    assert refused.status_code == 429
    assert "3 API tokens in the last hour" in refused.content.decode()
    assert ApiToken.objects.filter(user=owner).count() == 3


@pytest.mark.parametrize("revoke", [False, True])
def test_revoking_does_not_refill_the_cap_and_issue_token_is_exempt(client, owner, settings, capsys, revoke):
    settings.TOKENS_PER_HOUR = 1
    client.force_login(owner)
    client.post("/accounts/tokens/", {"name": "first"})
    if revoke:
        client.post(f"/accounts/tokens/{ApiToken.objects.get().pk}/revoke/")
    assert client.post("/accounts/tokens/", {"name": "second"}).status_code == 429
    call_command("issue_token", "alice", "--name", "from the shell")
    assert capsys.readouterr().out.startswith("lb_")
    assert ApiToken.objects.filter(user=owner).count() == 2
