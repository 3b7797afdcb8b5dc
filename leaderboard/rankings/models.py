from __future__ import annotations

import json
import zlib
from collections.abc import Mapping, Sequence
from typing import Any

from django.conf import settings
from django.db import models
from django.utils import timezone

from leaderboard.benchmarks.models import Challenge, Split
from leaderboard.submissions.models import Method, Result, ResultState, Submission

ANONYMOUS_LABEL = "Anonymous (under review)"


def export_columns(spec: Any) -> list[str]:
    """Every metric overall and per group: the score columns of the exports."""
    return list(spec.metrics) + [f"{g}/{m}" for g in spec.groups for m in spec.metrics]


def interval_columns(columns: Sequence[str]) -> list[str]:
    """The CSV columns of the intervals: ``<column>_lo``, ``<column>_hi`` after all the scores."""
    return [f"{c}_{end}" for c in columns for end in ("lo", "hi")]


TAG_LENGTH = 9


def columns_tag(columns: Sequence[str]) -> str:
    """The tag an export text of ``columns`` starts with: a text with another tag is stale
    (written for an older scorer's metrics, or left empty by bulk_create)."""
    # "+ci": texts written before they held the intervals are stale, whatever their columns.
    return f"{zlib.crc32((chr(31).join(columns) + '+ci').encode()):08x}|"


def export_texts(scores: Mapping[str, Any], columns: Sequence[str],
                 intervals: Mapping[str, Any] | None = None) -> tuple[str, str]:
    """The export columns of ``scores`` and their ``intervals`` as JSON members
    (``"scores": {..}, "intervals": {..}``) and as CSV cells (the scores, then
    ``interval_columns``), each prefixed with ``columns_tag(columns)``.

    A row without intervals (reported in a paper, or scored before they
    existed) has an empty ``"intervals"`` object and empty cells: nothing, not 0.
    """
    intervals = intervals or {}
    values = [scores.get(c) for c in columns]
    bounds = [intervals.get(c) for c in columns]
    cells = [("" if v is None else str(v)) for v in values]
    cells += ["" if b is None else str(b[i]) for b in bounds for i in (0, 1)]
    tag = columns_tag(columns)
    members = {"scores": dict(zip(columns, values)),
               "intervals": {c: b for c, b in zip(columns, bounds) if b is not None}}
    return tag + json.dumps(members)[1:-1], tag + ",".join(cells)


class LeaderboardEntry(models.Model):
    """One precomputed leaderboard row: a method's published result on a split.

    Written only by ``rankings.services`` when a submission is published or its
    result changes, so reading a leaderboard is one indexed query. Rows
    "reported in paper" have no method or submission and carry their citation:
    ``paper_note``, ``paper_url``, ``venue`` and, as ``published_at``, the
    paper's publication date (not when the row was loaded), so ties list the
    earlier publication first. ``is_reference``: a paper row that is a point of
    reference, not a contestant (human performance, an oracle, an upper bound):
    listed apart, never ranked, never a chart's best or median. ``protocol``
    names the track's scoring protocol that produced the row (``Track.protocols``;
    empty: scored the way this service scores). An anonymous row
    (``is_anonymous``) has an empty ``team_name``: the copy never holds the team.
    ``scores`` is flat: ``"<metric>"`` overall, ``"<group>/<metric>"`` per group;
    an undefined value is an absent key (never a JSON null, which SQLite would
    sort as 0). ``state``: whether the row's result is current on the split's
    labels (``ResultState``); a row that is not is listed apart, never ranked
    or tested (``selectors.unranked_entries``).

    The submission and result a row shows cannot be deleted under it (RESTRICT:
    a maintainer withdraws, hides or disqualifies the submission first); deleting
    its method or team takes the row with them.
    """

    split = models.ForeignKey(Split, on_delete=models.CASCADE, related_name="entries")
    method = models.ForeignKey(Method, on_delete=models.CASCADE, null=True, blank=True,
                               related_name="entries")
    submission = models.ForeignKey(Submission, on_delete=models.RESTRICT, null=True, blank=True,
                                   related_name="+")
    result = models.ForeignKey(Result, on_delete=models.RESTRICT, null=True, blank=True, related_name="+")
    state = models.CharField(max_length=16, choices=ResultState.choices, default=ResultState.CURRENT, blank=True)
    name = models.CharField(max_length=200)
    team_name = models.CharField(max_length=100, blank=True)
    is_paper = models.BooleanField(default=False)
    is_reference = models.BooleanField(default=False)
    paper_note = models.CharField(max_length=300, blank=True)
    uses_extra_data = models.BooleanField(default=False)
    is_verified = models.BooleanField(default=False)
    is_anonymous = models.BooleanField(default=False)
    paper_url = models.URLField(max_length=300, blank=True)
    venue = models.CharField(max_length=100, blank=True)
    protocol = models.CharField(max_length=40, blank=True)
    # The method's (or the paper row's) answers to the benchmark's method fields: {"<field>": value}.
    fields = models.JSONField(default=dict, blank=True)
    # Sent after the end of the challenge this split was a phase of (``Split.post_challenge_from``):
    # the row is not in the challenge's archived board, and says so.
    after_challenge = models.BooleanField(default=False)
    # Paper rows: the method's own paper (``paper_url``/``venue`` are the source of the numbers):
    # {"authors", "title", "venue", "year", "url"}, or {"none": why it has none}; {} when not given.
    method_paper = models.JSONField(default=dict, blank=True)
    primary_score = models.FloatField(null=True)
    scores = models.JSONField(default=dict)
    # 95 % bootstrap intervals of ``scores`` ({"<key>": [lo, hi]}); empty for paper rows.
    intervals = models.JSONField(default=dict, blank=True)
    scorer_version = models.CharField(max_length=40, blank=True)
    # The export columns of ``scores`` as written into export.json and
    # export.csv, kept with the row: decoding and re-encoding every score of a
    # 5,000-row board was most of an export's time (issue 11).
    export_json = models.TextField(blank=True, editable=False)
    export_csv = models.TextField(blank=True, editable=False)
    # When the result became public: published here, or (paper rows) the paper's publication date.
    published_at = models.DateTimeField(default=timezone.now)
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

    @property
    def method_citation(self) -> str:
        """The method's own paper as cited ("Chen et al., ECCV 2020"); "" when it has none or none is given."""
        paper = self.method_paper or {}
        return f"{paper['authors']}, {paper['venue']} {paper['year']}" if paper.get("authors") else ""

    def save(self, *args: Any, **kwargs: Any) -> None:
        self.scores = {k: v for k, v in self.scores.items() if v is not None}
        self.export_json, self.export_csv = export_texts(self.scores, export_columns(self.split.benchmark.spec),
                                                         self.intervals)
        if kwargs.get("update_fields") is not None and {"scores", "intervals"} & set(kwargs["update_fields"]):
            kwargs["update_fields"] = {*kwargs["update_fields"], "export_json", "export_csv"}
        super().save(*args, **kwargs)


