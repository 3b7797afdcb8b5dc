from __future__ import annotations

from django.db import models

from evaluation_workers.tracks import get_track
from evaluation_workers.tracks.base import Track


class Benchmark(models.Model):
    """A track of the service; its scoring facts come from the scoring core's ``Track``."""

    track = models.SlugField(max_length=40, unique=True)
    title = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    order = models.PositiveSmallIntegerField(default=0)
    is_active = models.BooleanField(default=True)
    # The board's default view, from the benchmark's bundle (``bundles``): {"metric", "sort"}, each
    # optional; read by ``rankings.selectors.LeaderboardView.from_query``.
    board = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["order", "track"]

    def __str__(self) -> str:
        return self.title

    @property
    def spec(self) -> Track:
        return get_track(self.track)


class Split(models.Model):
    benchmark = models.ForeignKey(Benchmark, on_delete=models.CASCADE, related_name="splits")
    name = models.SlugField(max_length=40)
    description = models.CharField(max_length=300, blank=True)
    accepting_submissions = models.BooleanField(default=True)
    is_default = models.BooleanField(default=False)
    results_visible_after = models.DateTimeField(
        null=True, blank=True, help_text="Until then, scores on this split are shown to maintainers only.")
    # Challenge phases (``phases.py``); all optional, a split without them is simply open.
    starts_at = models.DateTimeField(null=True, blank=True, help_text="No submission is accepted before.")
    freeze_at = models.DateTimeField(
        null=True, blank=True, help_text="From then on no submission is accepted and the public board stops "
                                         "changing until the reveal.")
    deadline = models.DateTimeField(null=True, blank=True, help_text="The end of the challenge.")
    reveal_at_deadline = models.BooleanField(
        default=True, help_text="Reveal the full board at the deadline; otherwise a maintainer reveals it.")
    revealed_at = models.DateTimeField(
        null=True, blank=True, help_text="When the full board (private scores, entries held back by the freeze) "
                                         "was revealed.")
    reopened = models.BooleanField(default=False, help_text="Accept submissions again after the deadline.")
    # Set by maintainers: the split's labels are published (a public validation set), so results
    # per attribute or sub-class, with their counts, reveal nothing. Hidden splits show only groups
    # of at least DRILLDOWN_MIN_GROUP_SIZE, without counts (rankings.drilldown).
    labels_public = models.BooleanField(
        default=False, help_text="Its labels are public: pages show per-attribute / per-sub-class results "
                                 "with their counts. Leave off for hidden labels.")

    class Meta:
        ordering = ["-is_default", "name"]
        constraints = [models.UniqueConstraint(fields=["benchmark", "name"], name="unique_split")]

    def __str__(self) -> str:
        return f"{self.benchmark.track}/{self.name}"

    @property
    def active_labels(self) -> LabelSet | None:
        return self.label_sets.filter(is_active=True).first()

    @property
    def phase(self) -> str:
        from leaderboard.benchmarks.phases import phase_of

        return phase_of(self)

    @property
    def is_revealed(self) -> bool:
        from leaderboard.benchmarks.phases import is_revealed

        return is_revealed(self)

    @property
    def labels_loaded(self) -> bool:
        """Whether the split has active labels: it accepts submissions only then (``phases.submission_refusal``)."""
        if "labels_active" in self.__dict__:  # annotated by ``selectors.get_split`` and ``splits_of``
            return bool(self.__dict__["labels_active"])
        return self.label_sets.filter(is_active=True).exists()

    @property
    def has_partition(self) -> bool:
        """Whether results on this split come in a public and a private part (its active labels say)."""
        if "labels_partition" in self.__dict__:  # annotated by ``selectors.get_split``
            return bool(self.__dict__["labels_partition"])
        labels = self.active_labels
        return bool(labels and labels.has_partition)


class LabelSet(models.Model):
    """One version of a split's hidden labels, identified by its checksum.

    The files live under ``LABELS_DIR/<storage_key>``, which only workers read;
    the database holds only the public manifest. Loading new labels adds a
    row and makes it active; old results keep pointing to the labels they used.
    """

    split = models.ForeignKey(Split, on_delete=models.CASCADE, related_name="label_sets")
    sha256 = models.CharField(max_length=64)
    storage_key = models.CharField(max_length=300)
    manifest = models.JSONField()
    is_active = models.BooleanField(default=False)
    loaded_at = models.DateTimeField(auto_now_add=True)
    loaded_by = models.CharField(max_length=150, blank=True)
    # Whether the labels hold a public subset (``partition.txt``, read by workers only): each
    # submission is then scored on the public subset and on the private remainder.
    has_partition = models.BooleanField(default=False)

    class Meta:
        ordering = ["-loaded_at"]
        constraints = [
            models.UniqueConstraint(fields=["split", "sha256"], name="unique_labels_version"),
            models.UniqueConstraint(fields=["split"], condition=models.Q(is_active=True),
                                    name="one_active_labels_per_split"),
        ]

    def __str__(self) -> str:
        return f"{self.split} @ {self.sha256[:12]}"
