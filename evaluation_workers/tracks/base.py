"""What every track provides to the worker, the site and the command line.

A track is one module in this package that builds a ``Track``. The site reads
the display facts (metrics, groups, upload limits) from it; the worker calls
``score``; ``load_labels`` (manage.py) calls ``prepare_labels``; the command
line calls ``validate`` and ``score``. None of these touch Django.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from evaluation_workers.unpickled import refusal_hint

Manifest = dict[str, Any]
"""Public facts about a labels version (ids, sizes, vocabulary; never labels)."""

Result = dict[str, Any]
"""The result JSON of METRICS.md."""


@dataclass(frozen=True)
class ScoringProtocol:
    """One way a track's numbers are produced (how answers are read, which IoU).

    A track that declares several lists the one this service scores with first;
    rows copied from papers may name another, and pages then show each row's.
    """

    key: str
    label: str
    description: str = ""


class Progress(Protocol):
    def __call__(self, fraction: float, message: str = "") -> None: ...


def no_progress(fraction: float, message: str = "") -> None:
    """The progress callback for callers that do not show progress."""


def size_text(n: int) -> str:
    """``4,096 MiB``, ``2.5 MiB``, ``900 bytes``: a file's size as refusals, forms and pages say it (one
    unit for sizes everywhere: bytes below a MiB, MiB above)."""
    if n < 2**20:
        return f"{n:,} bytes"
    mib = n / 2**20
    return f"{mib:,.0f} MiB" if mib >= 100 or mib == int(mib) else f"{mib:,.1f} MiB"


_size = size_text


@dataclass(frozen=True)
class Sample:
    """A small file of one accepted form, offered for download on the format page.

    ``build(manifest) -> bytes`` makes it from a split's public manifest, so that it
    passes ``validate`` there and shows the layout a real file has.
    """

    file_name: str
    description: str
    build: Callable[[Manifest], bytes]


@dataclass(frozen=True)
class MetricSpec:
    """How one metric of a track reads: which way is better, what its values are, how many decimals.

    ``kind`` "fraction": a value in [0, 1] that pages show as a percentage (every metric of the
    built-in tracks: docs/metrics.md); "value": a number shown as it is, in ``unit`` ("cm", "m",
    "deg"; "" for a plain number), within [``low``, ``high``] (None: unbounded on that side).
    ``precision``: the decimals pages show (of the percentage, for a fraction); a benchmark's
    bundle may override it (``board.precision``). Ranks, a chart's "best" and the wording of a
    difference follow ``lower_is_better`` (localisation error, Chamfer distance, pose error).
    """

    lower_is_better: bool = False
    kind: str = "fraction"
    unit: str = ""
    low: float | None = 0.0
    high: float | None = 1.0
    precision: int = 1

    def __post_init__(self) -> None:
        if self.kind not in ("fraction", "value"):
            raise ValueError(f"Expected MetricSpec.kind 'fraction' or 'value', but got {self.kind!r}")
        if self.kind == "fraction" and (self.low, self.high, self.unit) != (0.0, 1.0, ""):
            raise ValueError("A fraction lies in [0, 1] and has no unit; use kind='value' for another range")
        if not 0 <= self.precision <= 6:
            raise ValueError(f"Expected MetricSpec.precision from 0 to 6, but got {self.precision!r}")
        if self.low is not None and self.high is not None and self.low > self.high:
            raise ValueError(f"Expected MetricSpec.low <= high, but got {self.low!r} > {self.high!r}")

    @classmethod
    def value(cls, unit: str = "", *, lower_is_better: bool = False, low: float | None = None,
              high: float | None = None, precision: int = 2) -> MetricSpec:
        """A metric that is not a fraction: a value in ``unit`` (e.g. a distance in cm, lower is better)."""
        return cls(lower_is_better=lower_is_better, kind="value", unit=unit, low=low, high=high, precision=precision)

    @property
    def is_fraction(self) -> bool:
        return self.kind == "fraction"

    @property
    def direction(self) -> str:
        """``"lower"`` or ``"higher"``: which values are better."""
        return "lower" if self.lower_is_better else "higher"

    def as_json(self) -> dict[str, Any]:
        return {"direction": self.direction, "kind": self.kind, "unit": self.unit, "low": self.low,
                "high": self.high, "precision": self.precision}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> MetricSpec:
        return cls(lower_is_better=data.get("direction") == "lower", kind=data.get("kind", "fraction"),
                   unit=data.get("unit", ""), low=data.get("low", 0.0), high=data.get("high", 1.0),
                   precision=int(data.get("precision", 1)))


FRACTION = MetricSpec()
"""A fraction in [0, 1], higher is better, shown as a percentage with one decimal: every metric a
track does not declare otherwise."""


@dataclass(frozen=True)
class DetailRows:
    """Results below a track's groups, kept in ``Result.details[key]`` (OpenScan's attributes).

    Rows are named ``"<group>/<row>"``, or ``"<row>"`` with ``parents`` giving each row's group.
    """

    key: str
    label: str  # what one row is called on pages ("Attribute")
    metrics: tuple[str, ...] = ()  # the values shown; () for every metric of the track
    parents: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Track:
    """One benchmark track (a plugin imports it as ``evaluation_workers.plugin.Track``).

    The fields without a default are required; of the others, ``description``, ``unit``, ``statistic``,
    ``units_of``, ``format_doc``, ``metrics_doc``, ``samples`` and ``write_demo`` are required by the
    track contract (``python -m evaluation_workers check-track``), the rest may keep their defaults
    (docs/writing-a-track.md).

    Attributes:
        name: slug used in URLs, task payloads and result JSON ("sqa3d").
        title: human name.
        scorer_version: recorded on every result; bump it whenever numbers may change.
        metrics: metric keys in display order; ``metrics[0]`` is not necessarily primary.
        primary_metric: the metric that ranks the leaderboard.
        groups: breakdown groups in display order (question types, aspects, categories).
        group_label: what a group is called on pages ("Question type").
        upload_suffixes: accepted file name endings for predictions.
        max_upload_bytes: larger uploads are refused before they are stored.
        prepare_labels: ``(source, dest) -> manifest``; copies the official label
            files into ``dest`` (a worker-only folder), builds any cache, and returns
            the public manifest.
        validate: ``(predictions, manifest) -> summary``; checks a predictions file
            against the public manifest only, raising ``SubmissionError``.
        score: ``(labels, predictions, progress, outcomes=None) -> result``; ``labels`` is an
            official labels folder or file, or one ``prepare_labels`` wrote; a dict
            passed as ``outcomes`` is filled with the per-unit outcomes (see ``statistic``).
        manifest: ``(labels) -> manifest``; the public manifest of a labels folder.
        wants_gpu: whether scoring benefits from the GPU queue when one exists.
        protocols: the ways numbers on this track are produced, this service's
            scorer first; empty when there is only one (rows then show none).
        unit: what one outcome is ("question", "prompt", "scene"); the bootstrap
            resamples the scenes they belong to.
        statistic: ``(outcomes) -> bootstrap statistic``; ``outcomes`` is what
            ``score(..., outcomes={})`` fills in (per-unit outcomes, worker-only).
        units_of: ``(outcomes) -> n``, the number of units they cover.
        width: ``(outcomes) -> w``, the widest (b, w) temporary of the statistic.
        scenes_of: ``(outcomes) -> (n,) int64`` the scene index of each unit
            (``bootstrap.scene_index``), or None when the units are the scenes;
            absent (None) for a track whose units are its scenes.
        groups_of: ``(outcomes) -> {group: (n,) bool}`` the units of each
            breakdown group (an interval per group needs enough scenes).
        stack: ``(outcomes_a, outcomes_b) -> outcomes`` of 2n units, A's then B's (B's unit i
            is unit n + i), such that ``statistic`` of them with weights w (b, 2n) is the
            metric of A's units weighted by w[:, :n] together with B's weighted by
            w[:, n:], exactly as if scored as one submission (for pooled AP, one ranking of
            both's predictions). The paired permutation test swaps the two scene by scene
            through it (``metrics.permutation``); a track without it gets no paired test.
            ``permutation.stack_units`` serves outcomes that are per-unit arrays only; it raises
            ``permutation.Unpaired`` for outcomes it cannot stack (kept by an older scorer).
        min_scenes: the fewest scenes an interval is given for, unless
            ``EVAL_BOOTSTRAP_MIN_SCENES`` says otherwise: where the track's
            simulated coverage reaches 90 % (benchmarks/coverage.py).
        max_inflated_bytes: the most bytes a submission may inflate to (zip members,
            gzip), unless ``EVAL_MAX_INFLATED_BYTES_<TRACK>`` says otherwise (``limits``).
        detail_rows: the per-class results below the groups that pages may show, or None.
        per_class_keys: keys of ``Result.details`` whose values are per class: on a
            split with hidden labels they are shown only as ``detail_rows`` allows.
        chart: how a result's groups are drawn: "bars", or "radar" for many groups
            of one kind (OpenScan's aspects).
        format_doc: the Markdown page of the track's file formats (the site's format page).
        metrics_doc: for a track that docs/metrics.md has no section on (a plugin): the Markdown
            of how its metrics are computed, shown as its section of the site's /metrics/ page.
        manifest_schema: the JSON Schema of ``manifest``'s answer (the OpenAPI document).
        samples: form -> ``Sample``, the files the format page offers, in order.
        write_demo: ``(folder, split) -> (labels, predictions)``: small synthetic labels
            and a predictions file for a demo split (a bundle's ``synthetic`` labels).
        counts: ``(manifest) -> (units, scenes)``: how many units (``unit``) and scenes a labels
            version holds, as pages show it; None for the common manifest (``label_counts``).
        metric_specs: metric -> ``MetricSpec`` (direction, range or unit, precision); a metric
            not listed is ``FRACTION`` (in [0, 1], higher is better, a percentage with one decimal).
    """

    name: str
    title: str
    scorer_version: str
    metrics: tuple[str, ...]
    primary_metric: str
    groups: tuple[str, ...]
    group_label: str
    upload_suffixes: tuple[str, ...]
    max_upload_bytes: int
    prepare_labels: Callable[[Path, Path], Manifest]
    validate: Callable[[Path, Manifest], dict[str, Any]]
    score: Callable[..., Result]
    manifest: Callable[[Path], Manifest]
    wants_gpu: bool = False
    description: str = ""
    metric_families: tuple[tuple[str, ...], ...] = field(default=())
    protocols: tuple[ScoringProtocol, ...] = field(default=())
    unit: str = ""
    statistic: Callable[[Any], Any] | None = None
    units_of: Callable[[Any], int] | None = None
    width: Callable[[Any], int] | None = None
    scenes_of: Callable[[Any], Any] | None = None
    groups_of: Callable[[Any], dict[str, Any]] | None = None
    stack: Callable[[Any, Any], Any] | None = None
    min_scenes: int = 20  # as bootstrap.DEFAULT_MIN_SCENES (the core's tracks module imports no numpy)
    max_inflated_bytes: int = 1 << 30
    detail_rows: DetailRows | None = None
    per_class_keys: tuple[str, ...] = ()
    chart: str = "bars"
    format_doc: Path | None = None
    metrics_doc: Path | None = None
    manifest_schema: Mapping[str, Any] | None = None
    samples: Mapping[str, Sample] = field(default_factory=dict)
    write_demo: Callable[[Path, str], tuple[Path, Path]] | None = None
    counts: Callable[[Manifest], tuple[int | None, int | None]] | None = None
    metric_specs: Mapping[str, MetricSpec] = field(default_factory=dict)

    def __post_init__(self) -> None:
        unknown = sorted(set(self.metric_specs) - set(self.metrics))
        if unknown:
            raise ValueError(f"Track {self.name!r}: metric_specs names {', '.join(unknown)}, which is not one of its "
                             f"metrics ({', '.join(self.metrics)})")

    def metric_spec(self, key: str) -> MetricSpec:
        """The spec of a metric, or of the metric of a flat score key (``What/EM``: ``EM``)."""
        metric = key if key in self.metric_specs else key.rpartition("/")[2]
        return self.metric_specs.get(metric, FRACTION)

    def name_refusal(self, file_name: str) -> str | None:
        """Why a predictions file called ``file_name`` is refused for its name, or None.

        The site refuses it before storing a byte and ``lb validate`` before reading one: one rule, one message.
        """
        if file_name.lower().endswith(self.upload_suffixes):
            return None
        return f"{file_name}: expected a file ending in {' or '.join(self.upload_suffixes)}." + refusal_hint(file_name)

    def size_refusal(self, file_name: str, size: int | None, limit: int | None = None) -> str | None:
        """Why a file of ``size`` bytes is refused for its size (over ``limit``, by default the track's), or None.

        ``size`` None: a file refused while it was read, past the limit (its size is not known).
        """
        limit = self.max_upload_bytes if limit is None else limit
        if size is not None and size <= limit:
            return None
        got = f", but got {_size(size)}" if size is not None else ""
        return f"{file_name}: expected at most {_size(limit)} for {self.title}{got}."

    def label_counts(self, manifest: Manifest) -> tuple[int | None, int | None]:
        """(units, scenes) of a labels version from its public manifest: the units its scores are over
        (questions, prompts, descriptions; the scenes where the unit is the scene) and the scenes they
        are in. The common manifest says ``count`` and lists ``scenes`` (a list, or a mapping keyed by
        scene); a track whose manifest says it otherwise gives ``counts``. None where it does not say."""
        if self.counts is not None:
            return self.counts(manifest)
        scenes = manifest.get("scenes")
        n_scenes = len(scenes) if isinstance(scenes, (list, dict)) else None
        units = manifest.get("count")
        if not isinstance(units, int) or isinstance(units, bool):
            units = n_scenes if self.unit == "scene" else None
        return units, n_scenes

    def protocol(self, key: str) -> ScoringProtocol | None:
        """The declared protocol called ``key`` (None for an unknown or empty key)."""
        return next((p for p in self.protocols if p.key == key), None)
