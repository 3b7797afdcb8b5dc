"""Verified e-mail addresses, with Django's own signing (no stored token).

A link mailed to the address carries ``signing.dumps({"u": user id, "e": address})``
(salted, timestamped); opening it within ``EMAIL_VERIFY_MAX_AGE_HOURS`` and
confirming records the address as verified (``VerifiedEmail``), provided it is
still the account's address and no other account verified it. A link is mailed
at sign-up, when the address changes, and on request, at most once per
``EMAIL_VERIFY_RESEND_SECONDS`` per user and address (counted in the cache; unlimited when
the cache is down, as the sign-in throttle). Mail goes through ``EMAIL_BACKEND``
(the console by default; a file folder or SMTP from the environment).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.core import signing
from django.core.cache import caches
from django.core.mail import send_mail
from django.db import IntegrityError, transaction
from django.template.loader import render_to_string
from django.urls import reverse

from leaderboard.accounts.models import VerifiedEmail
from leaderboard.lib.pagecache import CACHE_ALIAS, CacheErrors

log = logging.getLogger(__name__)

_SALT = "leaderboard.verify-email"


class EmailError(Exception):
    """Why an address cannot be verified or a link not sent; the text is shown to the user."""


def normalized(email: str) -> str:
    return (email or "").strip().lower()


def is_verified(user: AbstractBaseUser) -> bool:
    """Whether the account's current address is one it verified."""
    email = normalized(getattr(user, "email", ""))
    return bool(email) and VerifiedEmail.objects.filter(user=user, email=email).exists()


def verification_token(user: AbstractBaseUser, email: str) -> str:
    return signing.dumps({"u": user.pk, "e": normalized(email)}, salt=_SALT, compress=True)


def verify_url(user: AbstractBaseUser, email: str, base_url: str = "") -> str:
    return (base_url or settings.SITE_URL).rstrip("/") + reverse("accounts:verify_email",
                                                                 args=[verification_token(user, email)])


def do_send_verification(user: AbstractBaseUser, base_url: str = "") -> str:
    """Mail a verification link to the account's address; returns the address. ``EmailError`` if there
    is none, it is verified already, or a link went to it less than ``EMAIL_VERIFY_RESEND_SECONDS`` ago."""
    email = normalized(user.email)
    if not email:
        raise EmailError("Your account has no e-mail address: add one first.")
    if is_verified(user):
        raise EmailError(f"{email} is verified already.")
    wait = int(settings.EMAIL_VERIFY_RESEND_SECONDS)
    if wait > 0:
        try:
            if not caches[CACHE_ALIAS].add(f"verify-email:{user.pk}:{email}", 1, timeout=wait):
                raise EmailError(f"A link was mailed less than {wait} seconds ago; check your mail (and its spam "
                                 f"folder), or ask again in a minute.")
        except CacheErrors as exc:
            log.warning("The resend limit of verification links is unavailable: %s", exc)
    context = {"SITE_NAME": settings.SITE_NAME, "user": user, "email": email,
               "url": verify_url(user, email, base_url), "hours": settings.EMAIL_VERIFY_MAX_AGE_HOURS}
    subject = render_to_string("emails/verify_email_subject.txt", context).strip()
    send_mail(subject, render_to_string("emails/verify_email.txt", context), settings.DEFAULT_FROM_EMAIL, [email])
    return email


@dataclass(frozen=True)
class Verification:
    user: AbstractBaseUser
    email: str


def read_token(token: str) -> Verification:
    """The account and address a link names, or ``EmailError`` saying why it cannot verify (expired,
    damaged, the account's address changed since)."""
    try:
        data = signing.loads(token, salt=_SALT, max_age=int(settings.EMAIL_VERIFY_MAX_AGE_HOURS) * 3600)
    except signing.SignatureExpired:
        raise EmailError(f"This link is older than {settings.EMAIL_VERIFY_MAX_AGE_HOURS} hours; sign in and ask "
                         "for a new one on your e-mail page.") from None
    except signing.BadSignature:
        raise EmailError("This link is damaged or not one of ours; copy the whole link from the mail, or ask for "
                         "a new one on your e-mail page.") from None
    user = get_user_model().objects.filter(pk=data.get("u")).first()
    if user is None:
        raise EmailError("The account of this link no longer exists.")
    if normalized(user.email) != data.get("e"):
        raise EmailError(f"The account's address changed since this link was mailed to {data.get('e')}; open "
                         "the link mailed to the new address.")
    return Verification(user, data["e"])


def do_verify(token: str) -> Verification:
    """Record the address of a link as verified (idempotent); ``EmailError`` when it cannot be."""
    found = read_token(token)
    try:
        with transaction.atomic():
            VerifiedEmail.objects.get_or_create(email=found.email, defaults={"user": found.user})
    except IntegrityError:
        pass
    if not VerifiedEmail.objects.filter(email=found.email, user=found.user).exists():
        raise EmailError(f"{found.email} is verified for another account already; an address verifies one "
                         "account only.")
    return found


def do_change_email(user: AbstractBaseUser, email: str, base_url: str = "") -> bool:
    """Set the account's address; mail a link unless it is verified for this account already. True if mailed."""
    email = normalized(email)
    if VerifiedEmail.objects.filter(email=email).exclude(user=user).exists():
        raise EmailError(f"{email} is verified for another account; an address verifies one account only.")
    user.email = email
    user.save(update_fields=["email"])
    if not email or is_verified(user):
        return False
    do_send_verification(user, base_url)
    return True


def do_mark_verified(user: AbstractBaseUser, email: str) -> None:
    """Set and record the account's address as verified without a link (``manage.py issue_token``)."""
    email = normalized(email)
    if VerifiedEmail.objects.filter(email=email).exclude(user=user).exists():
        raise EmailError(f"{email} is verified for another account.")
    user.email = email
    user.save(update_fields=["email"])
    VerifiedEmail.objects.get_or_create(email=email, defaults={"user": user})
