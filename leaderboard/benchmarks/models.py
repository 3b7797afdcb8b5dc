from __future__ import annotations

import dataclasses

from django.db import models

from evaluation_workers.tracks import get_track, is_installed
from evaluation_workers.tracks.base import MetricSpec, ScoringProtocol, Track


def track_facts(track: Track) -> dict:
    """What pages need of a track to show its board: kept on the benchmark, so that the board
    stays readable when the track's package is no longer installed (``Benchmark.spec``)."""
    return {"title": track.title, "scorer_version": track.scorer_version, "metrics": list(track.metrics),
            "primary_metric": track.primary_metric, "groups": list(track.groups), "group_label": track.group_label,
            "description": track.description, "metric_families": [list(f) for f in track.metric_families],
            "protocols": [[p.key, p.label, p.description] for p in track.protocols], "unit": track.unit,
            "chart": track.chart, "metric_specs": {m: s.as_json() for m, s in track.metric_specs.items()}}


def _not_installed(name: str):
    def refuse(*args, **kwargs):
        raise LookupError(f"The track {name!r} is not installed on this site: its package was removed, so its "
                          "files cannot be checked or scored.")
    return refuse


def stand_in(name: str, facts: dict) -> Track:
    """A track that shows a board from its recorded facts and refuses every file (its plugin is gone)."""
    refuse = _not_installed(name)
    return Track(name=name, title=facts.get("title", name), scorer_version=facts.get("scorer_version", ""),
                 metrics=tuple(facts.get("metrics", ())), primary_metric=facts.get("primary_metric", ""),
                 groups=tuple(facts.get("groups", ())), group_label=facts.get("group_label", "Group"),
                 upload_suffixes=(), max_upload_bytes=0, prepare_labels=refuse, validate=refuse, score=refuse,
                 manifest=refuse, description=facts.get("description", ""),
                 metric_families=tuple(tuple(f) for f in facts.get("metric_families", ())),
                 protocols=tuple(ScoringProtocol(*p) for p in facts.get("protocols", ())),
                 unit=facts.get("unit", ""), chart=facts.get("chart", "bars"),
                 metric_specs={m: MetricSpec.from_json(s) for m, s in facts.get("metric_specs", {}).items()
                               if m in facts.get("metrics", ())})


class Benchmark(models.Model):
    """A track of the service; its scoring facts come from the scoring core's ``Track``."""

    track = models.SlugField(max_length=40, unique=True)
    title = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    order = models.PositiveSmallIntegerField(default=0)
    is_active = models.BooleanField(default=True)
    # ``track_facts`` of the installed track, written on every save and after migrations.
    track_facts = models.JSONField(default=dict, blank=True, editable=False)
    # The board's default view, from the benchmark's bundle (``bundles``): {"metric", "sort"}, each
    # optional; read by ``rankings.selectors.LeaderboardView.from_query``.
    board = models.JSONField(default=dict, blank=True)
    # What every method is asked on this benchmark (the bundle's ``method_fields``, ``lib/method_fields.py``):
    # [{"name", "label", "type", "choices", "required", "column", "filter", "help"}, ...].
    method_fields = models.JSONField(default=list, blank=True, editable=False)  # the bundle's, not the admin's
    # The hosts' Markdown pages (the bundle's ``pages``: overview, rules, dates, prizes, organisers,
    # citation), {key: source}; rendered and sanitised when shown (``host_pages.render``).
    pages = models.JSONField(default=dict, blank=True, editable=False)  # the bundle's, not the admin's

    class Meta:
        ordering = ["order", "track"]

    def __str__(self) -> str:
        return self.title

    @property
    def chart(self) -> str:
        """How a result's groups are drawn: the bundle's choice (``board.chart``), else the track's."""
        return self.board.get("chart") or self.spec.chart

    def metric_spec(self, key: str) -> MetricSpec:
        """How the metric of ``key`` (``EM``, or ``What/EM``) reads here: the track's spec, with the
        decimals of the bundle's ``board.precision`` (a number for every metric, or one per metric)."""
        spec = self.spec.metric_spec(key)
        precision = self.board.get("precision")
        if isinstance(precision, dict):
            precision = precision.get(key, precision.get(key.rpartition("/")[2]))
        return dataclasses.replace(spec, precision=precision) if isinstance(precision, int) else spec

    @property
    def track_installed(self) -> bool:
        return is_installed(self.track)

    @property
    def spec(self) -> Track:
        """The installed track, or a stand-in from ``track_facts`` when its package is gone."""
        if is_installed(self.track):
            return get_track(self.track)
        return stand_in(self.track, self.track_facts)

    def save(self, *args, **kwargs) -> None:
        if is_installed(self.track):
            self.track_facts = track_facts(get_track(self.track))
            if kwargs.get("update_fields") is not None:
                kwargs["update_fields"] = {*kwargs["update_fields"], "track_facts"}
        super().save(*args, **kwargs)


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
    # A challenge phase's rules beyond its dates (``Phase``; ``phases.py``): the board hidden until the
    # phase ends, and how many rows a team may have published on it.
    board_hidden = models.BooleanField(
        default=False, help_text="The public board shows no new row until the deadline (the phase's end); rows "
                                 "published meanwhile appear then.")
    max_published_per_team = models.PositiveIntegerField(
        null=True, blank=True, help_text="How many rows (methods) a team may have published here; empty: any.")
    # Set when the board of the challenge this split is a phase of was archived (``rankings.archive``),
    # to the challenge's end: from then on it is a post-challenge board (``phases.AFTER``) whose rows
    # sent after that moment are marked "after the challenge".
    post_challenge_from = models.DateTimeField(
        null=True, blank=True, help_text="When its challenge ended and was archived: a post-challenge board since.")
    # Set by maintainers: the split's labels are published (a public validation set), so results
    # per attribute or sub-class, with their counts, reveal nothing. Hidden splits show only groups
    # of at least DRILLDOWN_MIN_GROUP_SIZE, without counts (rankings.drilldown).
    labels_public = models.BooleanField(
        default=False, help_text="Its labels are public: pages show per-attribute / per-sub-class results "
                                 "with their counts. Leave off for hidden labels.")
    # What the active labels are (``services.do_note_active_labels`` writes them whenever labels are
    # activated): synthetic (a demo's generated labels, or a subset standing in for the real split), how
    # many units and scenes they hold (``Track.label_counts``) and their checksum. Every page and answer
    # that shows the split's numbers says so (``disclosure``): counts are the loaded labels', never the
    # real split's.
    labels_synthetic = models.BooleanField(
        default=False, editable=False, help_text="The active labels are synthetic or a subset, not the real split's.")
    labels_units = models.PositiveIntegerField(null=True, blank=True, editable=False)
    labels_scenes = models.PositiveIntegerField(null=True, blank=True, editable=False)
    labels_sha256 = models.CharField(max_length=64, blank=True, editable=False)

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


