"""What a superuser changes in ``/admin/`` behind the public pages is audited like the desk's actions.

The admin can delete or edit a board row, a submission, a method, a team, a
benchmark or a split, a labels version: each touches what the public sees,
directly or through what is deleted with it. ``AuditedAdmin`` writes an
``AuditEntry`` (``admin_delete`` or ``admin_change``) for every track the
object touches, in the same transaction as the change, with the object's
label and, for an edit, the names of the fields changed (never their values:
an entry's scores stay where they are). The admin has no reason field; the
entry says it was done in the admin.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db import transaction
from django.db.models import Model

from leaderboard.accounts.models import Team
from leaderboard.benchmarks.models import Benchmark, Split
from leaderboard.moderation.models import AuditEntry
from leaderboard.rankings.models import LeaderboardEntry
from leaderboard.submissions.models import Method, Submission

_TARGET_MAX = 300


def _places(obj: Model) -> list[tuple[str, str]]:
    """The (track, split) pairs whose public pages ``obj`` feeds; ("", "") when none does."""
    if isinstance(obj, Benchmark):
        return [(obj.track, "")]
    if isinstance(obj, (Method, Team)):
        methods = [obj] if isinstance(obj, Method) else list(obj.methods.all())
        places = {(track, split) for method in methods
                  for track, split in LeaderboardEntry.objects.filter(method=method)
                  .values_list("split__benchmark__track", "split__name")}
        places |= {(track, split) for method in methods
                   for track, split in method.submissions.values_list("split__benchmark__track", "split__name")}
        return sorted(places) or [("", "")]
    split = getattr(obj, "split", None)
    if split is not None:  # a board row, a submission, a labels version
        return [(split.benchmark.track, split.name)]
    benchmark = getattr(obj, "benchmark", None)
    if benchmark is not None:  # a split
        return [(benchmark.track, str(getattr(obj, "name", "")))]
    return [("", "")]


def _public_rows(obj: Model) -> int:
    """How many board rows go with ``obj`` when it is deleted (itself, for a row)."""
    if isinstance(obj, LeaderboardEntry):
        return 1
    by = {Method: "method", Team: "method__team", Benchmark: "split__benchmark", Split: "split"}
    for model, field in by.items():
        if isinstance(obj, model):
            return LeaderboardEntry.objects.filter(**{field: obj}).count()
    return 0


def do_audit_admin(user: Any, action: str, obj: Model, **details: Any) -> list[AuditEntry]:
    """Record one admin change of ``obj`` (before a delete: while it still exists), one entry per track."""
    label = f"{obj._meta.verbose_name} #{obj.pk}: {obj}"[:_TARGET_MAX]
    submission_id = obj.pk if isinstance(obj, Submission) else getattr(obj, "submission_id", None)
    details = {"model": obj._meta.label_lower, "pk": obj.pk, "in": "admin", **details}
    if action == AuditEntry.Action.ADMIN_DELETE:
        details["board_rows_deleted"] = _public_rows(obj)
    return [AuditEntry.objects.create(actor=user, actor_name=user.get_username(), action=action, track=track,
                                      split=split, submission_id=submission_id, target=label, details=details)
            for track, split in _places(obj)]


class AuditedAdmin(admin.ModelAdmin):
    """A ModelAdmin whose deletes and edits are audited (``do_audit_admin``), inlines' included."""

    def save_model(self, request: Any, obj: Any, form: Any, change: bool) -> None:
        with transaction.atomic():
            super().save_model(request, obj, form, change)
            if change and form.changed_data:
                do_audit_admin(request.user, AuditEntry.Action.ADMIN_CHANGE, obj, fields=sorted(form.changed_data))

    def delete_model(self, request: Any, obj: Any) -> None:
        with transaction.atomic():
            do_audit_admin(request.user, AuditEntry.Action.ADMIN_DELETE, obj)
            super().delete_model(request, obj)

    def delete_queryset(self, request: Any, queryset: Any) -> None:
        with transaction.atomic():
            for obj in queryset:
                do_audit_admin(request.user, AuditEntry.Action.ADMIN_DELETE, obj)
            super().delete_queryset(request, queryset)

    def save_formset(self, request: Any, form: Any, formset: Any, change: bool) -> None:
        with transaction.atomic():
            for obj in [f.instance for f in formset.deleted_forms if f.instance.pk is not None]:
                do_audit_admin(request.user, AuditEntry.Action.ADMIN_DELETE, obj)
            super().save_formset(request, form, formset, change)
            for obj, fields in formset.changed_objects:
                do_audit_admin(request.user, AuditEntry.Action.ADMIN_CHANGE, obj, fields=sorted(fields))
