"""Who may take part in a benchmark, and how its host reaches them.

``Rules`` come from the ``participation`` section of the benchmark's bundle; a
benchmark without one takes submissions from anyone signed in, as before.
``Terms`` keeps every version of its terms of use (the version is the text's
sha256); a ``Participant`` records what one user accepted, when, and the
maintainers' decision on their request. ``Ban`` refuses a user's uploads and
hides their rows, on one benchmark or (benchmark empty) everywhere.
``Announcement`` is a banner on the benchmark's pages for a set time, mailed to
its participants when asked; ``Webhook`` and ``WebhookDelivery`` tell the host's
own service of announcements, phase changes and new rows.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone

from leaderboard.benchmarks.models import Benchmark


class Registration(models.TextChoices):
    OPEN = "open", "open: accepting the terms is enough"
    APPROVAL = "approval", "approval: the maintainers approve each request"
    INVITE = "invite", "invite: invited users only"


class Terms(models.Model):
    """One version of a benchmark's terms of use (Markdown), identified by the sha256 of its text."""

    benchmark = models.ForeignKey(Benchmark, on_delete=models.CASCADE, related_name="terms_versions")
    version = models.CharField(max_length=64)
    text = models.TextField()
    file_name = models.CharField(max_length=200, blank=True)
    loaded_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-loaded_at"]
        constraints = [models.UniqueConstraint(fields=["benchmark", "version"], name="one_terms_per_version")]

    def __str__(self) -> str:
        return f"terms of {self.benchmark.track} {self.version[:12]}"


class Rules(models.Model):
    """A benchmark's ``participation`` section: its terms, its registration, the addresses it accepts."""

    benchmark = models.OneToOneField(Benchmark, on_delete=models.CASCADE, related_name="participation_rules")
    terms = models.ForeignKey(Terms, on_delete=models.PROTECT, null=True, blank=True, related_name="+")
    registration = models.CharField(max_length=10, choices=Registration.choices, default=Registration.OPEN)
    verified_email = models.BooleanField(default=False)
    # Domains, lower-case; each also covers its subdomains ("ethz.ch" covers "inf.ethz.ch").
    allow_domains = models.JSONField(default=list, blank=True)
    block_domains = models.JSONField(default=list, blank=True)
    # Usernames or e-mail addresses (lower-case) the bundle invites (registration: invite) or bans.
    invited = models.JSONField(default=list, blank=True)
    banned = models.JSONField(default=list, blank=True)

    class Meta:
        verbose_name_plural = "rules"

    def __str__(self) -> str:
        return f"participation in {self.benchmark.track}"


class Participant(models.Model):
    """One user's part in one benchmark: the terms they accepted, and the maintainers' decision.

    ``state``: "" (nothing asked or decided), ``pending`` (asked to join under approval),
    ``approved`` (by a maintainer, or invited), ``denied`` (with ``reason``).
    """

    class State(models.TextChoices):
        NONE = "", "no request"
        PENDING = "pending"
        APPROVED = "approved"
        DENIED = "denied"

    benchmark = models.ForeignKey(Benchmark, on_delete=models.CASCADE, related_name="participants")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="participations")
    terms_version = models.CharField(max_length=64, blank=True)
    terms_accepted_at = models.DateTimeField(null=True, blank=True)
    state = models.CharField(max_length=10, choices=State.choices, default=State.NONE, blank=True)
    invited = models.BooleanField(default=False)
    requested_at = models.DateTimeField(null=True, blank=True)
    decided_at = models.DateTimeField(null=True, blank=True)
    decided_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True,
                                   related_name="+")
    reason = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["benchmark", "user"], name="one_participant_per_benchmark")]
        indexes = [models.Index(fields=["benchmark", "state"])]

    def __str__(self) -> str:
        return f"{self.user} in {self.benchmark.track}"


class Ban(models.Model):
    """A user refused: their uploads are refused and their rows hidden, on ``benchmark`` or (empty)
    everywhere. Lifted, it stays as a record."""

    benchmark = models.ForeignKey(Benchmark, on_delete=models.CASCADE, null=True, blank=True, related_name="bans")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="bans")
    reason = models.TextField()
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True,
                                   related_name="+")
    created_at = models.DateTimeField(default=timezone.now)
    lifted_at = models.DateTimeField(null=True, blank=True)
    lifted_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True,
                                  related_name="+")
    lift_reason = models.TextField(blank=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(fields=["benchmark", "user"], condition=models.Q(lifted_at__isnull=True),
                                    name="one_active_ban_per_benchmark"),
            models.UniqueConstraint(fields=["user"], condition=models.Q(lifted_at__isnull=True,
                                                                        benchmark__isnull=True),
                                    name="one_active_site_ban"),
        ]

    def __str__(self) -> str:
        return f"{self.user} banned from {self.benchmark.track if self.benchmark else 'every benchmark'}"


class Announcement(models.Model):
    """A message to a benchmark's participants: a banner on its pages from ``shows_from`` to
    ``shows_until``, mailed to them when ``email`` (``mailed_through``: the last user id mailed, so a
    mailing that stopped resumes where it stopped; ``mailed_at``: when it was done)."""

    benchmark = models.ForeignKey(Benchmark, on_delete=models.CASCADE, related_name="announcements")
    key = models.SlugField(max_length=60, blank=True, help_text="The bundle's key of it; empty from the desk.")
    title = models.CharField(max_length=200)
    body = models.TextField()
    shows_from = models.DateTimeField(default=timezone.now)
    shows_until = models.DateTimeField()
    email = models.BooleanField(default=False)
    mailed_through = models.BigIntegerField(default=0)
    mailed_count = models.PositiveIntegerField(default=0)
    mailed_at = models.DateTimeField(null=True, blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True,
                                   related_name="+")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-shows_from", "-id"]
        constraints = [models.UniqueConstraint(fields=["benchmark", "key"], condition=~models.Q(key=""),
                                               name="one_announcement_per_key")]

    def __str__(self) -> str:
        return f"{self.benchmark.track}: {self.title}"


class Webhook(models.Model):
    """Where a benchmark's events go (its bundle's ``webhook.url``), signed with ``secret``.

    ``phases_seen``: the phase each split was last seen in (split id -> phase), so that a change
    is sent once."""

    benchmark = models.OneToOneField(Benchmark, on_delete=models.CASCADE, related_name="webhook")
    url = models.URLField(max_length=500)
    secret = models.CharField(max_length=100)
    phases_seen = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        return f"webhook of {self.benchmark.track}"


class WebhookDelivery(models.Model):
    """One event for a webhook and its attempts; ``next_try_at`` empty: delivered or given up."""

    webhook = models.ForeignKey(Webhook, on_delete=models.CASCADE, related_name="deliveries")
    event = models.CharField(max_length=40)
    payload = models.JSONField()
    created_at = models.DateTimeField(default=timezone.now)
    attempts = models.PositiveSmallIntegerField(default=0)
    next_try_at = models.DateTimeField(null=True, blank=True, default=timezone.now)
    delivered_at = models.DateTimeField(null=True, blank=True)
    last_status = models.PositiveSmallIntegerField(null=True, blank=True)
    last_error = models.CharField(max_length=300, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["next_try_at"])]

    def __str__(self) -> str:
        return f"{self.event} #{self.pk} to {self.webhook}"