class PairedTest(models.Model):
    """The paired test of two results (a permutation test's p, a bootstrap interval), every score key at once (A - B).

    Asked of a scoring worker (``contracts.PAIRED_TEST``) when a change of the
    split's rows makes the pair neighbours on one of its boards, or when a
    signed-in user compares the two (``rankings.paired_tests``); only
    aggregates come back: ``findings`` maps each score key ("EM", "What/EM")
    to ``contracts.PairedFinding`` (``test``, ``difference``, the raw
    ``p_value``, ``interval``). Pending while ``computed_at`` is empty;
    ``error`` says why there is no answer. ``result_a`` has the smaller id, so
    each pair is asked once. ``requested_by``: the user whose compare page
    asked for it (counted against their hourly bound), None when a board
    change did; ``sent_at``: when it was last handed to the broker.

    ``revision_a`` and ``revision_b``: the ``Result.revision`` of each result
    when the test was last sent. Findings are shown only while both still are
    the results' revisions; a bump makes the test invalid and asks it again
    (``paired_revisions.do_invalidate_tests``), and until the new answer
    ``invalidated_at`` says it is being recomputed.
    """

    result_a = models.ForeignKey(Result, on_delete=models.CASCADE, related_name="+")
    result_b = models.ForeignKey(Result, on_delete=models.CASCADE, related_name="+")
    findings = models.JSONField(default=dict, blank=True)
    resamples = models.PositiveIntegerField(default=0)
    error = models.CharField(max_length=200, blank=True)
    requested_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True,
                                     related_name="+")
    requested_at = models.DateTimeField(default=timezone.now)
    sent_at = models.DateTimeField(null=True, blank=True)
    computed_at = models.DateTimeField(null=True, blank=True)
    revision_a = models.PositiveIntegerField(default=1)
    revision_b = models.PositiveIntegerField(default=1)
    invalidated_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["result_a", "result_b"], name="one_paired_test_per_pair")]
        indexes = [models.Index(fields=["requested_by", "requested_at"])]

    def __str__(self) -> str:
        return f"result {self.result_a_id} vs {self.result_b_id}"


class ChallengeArchive(models.Model):
    """The final board of a challenge, as it was when its last phase ended: written once by
    ``rankings.archive.do_archive`` and never recomputed, so that later submissions, re-scores,
    withdrawals or a method's new name leave it as the workshop report cites it.

    ``rows`` hold each row's facts as the board showed them (rank, method, team or None when
    anonymous, paper citation, method fields, every score and interval, ``top``: the place among
    the challenge's entries, 1..``Challenge.top``, or None), ranked rows first, then references.
    The board's facts are copied too (its split, columns, metric specs, scorer), so the archive
    reads the same when the split, the track or the bundle changes. It cannot be changed or deleted
    through the ORM, and its challenge cannot be deleted while it exists.
    """

    challenge = models.OneToOneField(Challenge, on_delete=models.PROTECT, related_name="archive")
    split = models.ForeignKey(Split, on_delete=models.SET_NULL, null=True, related_name="+")
    track = models.CharField(max_length=40)
    split_name = models.CharField(max_length=40)
    title = models.CharField(max_length=200)
    ended_at = models.DateTimeField(help_text="The end of the challenge: its last phase's deadline.")
    archived_at = models.DateTimeField(default=timezone.now)
    # The board: {"metric", "sort", "primary_metric", "columns", "headers", "all_columns",
    # "metric_specs", "method_fields", "scorer_version", "scores_of", "phases": [{name, title, split, dates}]}.
    board = models.JSONField(default=dict)
    rows = models.JSONField(default=list)

    def __str__(self) -> str:
        return f"final board of {self.track}/{self.challenge_id} ({self.split_name})"

    def save(self, *args: Any, **kwargs: Any) -> None:
        if self.pk is not None:
            raise PermissionError("A challenge's archived board is never changed.")
        super().save(*args, **kwargs)

    def delete(self, *args: Any, **kwargs: Any) -> Any:
        raise PermissionError("A challenge's archived board is never deleted.")
