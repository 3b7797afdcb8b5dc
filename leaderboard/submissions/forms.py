from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django import forms
from django.forms.models import model_to_dict

from leaderboard.benchmarks.models import Benchmark, Split
from leaderboard.benchmarks.phases import LABELS_PENDING, NOT_OPEN
from leaderboard.lib.method_fields import MAX_TEXT, MethodField
from leaderboard.submissions import methods
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


def _form_field(benchmark: Benchmark, field: MethodField) -> forms.Field:
    """The form's field for one method field of ``benchmark`` (never required here: publishing is
    what needs a required one answered, as it needs the description)."""
    label = f"{field.label} ({benchmark.title})"
    help_text = field.help + (" Needed before publishing on this benchmark." if field.required else "")
    if field.type == "choice":
        return forms.ChoiceField(label=label, required=False, help_text=help_text,
                                 choices=[("", "Not answered"), *((c, c) for c in field.choices)])
    if field.type == "bool":
        return forms.NullBooleanField(label=label, required=False, help_text=help_text, widget=forms.RadioSelect(
            choices=[("", "Not answered"), ("true", "Yes"), ("false", "No")]))
    if field.type == "number":
        return forms.FloatField(label=label, required=False, help_text=help_text)
    if field.type == "url":
        return forms.URLField(label=label, required=False, help_text=help_text, assume_scheme="https",
                              max_length=MAX_TEXT)
    return forms.CharField(label=label, required=False, help_text=help_text, max_length=MAX_TEXT)


def _key(track: str, name: str) -> str:
    return f"field__{track}__{name}"


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

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        """The method's details, and a field for each method field of every benchmark it entered
        (``field__<track>__<name>``), showing its answer."""
        super().__init__(*args, **kwargs)
        self.method_fields: list[tuple[Benchmark, MethodField]] = []
        if self.instance.pk is None:
            return
        for benchmark, fields in methods.field_sets(self.instance):
            given = methods.answers(self.instance, benchmark)
            for field in fields:
                key = _key(benchmark.track, field.name)
                self.fields[key] = _form_field(benchmark, field)
                self.initial[key] = given.get(field.name)
                self.method_fields.append((benchmark, field))

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        for benchmark, field in self.method_fields:
            key = _key(benchmark.track, field.name)
            if key in cleaned:
                try:
                    cleaned[key] = field.clean(cleaned[key])
                except ValueError as exc:
                    self.add_error(key, str(exc))
        return cleaned

    def save(self, commit: bool = True) -> Method:
        changes: dict[str, dict[str, Any]] = {}
        for benchmark, field in self.method_fields:
            changes.setdefault(benchmark.track, {})[field.name] = self.cleaned_data.get(
                _key(benchmark.track, field.name))
        methods.do_set_answers(self.instance, changes)
        return super().save(commit)

    @classmethod
    def from_partial(cls, method: Method, data: dict[str, Any]) -> MethodForm:
        """A form that changes only the fields present in ``data`` (API PATCH); ``data["fields"]``:
        answers by track (``{"mmscan-vg": {"input": "points"}}``), checked by ``methods.parse_changes``
        (``ValueError``)."""
        merged = {k: v for k, v in model_to_dict(method, fields=cls.Meta.fields).items() if v is not None}
        for name, value in data.items():
            if name in cls.Meta.fields:
                merged[name] = "" if value is None else value
        for benchmark, fields in methods.field_sets(method):
            given = methods.answers(method, benchmark)
            for field in fields:
                merged[_key(benchmark.track, field.name)] = _as_form_value(given.get(field.name))
        for track, values in methods.parse_changes(method, data.get("fields", {})).items():
            for name, value in values.items():
                merged[_key(track, name)] = _as_form_value(value)
        return cls(merged, instance=method)


def _as_form_value(value: Any) -> str:
    """A stored answer as a form sends it."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
