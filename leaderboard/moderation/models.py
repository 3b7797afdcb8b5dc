from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import models


class AuditEntry(models.Model):
    """One maintainer action (or a team's publishing anonymously and its reveal): who, when,
    what, on which object, and why.

    Append-only: a saved entry cannot be changed or deleted through the ORM.
    Targets are kept as ids and a readable label, so the record outlives them.
    """

    class Action(models.TextChoices):
        VERIFY = "verify"
        UNVERIFY = "unverify"
        HIDE = "hide"
        UNHIDE = "unhide"
        FLAG = "flag"
        UNFLAG = "unflag"
        DISQUALIFY = "disqualify"
        REQUALIFY = "requalify"
        RESCORE = "rescore"
        RESCORE_ALL = "rescore_all"
        CANCEL = "cancel"
        PAUSE = "pause"
        RESUME = "resume"
        SET_VISIBLE_AFTER = "set_visible_after"
        SET_LABELS_PUBLIC = "set_labels_public"
        # A split's challenge: its schedule, and reopening it after the deadline (or closing it
        # again: ``details.reopened`` says which).
        SET_PHASES = "set_phases"
        REOPEN = "reopen"
        # Two acts share the word, told apart by the target: a maintainer revealing a split's full
        # board (the target is the split), and a member revealing an anonymous method's team.
        REVEAL = "reveal"
        # A team's own act on anonymity (its actor is a member, not a maintainer).
        ANONYMIZE = "anonymize"
        # A maintainer changing a team's locked final selection on its behalf (``details.was_published``).
        PUBLISH_FOR_TEAM = "publish_for_team"
        WITHDRAW_FOR_TEAM = "withdraw_for_team"
        # A superuser deleting or editing, in /admin/, what the public pages show (``admin_audit``).
        ADMIN_DELETE = "admin_delete"
        ADMIN_CHANGE = "admin_change"
        # ``manage.py load_benchmark``: a bundle creating or changing a benchmark (``details.changes``).
        LOAD_BENCHMARK = "load_benchmark"
        # A maintainer taking the finals' export of a phase (every selected submission's file and results).
        EXPORT_FINALS = "export_finals"
        # Who takes part (``participation_actions``): a request approved or denied, an invitation, a
        # ban (``track`` empty: every benchmark, by staff) and its lifting, the participants' list
        # downloaded, an announcement, the webhook's secret replaced.
        APPROVE = "approve"
        DENY = "deny"
        INVITE = "invite"
        BAN = "ban"
        UNBAN = "unban"
        EXPORT_PARTICIPANTS = "export_participants"
        ANNOUNCE = "announce"
        WEBHOOK_SECRET = "webhook_secret"

    actor = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, related_name="+")
    actor_name = models.CharField(max_length=150)
    action = models.CharField(max_length=20, choices=Action.choices)
    track = models.CharField(max_length=40)
    split = models.CharField(max_length=40, blank=True)
    submission_id = models.BigIntegerField(null=True, blank=True)
    target = models.CharField(max_length=300)
    reason = models.TextField(blank=True)
    details = models.JSONField(default=dict)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.created_at:%Y-%m-%d %H:%M} {self.actor_name} {self.action} {self.target}"

    def save(self, *args: Any, **kwargs: Any) -> None:
        if self.pk is not None:
            raise PermissionError("Audit entries are append-only.")
        super().save(*args, **kwargs)

    def delete(self, *args: Any, **kwargs: Any) -> Any:
        raise PermissionError("Audit entries are append-only.")
