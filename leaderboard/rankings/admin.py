from typing import Any

from django.contrib import admin

from leaderboard.lib.pagecache import bump
from leaderboard.moderation.admin_audit import AuditedAdmin
from leaderboard.rankings.models import LeaderboardEntry, PairedTest


@admin.register(LeaderboardEntry)
class LeaderboardEntryAdmin(AuditedAdmin):
    list_display = ("name", "split", "primary_score", "is_paper", "scorer_version", "published_at")
    list_filter = ("split", "is_paper")

    # Rows are otherwise written only by rankings.services, which invalidates cached pages itself.
    def save_model(self, request: Any, obj: LeaderboardEntry, form: Any, change: bool) -> None:
        super().save_model(request, obj, form, change)
        bump(obj.split.benchmark.track)

    def delete_model(self, request: Any, obj: LeaderboardEntry) -> None:
        bump(obj.split.benchmark.track)
        super().delete_model(request, obj)

    def delete_queryset(self, request: Any, queryset: Any) -> None:
        for track in set(queryset.values_list("split__benchmark__track", flat=True)):
            bump(track)
        super().delete_queryset(request, queryset)


@admin.register(PairedTest)
class PairedTestAdmin(admin.ModelAdmin):
    """Read-only: tests are asked and answered by the site and the workers (``rankings.paired_tests``)."""

    list_display = ("result_a", "result_b", "requested_by", "requested_at", "sent_at", "computed_at", "error")

    def has_add_permission(self, request: Any) -> bool:
        return False

    def has_change_permission(self, request: Any, obj: Any = None) -> bool:
        return False
