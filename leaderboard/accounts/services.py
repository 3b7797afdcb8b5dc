"""Teams and API tokens: every write to them goes through here."""

from __future__ import annotations

import hashlib
import hmac
import secrets
from datetime import datetime, timedelta

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.utils import timezone
from django.utils.text import slugify

from leaderboard.accounts.models import ApiToken, Membership, Team

LAST_USED_PRECISION = timedelta(minutes=1)


class TokenError(Exception):
    """Why a presented token was refused; the text is returned with the 401."""


def personal_team(user: AbstractBaseUser) -> Team:
    """The user's personal team, created on first use."""
    team = Team.objects.filter(is_personal=True, membership__user=user).first()
    if team:
        return team
    with transaction.atomic():
        base = slugify(user.get_username()) or "user"
        slug, n = base, 1
        while Team.objects.filter(slug=slug).exists():
            n += 1
            slug = f"{base}-{n}"
        team = Team.objects.create(name=slug, slug=slug, is_personal=True)
        Membership.objects.create(team=team, user=user, role=Membership.Role.OWNER)
    return team


def _hash(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def do_create_token(user: AbstractBaseUser, name: str = "", expires_at: datetime | None = None) -> str:
    """Create a token and return its key; the key is shown once and never stored."""
    prefix = secrets.token_hex(6)
    key = f"lb_{prefix}_{secrets.token_urlsafe(32)}"
    ApiToken.objects.create(user=user, name=name, prefix=prefix, key_hash=_hash(key), expires_at=expires_at)
    return key


def do_revoke_token(token: ApiToken) -> None:
    if token.revoked_at is None:
        token.revoked_at = timezone.now()
        token.save(update_fields=["revoked_at"])


def authenticate_key(key: str) -> AbstractBaseUser:
    """The user a token key belongs to; ``TokenError`` says why not."""
    parts = key.split("_")
    if len(parts) < 3 or parts[0] != "lb":
        raise TokenError("Malformed API token.")
    token = ApiToken.objects.select_related("user").filter(prefix=parts[1]).first()
    if token is None or not hmac.compare_digest(token.key_hash, _hash(key)):
        raise TokenError("Invalid API token.")
    if token.revoked_at is not None:
        raise TokenError("This API token has been revoked.")
    if token.is_expired:
        raise TokenError("This API token has expired.")
    if not token.user.is_active:
        raise TokenError("The account of this API token is disabled.")
    # A write per request would make every API call take the database's write
    # lock (SQLite has one for the whole file); a minute's precision is enough.
    now = timezone.now()
    if token.last_used_at is None or now - token.last_used_at > LAST_USED_PRECISION:
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
    return token.user


class TeamError(Exception):
    """Why a change to a team was refused; shown to the user."""


def is_team_owner(user: AbstractBaseUser, team: Team) -> bool:
    return Membership.objects.filter(team=team, user=user, role=Membership.Role.OWNER).exists()


def do_create_team(user: AbstractBaseUser, name: str) -> Team:
    """A new team (lab) owned by ``user``."""
    name = name.strip()
    slug = slugify(name)
    if not slug:
        raise TeamError("Expected a team name with letters or digits.")
    if Team.objects.filter(name__iexact=name).exists() or Team.objects.filter(slug=slug).exists():
        raise TeamError(f"A team called {name!r} exists already.")
    with transaction.atomic():
        team = Team.objects.create(name=name, slug=slug)
        Membership.objects.create(team=team, user=user, role=Membership.Role.OWNER)
    return team


def check_add_member(by: AbstractBaseUser, team: Team, user: AbstractBaseUser,
                     role: str = Membership.Role.MEMBER) -> Membership:
    if team.is_personal:
        raise TeamError("A personal team has one member; create a team for your lab instead.")
    if not is_team_owner(by, team):
        raise TeamError("Only the team's owners can add members.")
    membership, created = Membership.objects.get_or_create(team=team, user=user, defaults={"role": role})
    if not created:
        raise TeamError(f"{user.get_username()} is in {team.name} already.")
    return membership


def check_remove_member(by: AbstractBaseUser, team: Team, user: AbstractBaseUser) -> None:
    """Remove ``user`` (owners remove anyone, members themselves); a team keeps at least one owner."""
    if team.is_personal:
        raise TeamError("Nobody leaves a personal team.")
    if by.pk != user.pk and not is_team_owner(by, team):
        raise TeamError("Only the team's owners can remove other members.")
    with transaction.atomic():
        owners = list(Membership.objects.select_for_update().filter(team=team, role=Membership.Role.OWNER)
                      .values_list("user_id", flat=True))
        if owners == [user.pk]:
            raise TeamError("The last owner cannot leave; make someone else an owner first.")
        Membership.objects.filter(team=team, user=user).delete()
