from __future__ import annotations

from typing import Any

from django import forms
from django.forms.models import model_to_dict

from leaderboard.benchmarks.models import Benchmark
from leaderboard.submissions.models import Method


class SubmissionForm(forms.Form):
    split = forms.ChoiceField()
    team = forms.ChoiceField(required=False,
                             help_text="The team whose quota and leaderboard row this counts for.")
    method_name = forms.CharField(max_length=100, label="Method name",
                                  help_text="Submissions of the same method share one leaderboard row.")
    file = forms.FileField(label="Predictions file")

    def __init__(self, benchmark: Benchmark, *args: Any, teams: Any = (), max_bytes: int | None = None,
                 **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        splits = benchmark.splits.filter(accepting_submissions=True)
        self.fields["split"].choices = [(s.name, s.name) for s in splits]
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
