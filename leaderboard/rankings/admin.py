from django.contrib import admin

from leaderboard.rankings.models import LeaderboardEntry


@admin.register(LeaderboardEntry)
class LeaderboardEntryAdmin(admin.ModelAdmin):
    list_display = ("name", "split", "primary_score", "is_paper", "scorer_version", "published_at")
    list_filter = ("split", "is_paper")
