"""Participation in the admin: to look, not to act. Decisions, bans, announcements and webhook secrets
go through the desk (audited, and a ban there hides the rows at once) or the bundle."""

from typing import Any

from django.contrib import admin

from leaderboard.participation.models import (
    Announcement,
    Ban,
    Participant,
    Rules,
    Terms,
    Webhook,
    WebhookDelivery,
)


class ReadOnly(admin.ModelAdmin):
    def has_add_permission(self, request: Any) -> bool:
        return False

    def has_change_permission(self, request: Any, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: Any, obj: Any = None) -> bool:
        return False


@admin.register(Rules)
class RulesAdmin(ReadOnly):
    list_display = ("benchmark", "registration", "verified_email", "terms")


@admin.register(Terms)
class TermsAdmin(ReadOnly):
    list_display = ("benchmark", "version", "file_name", "loaded_at")


@admin.register(Participant)
class ParticipantAdmin(ReadOnly):
    list_display = ("user", "benchmark", "state", "invited", "terms_version", "terms_accepted_at", "decided_by")
    list_filter = ("benchmark", "state")
    search_fields = ("user__username", "user__email")


@admin.register(Ban)
class BanAdmin(ReadOnly):
    list_display = ("user", "benchmark", "created_at", "created_by", "lifted_at", "reason")
    list_filter = ("benchmark",)


@admin.register(Announcement)
class AnnouncementAdmin(ReadOnly):
    list_display = ("title", "benchmark", "shows_from", "shows_until", "email", "mailed_count", "mailed_at")


@admin.register(Webhook)
class WebhookAdmin(ReadOnly):
    list_display = ("benchmark", "url", "created_at")
    exclude = ("secret",)


@admin.register(WebhookDelivery)
class WebhookDeliveryAdmin(ReadOnly):
    list_display = ("pk", "webhook", "event", "created_at", "attempts", "delivered_at", "last_status", "last_error")
