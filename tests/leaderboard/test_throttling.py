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


# Limits per address, over every username and token (issue 26).


def test_password_spraying_across_usernames_is_refused_for_the_address(client, owner, settings, django_user_model):
    """One password tried on many accounts never trips the per-username lockout; the address's count does."""
    settings.LOGIN_FAILURES_PER_ADDRESS = 5
    for i in range(5):
        django_user_model.objects.create_user(f"user{i}", password="something else entirely")
        assert login(client, f"user{i}", "Summer2026!").status_code == 200
    refused = login(client, "alice", PASSWORD)
    assert refused.status_code == 429 and not signed_in(client)
    assert 0 < int(refused["Retry-After"]) <= settings.ADDRESS_THROTTLE_WINDOW + 1
    assert "More than 5 failed sign-ins came from your address" in refused.content.decode()
    # Another address signs in as before.
    assert login(client, "alice", PASSWORD, ip="10.0.0.9").status_code == 302 and signed_in(client)


def test_the_address_may_sign_in_again_in_the_next_window(client, owner, settings, monkeypatch):
    from leaderboard.accounts import throttle

    settings.LOGIN_FAILURES_PER_ADDRESS, settings.ADDRESS_THROTTLE_WINDOW = 2, 600
    now = [6000.0]  # the start of a window
    monkeypatch.setattr(throttle.time, "time", lambda: now[0])
    for name in ("x", "y"):
        login(client, name, "wrong")
    assert login(client, "alice", PASSWORD).status_code == 429
    now[0] += 600
    assert login(client, "alice", PASSWORD).status_code == 302


def api_me(client, key, ip="10.0.0.1"):
    return client.get("/api/v1/me", HTTP_AUTHORIZATION=f"Token {key}", REMOTE_ADDR=ip)


def test_token_guessing_is_refused_for_the_address(client, owner, settings):
    from leaderboard.accounts.services import do_create_token

    settings.TOKEN_FAILURES_PER_ADDRESS = 3
    key = do_create_token(owner, name="laptop")
    prefix = key.split("_")[1]
    for guess in (f"lb_{prefix}_guess1", "lb_zzzz_guess2", "not-a-token"):
        assert api_me(client, guess).status_code == 401
    refused = api_me(client, key)
    assert refused.status_code == 429 and refused.json()["error"]["code"] == "throttled"
    assert "More than 3 failed token authentications" in refused.json()["error"]["message"]
    assert 0 < int(refused["Retry-After"]) <= settings.ADDRESS_THROTTLE_WINDOW + 1
    assert api_me(client, key, ip="10.0.0.9").status_code == 200


def test_without_the_cache_nobody_is_limited_here(client, owner, settings):
    """The counts are an accelerator's job: a cache that is down limits no one (axes still locks per username)."""
    from leaderboard.accounts.services import do_create_token

    settings.TOKEN_FAILURES_PER_ADDRESS = 1
    settings.CACHES = {"default": {**settings.CACHES["default"], "LOCATION": "redis://127.0.0.1:9/0"}}
    key = do_create_token(owner, name="laptop")
    assert api_me(client, "lb_x_wrong").status_code == 401
    assert api_me(client, key).status_code == 200
