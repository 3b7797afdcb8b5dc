from __future__ import annotations

from typing import Any

from django.db import models

from leaderboard.benchmarks.models import Split
from leaderboard.submissions.models import Method, Result, Submission


class LeaderboardEntry(models.Model):
    """One precomputed leaderboard row: a method's published result on a split.

    Written only by ``rankings.services`` when a submission is published or its
    result changes, so reading a leaderboard is one indexed query. Rows
    "reported in paper" have no method or submission and carry their citation.
    ``scores`` is flat: ``"<metric>"`` overall, ``"<group>/<metric>"`` per group;
    an undefined value is an absent key (never a JSON null, which SQLite would
    sort as 0).
    """

    split = models.ForeignKey(Split, on_delete=models.CASCADE, related_name="entries")
    method = models.ForeignKey(Method, on_delete=models.CASCADE, null=True, blank=True,
                               related_name="entries")
    submission = models.ForeignKey(Submission, on_delete=models.SET_NULL, null=True, blank=True,
                                   related_name="+")
    result = models.ForeignKey(Result, on_delete=models.SET_NULL, null=True, blank=True, related_name="+")
    name = models.CharField(max_length=200)
    team_name = models.CharField(max_length=100, blank=True)
    is_paper = models.BooleanField(default=False)
    paper_note = models.CharField(max_length=300, blank=True)
    uses_extra_data = models.BooleanField(default=False)
    is_verified = models.BooleanField(default=False)
    primary_score = models.FloatField(null=True)
    scores = models.JSONField(default=dict)
    scorer_version = models.CharField(max_length=40, blank=True)
    published_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["split", "method"], condition=models.Q(method__isnull=False),
                                    name="one_entry_per_method_and_split"),
            models.UniqueConstraint(fields=["split", "name"], condition=models.Q(is_paper=True),
                                    name="one_paper_entry_per_name"),
        ]
        indexes = [models.Index(fields=["split", "-primary_score", "published_at", "id"])]

    def __str__(self) -> str:
        return f"{self.name} on {self.split}"

    def save(self, *args: Any, **kwargs: Any) -> None:
        self.scores = {k: v for k, v in self.scores.items() if v is not None}
        super().save(*args, **kwargs)
