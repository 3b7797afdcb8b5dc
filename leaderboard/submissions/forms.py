from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django import forms
from django.forms.models import model_to_dict

from leaderboard.benchmarks.models import Benchmark, Split
from leaderboard.benchmarks.phases import LABELS_PENDING, NOT_OPEN
from leaderboard.submissions.models import Method


class SplitSelect(forms.Select):
    """The splits to choose from; one that is not open yet is listed, disabled, with why (``phases.NOT_OPEN``)."""

    not_open: frozenset[str] = frozenset()

    def create_option(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        option = super().create_option(*args, **kwargs)
        if option["value"] in self.not_open:
            option["attrs"]["disabled"] = True
        return option


class SubmissionForm(forms.Form):
    split = forms.ChoiceField(widget=SplitSelect)
    team = forms.ChoiceField(required=False,
                             help_text="The team whose quota and leaderboard row this counts for.")
    method_name = forms.CharField(max_length=100, label="Method name",
                                  help_text="Submissions of the same method share one leaderboard row.")
    file = forms.FileField(label="Predictions file")

    def __init__(self, benchmark: Benchmark, *args: Any, splits: Iterable[Split] = (), teams: Any = (),
                 max_bytes: int | None = None, **kwargs: Any) -> None:
        """``splits``: those not paused by the maintainers (``selectors.splits_of``); one whose labels are not
        loaded is offered disabled, and refused by the service if sent anyway."""
        super().__init__(*args, **kwargs)
        splits = list(splits)
        pending = {s.name for s in splits if not s.labels_loaded}
        self.fields["split"].choices = [(s.name, f"{s.name} ({NOT_OPEN}: {LABELS_PENDING})" if s.name in pending
                                         else s.name) for s in splits]
        self.fields["split"].widget.not_open = frozenset(pending)
        self.fields["split"].initial = next((s.name for s in splits if s.name not in pending), None)
        self.fields["team"].choices = [(t.slug, t.name + (" (personal)" if t.is_personal else ""))
                                       for t in teams]
        spec = benchmark.spec
        limit = max_bytes or spec.max_upload_bytes
        self.fields["file"].help_text = f"{' or '.join(spec.upload_suffixes)}, at most {limit / 2**20:,.0f} MiB."
        self.fields["file"].widget.attrs["accept"] = ",".join(spec.upload_suffixes)


class MethodForm(forms.ModelForm):
    paper_url = forms.URLField(required=False, assume_scheme="https", label="Paper URL")
    code_url = forms.URLField(required=False, assume_scheme="https", label="Code URL")
    uses_extra_data = forms.NullBooleanField(
        label="Uses extra training data",
        widget=forms.RadioSelect(choices=[("", "Not answered"), ("true", "Yes"), ("false", "No")]),
        help_text="Data beyond the benchmark's official training split (shown on the leaderboard).")

    class Meta:
        model = Method
        fields = ["name", "description", "authors", "paper_url", "code_url", "uses_extra_data", "details"]
        widgets = {"description": forms.Textarea(attrs={"rows": 3}), "details": forms.Textarea(attrs={"rows": 4})}
        help_texts = {"authors": "As they should be credited, comma-separated.",
                      "details": "Backbone, pre-training, ensembles, test-time augmentation, …"}

    @classmethod
    def from_partial(cls, method: Method, data: dict[str, Any]) -> MethodForm:
        """A form that changes only the fields present in ``data`` (API PATCH)."""
        merged = {k: v for k, v in model_to_dict(method, fields=cls.Meta.fields).items() if v is not None}
        for name, value in data.items():
            if name in cls.Meta.fields:
                merged[name] = "" if value is None else value
        return cls(merged, instance=method)
