from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone


class Team(models.Model):
    """A lab or group; owns methods and submissions. Every user has a personal team."""

    name = models.CharField(max_length=100, unique=True)
    slug = models.SlugField(max_length=100, unique=True)
    is_personal = models.BooleanField(default=False)
    members = models.ManyToManyField(settings.AUTH_USER_MODEL, through="Membership", related_name="teams")
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return self.name


class Membership(models.Model):
    class Role(models.TextChoices):
        OWNER = "owner"
        MEMBER = "member"

    team = models.ForeignKey(Team, on_delete=models.CASCADE)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE)
    role = models.CharField(max_length=10, choices=Role.choices, default=Role.MEMBER)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["team", "user"], name="unique_membership")]


class ApiToken(models.Model):
    """A named API token; only a hash of the secret is stored.

    The key handed to the user is ``lb_<prefix>_<secret>``; the prefix finds the
    row, the sha256 of the whole key is compared in constant time.
    """

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100, blank=True)
    prefix = models.CharField(max_length=16, unique=True)
    key_hash = models.CharField(max_length=64)
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    last_used_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"{self.name or 'token'} ({self.prefix})"

    @property
    def is_expired(self) -> bool:
        return self.expires_at is not None and self.expires_at <= timezone.now()


class VerifiedEmail(models.Model):
    """An address its user proved to read: they opened the link mailed to it (``accounts.emails``).

    Stored lower-cased; an address is verified for one account only, so that limits per user are
    as strong as one account per address. A user whose ``email`` is not among theirs here has no
    verified address (changing the address asks for a new link).
    """

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="verified_emails")
    email = models.EmailField(unique=True)
    verified_at = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        return f"{self.email} ({self.user})"
