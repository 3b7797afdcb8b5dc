"""Verified e-mail addresses (issue 39): a signed link mailed at sign-up or on a change, confirmed by a
POST; one account per verified address; ``issue_token --create-user`` as before."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.core import signing
from django.core.management import call_command

from leaderboard.accounts import emails
from leaderboard.accounts.models import VerifiedEmail


def _link(message) -> str:
    return re.search(r"http://\S+/accounts/email/verify/\S+/", message.body)[0].split("://", 1)[1].split("/", 1)[1]


def test_sign_up_mails_a_link_that_verifies_the_address_after_a_confirmation(client, db, mailoutbox):
    response = client.post("/accounts/signup/", {"username": "newcomer", "email": "New@Lab.example.org",
                                                 "password1": "a long pass phrase 42",
                                                 "password2": "a long pass phrase 42"}, follow=True)
    assert "We mailed a link to new@lab.example.org" in response.content.decode()
    [mail] = mailoutbox
    assert mail.to == ["new@lab.example.org"] and "Verify your e-mail address" in mail.subject
    assert client.get("/api/v1/me").json()["email_verified"] is False
    path = "/" + _link(mail)
    # Opening the link (a mail scanner would) verifies nothing: it asks for a confirmation.
    assert "Verify new@lab.example.org" in client.get(path).content.decode()
    assert not VerifiedEmail.objects.exists()
    page = client.post(path, follow=True).content.decode()
    assert "new@lab.example.org is verified." in page and "not verified" not in page
    assert client.get("/api/v1/me").json() | {"teams": []} == {"username": "newcomer", "teams": [],
                                                               "email": "new@lab.example.org",
                                                               "email_verified": True}
    # A new address is not verified until its own link is opened; the old link no longer applies.
    client.post("/accounts/email/", {"email": "other@lab.example.org"})
    assert len(mailoutbox) == 2 and mailoutbox[1].to == ["other@lab.example.org"]
    assert client.get("/api/v1/me").json()["email_verified"] is False
    stale = client.post(path)
    assert stale.status_code == 400 and "address changed since" in stale.content.decode()


def test_a_link_that_is_damaged_expired_or_for_a_taken_address_says_why(client, owner, outsider, settings,
                                                                        mailoutbox, monkeypatch):
    owner.email = "shared@example.org"
    owner.save()
    token = emails.verification_token(owner, owner.email)
    bad = client.get(f"/accounts/email/verify/{token[:-3]}xyz/")
    assert bad.status_code == 400 and "damaged" in bad.content.decode()
    monkeypatch.setattr(signing, "time", type("T", (), {"time": staticmethod(
        lambda: __import__("time").time() + timedelta(hours=settings.EMAIL_VERIFY_MAX_AGE_HOURS + 1)
        .total_seconds())}))
    expired = client.get(f"/accounts/email/verify/{token}/")
    assert expired.status_code == 400 and f"older than {settings.EMAIL_VERIFY_MAX_AGE_HOURS} hours" in \
        expired.content.decode()
    monkeypatch.undo()
    emails.do_mark_verified(outsider, "shared@example.org")
    taken = client.post(f"/accounts/email/verify/{token}/")
    assert taken.status_code == 400 and "verified for another account" in taken.content.decode()
    assert not emails.is_verified(owner)


def test_the_link_is_mailed_again_at_most_once_a_minute(client, owner, mailoutbox):
    owner.email = "alice@example.org"
    owner.save()
    client.force_login(owner)
    page = client.post("/accounts/email/", {"action": "resend"}, follow=True).content.decode()
    assert "We mailed a link to alice@example.org" in page and len(mailoutbox) == 1
    page = client.post("/accounts/email/", {"action": "resend"}, follow=True).content.decode()
    assert "less than 60 seconds ago" in page and len(mailoutbox) == 1


@pytest.mark.parametrize("verified", [False, True])
def test_issue_token_creates_a_user_as_before_and_can_vouch_for_an_address(db, capsys, verified):
    from django.contrib.auth.models import User

    from leaderboard.accounts.services import authenticate_key

    options = {"email": "bot@lab.example.org", "email_verified": True} if verified else {}
    call_command("issue_token", "scripted", create_user=True, **options)
    user = authenticate_key(capsys.readouterr().out.strip())
    assert user == User.objects.get(username="scripted") and not user.has_usable_password()
    assert user.teams.get().is_personal
    assert emails.is_verified(user) is verified
