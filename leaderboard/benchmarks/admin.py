from django.contrib import admin

from leaderboard.benchmarks.models import Benchmark, LabelSet, Split


class SplitInline(admin.TabularInline):
    model = Split
    extra = 0


@admin.register(Benchmark)
class BenchmarkAdmin(admin.ModelAdmin):
    list_display = ("track", "title", "is_active", "order")
    inlines = [SplitInline]


@admin.register(LabelSet)
class LabelSetAdmin(admin.ModelAdmin):
    list_display = ("split", "sha256", "is_active", "loaded_at", "loaded_by")
    # The manifest is public; the labels themselves never reach the database.
    readonly_fields = ("split", "sha256", "storage_key", "manifest", "loaded_at", "loaded_by")
