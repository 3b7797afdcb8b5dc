from typing import Any

from django.contrib import admin

from leaderboard.moderation.admin_audit import AuditedAdmin
from leaderboard.submissions.models import (
    Method,
    QuotaOverride,
    RefusedUpload,
    Result,
    SplitLimit,
    Submission,
    Upload,
)


@admin.register(Method)
class MethodAdmin(AuditedAdmin):
    list_display = ("name", "team", "uses_extra_data", "created_at")


class ResultInline(admin.StackedInline):
    model = Result
    extra = 0
    readonly_fields = [f.name for f in Result._meta.fields]


@admin.register(Submission)
class SubmissionAdmin(AuditedAdmin):
    list_display = ("id", "method", "split", "team", "status", "failure_kind", "quota", "is_published",
                    "created_at")
    list_filter = ("status", "split", "is_published", "is_hidden")
    # Status changes go through lifecycle.do_transition, never through this form; publishing goes through
    # check_publish (the team) or the desk's audited publish-for-team (a locked final selection), never here.
    readonly_fields = ("status", "failure_kind", "quota", "status_detail", "progress", "attempt", "file_key",
                       "predictions_sha256", "labels", "queued_at", "started_at", "finished_at", "is_published")
    inlines = [ResultInline]

    def get_readonly_fields(self, request: Any, obj: Submission | None = None) -> Any:
        # A published submission is its method's row on its split: moving it to another method, split or
        # team would move the row past the rules (and the selection lock).
        if obj is not None and obj.is_published:
            return (*self.readonly_fields, "team", "method", "split")
        return self.readonly_fields

    def get_deleted_objects(self, objs: Any, request: Any) -> Any:
        """A submission shown by a board row cannot be deleted under it (the row's submission is RESTRICT):
        the page lists the row and says how to take it off the board first."""
        deleted, counts, perms_needed, protected = super().get_deleted_objects(objs, request)
        from leaderboard.rankings.models import LeaderboardEntry

        for row in LeaderboardEntry.objects.filter(submission__in=list(objs)).select_related("submission", "split"):
            protected.append(f"Submission #{row.submission_id} is the published row of {row.name} on {row.split}: "
                             "withdraw it on the moderation desk with a reason (for the team, once its selection "
                             "is locked), or hide or disqualify it there; then it can be deleted.")
        return deleted, counts, perms_needed, protected


@admin.register(QuotaOverride)
class QuotaOverrideAdmin(admin.ModelAdmin):
    """Maintainers raise or lower a team's quota here (empty fields keep the defaults)."""

    list_display = ("team", "split", "per_day", "total", "in_flight", "rejected_per_day", "min_interval", "note",
                    "updated_at")
    autocomplete_fields = ["team"]


@admin.register(SplitLimit)
class SplitLimitAdmin(admin.ModelAdmin):
    """A split's own limits, per team or per user (over all the user's teams); empty fields keep the defaults."""

    list_display = ("split", "scope", "per_day", "total", "in_flight", "min_interval")
    list_filter = ("scope", "split__benchmark")


@admin.register(Upload)
class UploadAdmin(admin.ModelAdmin):
    list_display = ("submission", "declared_size", "part_count", "created_at", "expires_at", "completed_at",
                    "aborted_at")
    readonly_fields = [f.name for f in Upload._meta.fields]


@admin.register(RefusedUpload)
class RefusedUploadAdmin(admin.ModelAdmin):
    """Files refused by their name or size before they were stored (they count against the rejection cap)."""

    list_display = ("created_at", "split", "team", "created_by", "method_name", "file_name", "file_size")
    list_filter = ("split__benchmark",)
    readonly_fields = [f.name for f in RefusedUpload._meta.fields]
