from __future__ import annotations

from collections.abc import Iterable

from django.conf import settings
from django.db import models

from leaderboard.accounts.models import Team
from leaderboard.benchmarks.models import LabelSet, Split


class Method(models.Model):
    """A team's method; the leaderboard has one row per method and split."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="methods")
    name = models.CharField(max_length=100)
    description = models.TextField(blank=True)
    paper_url = models.URLField(blank=True)
    code_url = models.URLField(blank=True)
    authors = models.CharField(max_length=500, blank=True)
    # None until the team answers; publishing needs an answer (REQUIRED_FOR_PUBLISHING).
    uses_extra_data = models.BooleanField(null=True, blank=True, verbose_name="Uses extra training data")
    details = models.TextField(blank=True)
    # Answers to the method fields of each benchmark it entered ({"<track>": {"<field>": value}};
    # ``lib.method_fields``): copied onto its leaderboard rows by ``rankings.services.refresh_entry``.
    fields = models.JSONField(default=dict, blank=True)
    # Anonymous (under review): its public rows, pages, API answers and exports name no team,
    # authors, paper or code until a member reveals it (audited); maintainers still see the team.
    is_anonymous = models.BooleanField(default=False, help_text="Public as 'Anonymous (under review)'.")
    revealed_at = models.DateTimeField(null=True, blank=True, help_text="When a member revealed the team.")
    created_at = models.DateTimeField(auto_now_add=True)

    # Fields that must be filled before one of its results is published.
    # Paper and code URLs stay optional: entries under review may have neither yet.
    REQUIRED_FOR_PUBLISHING = ("description", "authors", "uses_extra_data")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["team", "name"], name="unique_method_name")]

    def __str__(self) -> str:
        return self.name

    @property
    def missing_metadata(self) -> list[str]:
        """Labels of the fields that must be filled before a result of this method is published."""
        return [self._meta.get_field(name).verbose_name for name in self.REQUIRED_FOR_PUBLISHING
                if getattr(self, name) in (None, "")]


class Submission(models.Model):
    """One uploaded predictions file and its way through scoring.

    ``status`` changes only through ``lifecycle.do_transition`` (row-locked).
    Moderation and publishing flags are separate from the status.

    ``attempt`` counts the times it was sent to a scoring queue; every worker
    report names its attempt, so a late report of an earlier one is dropped.
    ``sent_at`` is when the current attempt reached the broker (None: not yet,
    the sweeper sends it); ``heartbeat_at`` the last sign of life of the worker
    scoring it; ``lost_attempts`` how many attempts a worker started and lost.
    """

    class Status(models.TextChoices):
        UPLOADING = "uploading"
        SUBMITTED = "submitted"
        QUEUED = "queued"
        RUNNING = "running"
        FINISHED = "finished"
        FAILED = "failed"
        CANCELLED = "cancelled"

    class FailureKind(models.TextChoices):
        INVALID_INPUT = "invalid_input", "Invalid input"
        PLATFORM_ERROR = "platform_error", "Platform error"

    class Quota(models.TextChoices):
        COUNTED = "counted"  # against the per-day, total and in-flight quotas
        REJECTED = "rejected"  # a format rejection: against the larger rejection cap only
        REFUNDED = "refunded"  # failed for the platform's reasons, cancelled or never uploaded

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="submissions")
    method = models.ForeignKey(Method, on_delete=models.CASCADE, related_name="submissions")
    split = models.ForeignKey(Split, on_delete=models.PROTECT, related_name="submissions")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True,
                                   related_name="submissions")
    status = models.CharField(max_length=12, choices=Status.choices, default=Status.UPLOADING)
    failure_kind = models.CharField(max_length=16, choices=FailureKind.choices, blank=True)
    status_detail = models.TextField(blank=True, help_text="Error or progress message shown to the owner.")
    progress = models.FloatField(default=0.0)
    attempt = models.PositiveIntegerField(default=0, help_text="How often it was queued for scoring.")
    lost_attempts = models.PositiveIntegerField(default=0, help_text="Attempts a worker started and lost.")
    queue = models.CharField(max_length=100, blank=True, help_text="The scoring queue of the current attempt.")
    sent_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    worker = models.CharField(max_length=200, blank=True, help_text="The worker scoring the current attempt.")
    quota = models.CharField(max_length=10, choices=Quota.choices, default=Quota.COUNTED)

    file_name = models.CharField(max_length=255)
    file_key = models.CharField(max_length=300, blank=True)
    file_size = models.BigIntegerField(default=0)
    # Set when the retention policy deleted the predictions file; it cannot be re-scored after that.
    file_deleted_at = models.DateTimeField(null=True, blank=True)
    predictions_sha256 = models.CharField(max_length=64, blank=True)
    labels = models.ForeignKey(LabelSet, on_delete=models.PROTECT, null=True, blank=True, related_name="+")

    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    queued_at = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    # Publishing (the owner) and moderation (maintainers) are separate from the status.
    is_published = models.BooleanField(default=False)
    is_hidden = models.BooleanField(default=False)
    hidden_reason = models.CharField(max_length=300, blank=True)
    is_verified = models.BooleanField(default=False)
    is_flagged = models.BooleanField(default=False)
    flag_reason = models.CharField(max_length=300, blank=True)
    is_disqualified = models.BooleanField(default=False)
    disqualified_reason = models.CharField(max_length=300, blank=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["team", "split", "created_at"]),
                   models.Index(fields=["team", "split", "quota", "status"]),
                   models.Index(fields=["status", "queued_at"])]
        constraints = [
            models.UniqueConstraint(fields=["method", "split"], condition=models.Q(is_published=True),
                                    name="one_published_submission_per_method_and_split"),
        ]

    def __str__(self) -> str:
        return f"#{self.pk} {self.method} on {self.split}"

    @property
    def is_done(self) -> bool:
        return self.status in {self.Status.FINISHED, self.Status.FAILED, self.Status.CANCELLED}

    @property
    def latest_result(self) -> Result | None:
        """The latest result its owner (and the public board) may see now: never a private-partition
        result before the split is revealed (``benchmarks.phases``)."""
        return shown_result(self.results.all(), self.split)


class Result(models.Model):
    """Scores of one submission by one scorer version (the result JSON of METRICS.md).

    Re-scoring with the same scorer version overwrites this row; a new scorer
    version adds a row and keeps the old one. Where the split's labels hold a
    public subset, one scoring gives two rows: ``public`` (the subset, shown
    during the challenge) and ``private`` (the remainder, hidden from everyone
    but the maintainers until the split is revealed).
    """

    class Partition(models.TextChoices):
        ALL = "", "All units"
        PUBLIC = "public", "Public subset"
        PRIVATE = "private", "Private remainder"

    submission = models.ForeignKey(Submission, on_delete=models.CASCADE, related_name="results")
    scorer_version = models.CharField(max_length=40)
    # The worker's checksum of the labels it read, and the labels version the attempt was sent with: a
    # result whose ``labels`` are not its split's active ones predates them (``result_state``).
    labels_sha256 = models.CharField(max_length=64)
    labels = models.ForeignKey(LabelSet, on_delete=models.PROTECT, null=True, blank=True, related_name="+")
    predictions_sha256 = models.CharField(max_length=64)
    metrics = models.JSONField()
    breakdown = models.JSONField()
    details = models.JSONField(default=dict)
    warnings = models.JSONField(default=list)
    # 95 % bootstrap intervals, flat like the leaderboard's scores ({"EM": [lo, hi], "What/EM": ..}),
    # and how they were drawn (resamples, seed, unit); empty for results scored without them.
    intervals = models.JSONField(default=dict, blank=True)
    bootstrap = models.JSONField(default=dict, blank=True)
    seconds = models.FloatField(null=True)
    device = models.CharField(max_length=8, blank=True)
    worker = models.CharField(max_length=200, blank=True, help_text="The worker that scored it (node:pid).")
    partition = models.CharField(max_length=8, choices=Partition.choices, default=Partition.ALL, blank=True)
    # Which state of this row a message or a stored paired test belongs to: every change of what it
    # says (a re-score overwriting it, new labels, late intervals) bumps it, so that an answer
    # computed on an earlier state is recognised as stale (METRICS.md, "A test belongs to the
    # results it compared"). Bumped only by ``result_state.do_bump_revisions``.
    revision = models.PositiveIntegerField(default=1)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["submission", "scorer_version", "partition"],
                                               name="one_result_per_scorer_version_and_partition")]

    @property
    def scene_intervals(self) -> dict:
        """The intervals that may be shown: those of a bootstrap that resampled scenes (METRICS.md,
        "Uncertainty"). A result scored when intervals resampled questions or prompts claims more
        certainty than it has, and shows none until it is re-scored."""
        return dict(self.intervals or {}) if (self.bootstrap or {}).get("unit") == "scene" else {}

    def as_json(self) -> dict:
        return {"scorer_version": self.scorer_version, "labels_sha256": self.labels_sha256,
                "predictions_sha256": self.predictions_sha256, "partition": self.partition,
                "metrics": self.metrics, "breakdown": self.breakdown, "details": self.details,
                "warnings": self.warnings, "intervals": self.scene_intervals, "bootstrap": self.bootstrap}


class ResultState(models.TextChoices):
    """Whether a result's scores are current on its split: scored on the active labels, or on earlier
    ones and waiting for its re-score, or its re-score on the active labels failed."""

    CURRENT = "current", "current"
    AWAITING_RESCORE = "awaiting_rescore", "awaiting re-score"
    RESCORE_FAILED = "rescore_failed", "re-score failed"


def result_state(result: Result, submission: Submission, active_labels_id: int | None) -> str:
    """The ``ResultState`` of ``result`` (of ``submission``) while the split's active labels are
    ``active_labels_id``. A result recorded before results named their labels counts as current."""
    if result.labels_id is None or active_labels_id is None or result.labels_id == active_labels_id:
        return ResultState.CURRENT
    if submission.status == Submission.Status.FAILED and submission.labels_id == active_labels_id:
        return ResultState.RESCORE_FAILED
    return ResultState.AWAITING_RESCORE


def shown_result(results: Iterable[Result], split: Split) -> Result | None:
    """The latest of ``results`` in a partition the public may see on ``split`` now (a prefetched
    list or a queryset): the public subset until the reveal, the private remainder after it."""
    from leaderboard.benchmarks.phases import shown_partitions

    shown = shown_partitions(split)
    if isinstance(results, models.QuerySet):
        return results.filter(partition__in=shown).order_by("-created_at", "-pk").first()
    return max((r for r in results if r.partition in shown), key=lambda r: (r.created_at, r.pk), default=None)


class Upload(models.Model):
    """A file arriving in parts for a submission (status ``uploading`` until completed).

    With S3 storage the parts go straight to the bucket through presigned URLs;
    with local storage they are PUT to the site. ``storage_upload_id`` names the
    multipart upload in the store, ``expires_at`` is when it is given up.
    """

    submission = models.OneToOneField(Submission, on_delete=models.CASCADE, related_name="upload")
    storage_upload_id = models.CharField(max_length=300)
    declared_size = models.BigIntegerField()
    part_size = models.BigIntegerField()
    part_count = models.PositiveIntegerField()
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField(db_index=True)
    completed_at = models.DateTimeField(null=True, blank=True)
    aborted_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"upload of #{self.submission_id}"

    @property
    def is_open(self) -> bool:
        return self.completed_at is None and self.aborted_at is None


class QuotaOverride(models.Model):
    """A maintainer's quota for one team, on one split or (split empty) on all; empty fields keep the default."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="quota_overrides")
    split = models.ForeignKey(Split, on_delete=models.CASCADE, null=True, blank=True, related_name="+")
    per_day = models.PositiveIntegerField(null=True, blank=True)
    total = models.PositiveIntegerField(null=True, blank=True)
    in_flight = models.PositiveIntegerField(null=True, blank=True)
    rejected_per_day = models.PositiveIntegerField(null=True, blank=True)
    min_interval = models.PositiveIntegerField(null=True, blank=True,
                                               help_text="Seconds between two counted submissions.")
    note = models.CharField(max_length=300, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["team", "split"], name="one_quota_override_per_team_and_split"),
            models.UniqueConstraint(fields=["team"], condition=models.Q(split__isnull=True),
                                    name="one_default_quota_override_per_team"),
        ]

    def __str__(self) -> str:
        return f"quota of {self.team} on {self.split or 'all splits'}"


