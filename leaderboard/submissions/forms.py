from __future__ import annotations

from django import forms

from leaderboard.benchmarks.models import Benchmark


class SubmissionForm(forms.Form):
    split = forms.ChoiceField()
    method_name = forms.CharField(max_length=100, label="Method name",
                                  help_text="Submissions of the same method share one leaderboard row.")
    file = forms.FileField(label="Predictions file")

    def __init__(self, benchmark: Benchmark, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        splits = benchmark.splits.filter(accepting_submissions=True)
        self.fields["split"].choices = [(s.name, s.name) for s in splits]
        spec = benchmark.spec
        self.fields["file"].help_text = (f"{' or '.join(spec.upload_suffixes)}, at most "
                                         f"{spec.max_upload_bytes / 2**20:,.0f} MiB.")
        self.fields["file"].widget.attrs["accept"] = ",".join(spec.upload_suffixes)
