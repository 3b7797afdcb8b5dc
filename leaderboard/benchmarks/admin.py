from datetime import datetime

from django import forms
from django.contrib import admin

from leaderboard.benchmarks.challenge_plans import archived_refusal
from leaderboard.benchmarks.models import Benchmark, LabelSet, Split
from leaderboard.benchmarks.services import do_note_active_labels
from leaderboard.moderation.admin_audit import AuditedAdmin


class SplitForm(forms.ModelForm):
    """A split's form: an archived challenge's phases do not move (as with a bundle or the desk), and a
    date left as it was keeps its exact value (the widget shows whole seconds)."""

    def clean(self) -> dict:
        cleaned = super().clean()
        if not self.instance.pk:
            return cleaned
        if refusal := archived_refusal(self.instance, set(self.changed_data)):
            raise forms.ValidationError(refusal[0].upper() + refusal[1:] + ".")
        for name, value in cleaned.items():
            if name not in self.changed_data and isinstance(value, datetime):
                cleaned[name] = getattr(self.instance, name)
        return cleaned


class SplitInline(admin.StackedInline):
    """A split and its challenge phases (start, freeze, deadline, reveal); the public subset comes with the
    labels (``manage.py load_labels --partition``)."""

    model = Split
    form = SplitForm
    extra = 0
    fields = (("name", "is_default", "accepting_submissions"), "description",
              ("results_visible_after", "labels_public"),
              ("starts_at", "freeze_at", "deadline"), ("reveal_at_deadline", "revealed_at", "reopened"))


@admin.register(Benchmark)
class BenchmarkAdmin(AuditedAdmin):
    list_display = ("track", "title", "is_active", "order")
    inlines = [SplitInline]


@admin.register(LabelSet)
class LabelSetAdmin(AuditedAdmin):
    list_display = ("split", "sha256", "is_active", "synthetic", "has_partition", "loaded_at", "loaded_by")
    # The manifest is public; the labels themselves (and the public subset's ids) never reach the database.
    readonly_fields = ("split", "sha256", "storage_key", "manifest", "has_partition", "loaded_at", "loaded_by")

    def save_model(self, request, obj, form, change) -> None:
        super().save_model(request, obj, form, change)
        do_note_active_labels(obj.split)  # the split's pages say what its active labels are
