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


def _size(n: int) -> str:
    """``4,096 MiB``, ``2.5 MiB``, ``900 bytes``: a file's size as refusals say it."""
    if n < 2**20:
        return f"{n:,} bytes"
    mib = n / 2**20
    return f"{mib:,.0f} MiB" if mib >= 100 or mib == int(mib) else f"{mib:,.1f} MiB"


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

    def protocol(self, key: str) -> ScoringProtocol | None:
        """The declared protocol called ``key`` (None for an unknown or empty key)."""
        return next((p for p in self.protocols if p.key == key), None)
