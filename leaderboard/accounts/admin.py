from django.contrib import admin

from leaderboard.accounts.models import ApiToken, Membership, Team, VerifiedEmail
from leaderboard.moderation.admin_audit import AuditedAdmin


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 0


@admin.register(Team)
class TeamAdmin(AuditedAdmin):
    list_display = ("name", "slug", "is_personal", "created_at")
    search_fields = ("name", "slug")
    inlines = [MembershipInline]


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = ("user", "name", "prefix", "created_at", "expires_at", "revoked_at", "last_used_at")
    readonly_fields = ("prefix", "key_hash")


@admin.register(VerifiedEmail)
class VerifiedEmailAdmin(admin.ModelAdmin):
    list_display = ("email", "user", "verified_at")
    search_fields = ("email", "user__username")
