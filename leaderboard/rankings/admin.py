from typing import Any

from django.contrib import admin, messages

from leaderboard.lib.pagecache import bump
from leaderboard.moderation.admin_audit import AuditedAdmin
from leaderboard.rankings.models import LeaderboardEntry, PairedTest

# What a row shows of a team's selection: written only by rankings.services.refresh_entry, from the
# published submission (the team's publish, or the desk's audited publish and withdraw for the team).
SELECTION_FIELDS = ("method", "submission", "result", "state")


@admin.register(LeaderboardEntry)
class LeaderboardEntryAdmin(AuditedAdmin):
    """Paper rows are edited here (audited); a scored row is read-only: it is its published submission's
    result, and which submission it shows changes only through the rules (publish, withdraw, hide,
    disqualify on the desk, each with its reason)."""

    list_display = ("name", "split", "primary_score", "is_paper", "state", "scorer_version", "published_at")
    list_filter = ("split", "is_paper", "state")

    def get_readonly_fields(self, request: Any, obj: LeaderboardEntry | None = None) -> Any:
        if obj is not None and not obj.is_paper:
            return [f.name for f in LeaderboardEntry._meta.fields]
        return SELECTION_FIELDS

    def change_view(self, request: Any, object_id: str, form_url: str = "", extra_context: Any = None) -> Any:
        row = LeaderboardEntry.objects.filter(pk=object_id, is_paper=False).first() if object_id.isdigit() else None
        if row is not None and request.method == "GET":
            messages.info(request, "A scored row shows its method's published submission and is rewritten from its "
                                   "result: it cannot be edited here. The team publishes or withdraws its "
                                   "submissions; once the selection is locked a maintainer does it for the team on "
                                   "the moderation desk, with a reason (hide and disqualify are there too).")
        return super().change_view(request, object_id, form_url, extra_context)

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