class SplitLimit(models.Model):
    """A split's own submission limits, for each team or for each user (over all their teams).

    Empty fields keep the default (``QUOTA_*`` for teams, ``QUOTA_USER_*`` for
    users). Per-user limits count every submission a user made on the split,
    whichever team it was for: making a new team does not reset them.
    """

    class Scope(models.TextChoices):
        TEAM = "team", "Per team"
        USER = "user", "Per user"

    split = models.ForeignKey(Split, on_delete=models.CASCADE, related_name="limits")
    scope = models.CharField(max_length=4, choices=Scope.choices)
    per_day = models.PositiveIntegerField(null=True, blank=True)
    total = models.PositiveIntegerField(null=True, blank=True)
    in_flight = models.PositiveIntegerField(null=True, blank=True)
    min_interval = models.PositiveIntegerField(null=True, blank=True,
                                               help_text="Seconds between two counted submissions.")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["split", "scope"], name="one_split_limit_per_scope")]

    def __str__(self) -> str:
        return f"{self.get_scope_display().lower()} limits on {self.split}"


class RefusedUpload(models.Model):
    """A file sent in one request and refused by its name or size before anything was stored.

    It is no submission (so it makes no method, and no page lists it as one: the
    refusal is the answer to the request), but its bytes were sent, so it counts
    against the team's daily cap of rejected files like a file the validator
    refuses (``quotas.usage``). An upload in parts is refused when announced,
    before a byte is sent: nothing counts then.
    """

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="refused_uploads")
    split = models.ForeignKey(Split, on_delete=models.CASCADE, related_name="refused_uploads")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True,
                                   related_name="refused_uploads")
    method_name = models.CharField(max_length=100, help_text="The method it was sent for (not created).")
    file_name = models.CharField(max_length=255)
    file_size = models.BigIntegerField(default=0, help_text="Bytes sent.")
    reason = models.TextField(help_text="The refusal, as the submitter read it.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["team", "split", "created_at"])]

    def __str__(self) -> str:
        return f"{self.file_name} refused on {self.split}"
