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