class Challenge(models.Model):
    """A benchmark's challenge: phases in order (``Phase``), each on a split of its own, whose dates and
    rules the split holds (``phases.py``: the phases are not a second mechanism). When the last phase
    ends (and its board is revealed) that board is archived (``rankings.archive``): an immutable
    snapshot at ``/benchmarks/<track>/challenges/<name>/``, its ``top`` entries marked; with
    ``post_challenge`` every phase's split then takes submissions again, as a post-challenge board.

    Declared in the benchmark's bundle (``challenges``, or a split's ``phases``: a one-phase
    challenge named after the split)."""

    benchmark = models.ForeignKey(Benchmark, on_delete=models.CASCADE, related_name="challenges")
    name = models.SlugField(max_length=40)
    title = models.CharField(max_length=200)
    description = models.CharField(max_length=300, blank=True)
    top = models.PositiveSmallIntegerField(default=3, help_text="How many entries the archive marks as the top.")
    post_challenge = models.BooleanField(
        default=True, help_text="After the end, its splits take submissions again; rows sent after it are marked.")
    order = models.PositiveSmallIntegerField(default=0)

    class Meta:
        ordering = ["benchmark", "order", "name"]
        constraints = [models.UniqueConstraint(fields=["benchmark", "name"], name="unique_challenge")]

    def __str__(self) -> str:
        return f"{self.benchmark.track}/{self.name}"

    @property
    def last_phase(self) -> Phase | None:
        return self.phases.select_related("split__benchmark").order_by("-order").first()


class Phase(models.Model):
    """One phase of a challenge, in order: its split holds its dates (start, freeze, deadline), its
    board's visibility (``Split.board_hidden``), its limits and how many rows a team may publish."""

    challenge = models.ForeignKey(Challenge, on_delete=models.CASCADE, related_name="phases")
    order = models.PositiveSmallIntegerField()
    name = models.SlugField(max_length=40)
    title = models.CharField(max_length=200)
    split = models.OneToOneField(Split, on_delete=models.CASCADE, related_name="challenge_phase")

    class Meta:
        ordering = ["challenge", "order"]
        constraints = [models.UniqueConstraint(fields=["challenge", "name"], name="unique_phase_name")]

    def __str__(self) -> str:
        return f"{self.challenge}/{self.name}"


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
    # Synthetic labels (a demo's, generated by the track's ``write_demo``) or a subset standing in for
    # the real split: pages say "synthetic labels" wherever numbers scored on them appear.
    synthetic = models.BooleanField(default=False)

    class Meta:
        ordering = ["-loaded_at"]
        constraints = [
            models.UniqueConstraint(fields=["split", "sha256"], name="unique_labels_version"),
            models.UniqueConstraint(fields=["split"], condition=models.Q(is_active=True),
                                    name="one_active_labels_per_split"),
        ]

    def __str__(self) -> str:
        return f"{self.split} @ {self.sha256[:12]}"
