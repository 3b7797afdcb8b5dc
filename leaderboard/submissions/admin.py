from django.contrib import admin

from leaderboard.submissions.models import Method, Result, Submission


@admin.register(Method)
class MethodAdmin(admin.ModelAdmin):
    list_display = ("name", "team", "uses_extra_data", "created_at")


class ResultInline(admin.StackedInline):
    model = Result
    extra = 0
    readonly_fields = [f.name for f in Result._meta.fields]


@admin.register(Submission)
class SubmissionAdmin(admin.ModelAdmin):
    list_display = ("id", "method", "split", "team", "status", "failure_kind", "is_published", "created_at")
    list_filter = ("status", "split", "is_published", "is_hidden")
    # Status changes go through services.do_transition, never through this form.
    readonly_fields = ("status", "failure_kind", "status_detail", "progress", "attempt", "file_key",
                       "predictions_sha256", "labels", "queued_at", "started_at", "finished_at")
    inlines = [ResultInline]
