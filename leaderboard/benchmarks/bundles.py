"""Benchmark bundles: one YAML file declares a benchmark (its splits, their labels, phases and
limits, its paper rows and its board's default view). Here they are read and checked;
``bundle_apply`` writes them to the database.

The shape is the published JSON Schema ``bundle.schema.json`` (served at
``/schemas/benchmark-bundle.json``); every problem names the file, the line and the
key path (``sqa3d.yaml:12: splits[0].phases.deadline: ...``).

A bundle may come from outside the host's team, so reading one is bounded: at most
``MAX_BUNDLE_BYTES``, read by libyaml's safe loader, plain data only (no tags that build
objects), its nesting and its aliases measured on the parser's events before any tree is
built (an alias counts as all it repeats: a 415-byte "billion laughs" is refused, not
expanded), every string and array bounded by the schema, paper-row scores checked against
the track (``evaluation_workers.tracks.metric_ranges``), and every file it names read by ``bundle_files``' rule.
"""

from __future__ import annotations

import functools
import itertools
import json
import re
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time
from pathlib import Path
from typing import Any

import yaml
from jsonschema import Draft202012Validator

from evaluation_workers.tracks import get_track, names
from evaluation_workers.tracks.metric_ranges import score_refusal
from leaderboard.benchmarks.bundle_files import (
    BundleError,
    BundleFileRefused,
    read_limited,
    resolve_bundle_path,
    size_refusal,
)
from leaderboard.benchmarks.bundle_yaml import Key, Reader, key_path, read_plain

HERE = Path(__file__).resolve().parent
BUNDLES_DIR = HERE / "bundles"  # the repository's bundles: the demo site's benchmarks
SCHEMA_PATH = HERE / "bundle.schema.json"
LIMIT_FIELDS = ("per_day", "total", "in_flight", "min_interval")
MAX_BUNDLE_BYTES = 1 << 20
MAX_PROBLEMS = 50  # listed at most; a bundle with more is far from its shape


@dataclass(frozen=True)
class Labels:
    kind: str  # "pending", "synthetic" or "source"
    source: Path | None = None  # resolved and checked (bundle_files)
    public_subset: Path | None = None
    key: str = "labels"  # its key path in the bundle (``splits[0].labels``), for messages


@dataclass(frozen=True)
class SplitSpec:
    name: str
    description: str
    default: bool
    labels: Labels
    labels_public: bool
    accepting_submissions: bool
    results_visible_after: datetime | None
    starts_at: datetime | None
    freeze_at: datetime | None
    deadline: datetime | None
    reveal_at_deadline: bool
    limits: dict[str, dict[str, int | None]] = field(default_factory=dict)  # scope -> SplitLimit fields


@dataclass(frozen=True)
class Bundle:
    path: Path
    track: str
    title: str
    description: str
    order: int
    maintainers: tuple[str, ...]
    splits: tuple[SplitSpec, ...]
    paper_rows: tuple[dict[str, Any], ...]  # blocks as rankings.services.do_load_paper_rows takes them
    board: dict[str, Any]


@functools.cache
def schema() -> dict[str, Any]:
    return json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))


def bundled_paths() -> list[Path]:
    """The repository's bundles, by name."""
    return sorted(BUNDLES_DIR.glob("*.yaml"))


def moment(text: str) -> datetime:
    """An ISO 8601 date or moment of a bundle; a date is midnight UTC, a moment without offset is UTC."""
    text = text.strip()
    if len(text) == 10:
        return datetime.combine(date.fromisoformat(text), time(), tzinfo=UTC)
    parsed = datetime.fromisoformat(re.sub(r"\s+(?=[Zz+-]\d*)", "", text).replace("t", "T"))
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _schema_problem(reader: Reader, error: Any) -> None:
    path: Key = tuple(error.absolute_path)
    if error.validator == "required":
        named = f" (split {error.instance['name']!r})" if path[:1] == ("splits",) and len(path) == 2 and isinstance(
            error.instance.get("name"), str) else ""
        for missing in (k for k in error.validator_value if k not in error.instance):
            reader.problem((*path, missing), f"missing; it is required here{named}")
        return
    if error.validator == "additionalProperties" and isinstance(error.instance, dict):
        known = error.schema.get("properties", {})
        for extra in sorted(k for k in error.instance if k not in known):
            reader.problem((*path, extra), f"unknown key {extra!r}; expected one of: {', '.join(known)}")
        return
    if error.validator == "oneOf" and path and path[-1] == "labels":
        reader.problem(path, "expected exactly one of pending: true, synthetic: true or source: <path>")
        return
    moment_schema = schema()["$defs"]["moment"]
    if error.schema == moment_schema or (error.validator == "oneOf" and {"$ref": "#/$defs/moment"} in error.validator_value):
        reader.problem(path, f"expected an ISO 8601 date or moment (2026-03-01, 2026-03-01T12:00:00Z), "
                             f"but got {error.instance!r}")
        return
    # jsonschema's own messages quote the whole value, which may be long
    bounds = {"maxLength": "characters", "maxItems": "items", "maxProperties": "keys"}
    if error.validator in bounds:
        reader.problem(path, f"expected at most {error.validator_value:,} {bounds[error.validator]}, but got "
                             f"{len(error.instance):,}")
        return
    if error.validator == "uniqueItems":
        seen: set[str] = set()
        twice = next(i for i in map(json.dumps, error.instance) if i in seen or seen.add(i))
        reader.problem(path, f"expected each item once, but got {twice} more than once")
        return
    shown = repr(error.instance)
    short = shown if len(shown) <= 80 else f"{shown[:60]}... ({len(shown):,} characters)"
    reader.problem(path, error.message.replace(shown, short))


def _listed(problems: list[str]) -> BundleError:
    """The first ``MAX_PROBLEMS`` problems (and how many more there are)."""
    if len(problems) <= MAX_PROBLEMS:
        return BundleError(problems)
    return BundleError([*problems[:MAX_PROBLEMS], "... and more problems: fix these first"])


def _moments(data: dict[str, Any]) -> list[tuple[Key, str]]:
    """Every moment of a bundle that passed the schema, with its key path."""
    found: list[tuple[Key, str]] = []
    for i, split in enumerate(data["splits"]):
        if split.get("results_visible_after"):
            found.append((("splits", i, "results_visible_after"), split["results_visible_after"]))
        found += [(("splits", i, "phases", k), v) for k, v in split.get("phases", {}).items() if isinstance(v, str)]
    for b, block in enumerate(data.get("paper_rows", [])):
        if block.get("paper", {}).get("published"):
            found.append((("paper_rows", b, "paper", "published"), block["paper"]["published"]))
        found += [(("paper_rows", b, "rows", r, "paper", "published"), row["paper"]["published"])
                  for r, row in enumerate(block["rows"]) if row.get("paper", {}).get("published")]
    return found


def _check_dates(reader: Reader, where: Key, split: dict[str, Any]) -> None:
    phases = split.get("phases", {})
    moments = [(k, moment(phases[k])) for k in ("starts_at", "freeze_at", "deadline") if phases.get(k)]
    for (a, first), (b, second) in zip(moments, moments[1:]):
        wrong = second <= first if (a, b) == ("starts_at", "freeze_at") else second < first
        if wrong:
            reader.problem((*where, "phases", b), f"expected {b} after {a} (starts_at < freeze_at <= deadline), "
                                                 f"but got {a} {first:%Y-%m-%d %H:%M} and {b} "
                                                 f"{second:%Y-%m-%d %H:%M} UTC")


def _check_files(reader: Reader, where: Key, labels: dict[str, Any], path: Path) -> dict[str, Path]:
    """The files a split's ``labels`` name, resolved by ``bundle_files``' rule."""
    files = {}
    for key in ("source", "public_subset"):
        if labels.get(key):
            try:
                files[key] = resolve_bundle_path(path, labels[key], key=key_path((*where, key)))
            except BundleFileRefused as refused:
                reader.problem((*where, key), refused.reason)
    return files


def _check_scores(reader: Reader, where: Key, spec: Any, scores: dict[str, Any]) -> None:
    for key, value in scores.items():
        if refusal := score_refusal(spec, key, value):
            reader.problem((*where, "scores", key), refusal)


def _check(reader: Reader, data: dict[str, Any], path: Path) -> dict[tuple[int, str], Path]:
    """The rules the schema cannot say: the track, the splits, the dates, the files, the protocols,
    the scores. Returns the files named by split (``(split index, "source")``), resolved."""
    files: dict[tuple[int, str], Path] = {}
    for where, text in _moments(data):
        try:
            moment(text)
        except ValueError as exc:
            reader.problem(where, f"not a date: {exc}")
    if reader.problems:
        return files
    if data["track"] not in names():
        reader.problem(("track",), f"unknown track {data['track']!r}; installed: {', '.join(names())}")
        return files
    spec = get_track(data["track"])
    splits = data["splits"]
    seen: set[str] = set()
    for i, split in enumerate(splits):
        if split["name"] in seen:
            reader.problem(("splits", i, "name"), f"split {split['name']!r} is declared twice")
        seen.add(split["name"])
        _check_dates(reader, ("splits", i), split)
        for key, resolved in _check_files(reader, ("splits", i, "labels"), split["labels"], path).items():
            files[(i, key)] = resolved
    defaults = [s["name"] for s in splits if s.get("default")]
    if len(defaults) > 1:
        where = next(i for i, s in enumerate(splits) if s.get("default") and s["name"] == defaults[1])
        reader.problem(("splits", where, "default"), f"two default splits: {', '.join(defaults)}; expected one")
    for b, block in enumerate(data.get("paper_rows", [])):
        if block["split"] not in seen:
            reader.problem(("paper_rows", b, "split"), f"split {block['split']!r} is not declared in splits "
                                                      f"({', '.join(sorted(seen))})")
        known = ", ".join(p.key for p in spec.protocols) or "none"
        for where, protocol in [(("paper_rows", b, "protocol"), block.get("protocol"))] + [
                (("paper_rows", b, "rows", r, "protocol"), row.get("protocol")) for r, row in enumerate(block["rows"])]:
            if protocol and spec.protocol(protocol) is None:
                reader.problem(where, f"unknown protocol {protocol!r} for {spec.name}; its protocols: {known}")
        for r, row in enumerate(block["rows"]):
            _check_scores(reader, ("paper_rows", b, "rows", r), spec, row["scores"])
    board = data.get("board", {})
    sortable = set(spec.metrics) | {f"{g}/{m}" for g in spec.groups for m in spec.metrics}
    if board.get("metric") and board["metric"] not in spec.metrics:
        reader.problem(("board", "metric"), f"unknown metric {board['metric']!r}; {spec.name} has: "
                                           f"{', '.join(spec.metrics)}")
    for group in board.get("groups", []):
        if group not in spec.groups:
            reader.problem(("board", "groups"), f"unknown group {group!r}; {spec.name} has: {', '.join(spec.groups)}")
    if board.get("sort") and board["sort"] not in sortable:
        reader.problem(("board", "sort"), f"unknown column {board['sort']!r}; expected a metric of {spec.name} "
                                         f"or <group>/<metric> with a group of {', '.join(spec.groups)}")
    return files


def _split(data: dict[str, Any], i: int, any_default: bool, files: dict[tuple[int, str], Path]) -> SplitSpec:
    raw = data["labels"]
    kind = next(k for k in ("pending", "synthetic", "source") if k in raw)
    labels = Labels(kind, files.get((i, "source")), files.get((i, "public_subset")), key_path(("splits", i, "labels")))
    phases = data.get("phases", {})
    when = lambda v: moment(v) if v else None  # noqa: E731
    return SplitSpec(
        name=data["name"], description=data.get("description", ""),
        default=data.get("default", False) if any_default else i == 0, labels=labels,
        labels_public=data.get("labels_public", False),
        accepting_submissions=data.get("accepting_submissions", True),
        results_visible_after=when(data.get("results_visible_after")),
        starts_at=when(phases.get("starts_at")), freeze_at=when(phases.get("freeze_at")),
        deadline=when(phases.get("deadline")), reveal_at_deadline=phases.get("reveal_at_deadline", True),
        limits={scope: {f: values.get(f) for f in LIMIT_FIELDS} for scope, values in data.get("limits", {}).items()})


def _too_big(name: str, size: int) -> BundleError:
    return BundleError([f"{name}: {size_refusal(MAX_BUNDLE_BYTES, size, 'a bundle of ')}; a bundle declares a "
                        f"benchmark (long pages belong in files it names)"])


@functools.lru_cache(maxsize=16)
def _checked_data(text: str, name: str) -> tuple[dict[str, Any], dict[Key, int]]:
    """The plain data of a bundle that passed the schema, and its lines; ``BundleError``. Once per
    text (tests load the repository's bundles before each test); what depends on the disk is not here."""
    size = len(text.encode("utf-8"))
    if size > MAX_BUNDLE_BYTES:
        raise _too_big(name, size)
    reader = Reader(name)
    data = read_plain(text, reader)
    if not reader.problems:
        errors = itertools.islice(Draft202012Validator(schema()).iter_errors(data), MAX_PROBLEMS + 1)
        for error in sorted(errors, key=lambda e: list(map(str, e.path))):
            _schema_problem(reader, error)
    if reader.problems:
        raise _listed(reader.problems)
    return data, reader.lines


def parse_bundle(text: str, path: Path) -> Bundle:
    """The bundle of ``text`` (read from ``path``: the files it names are read from beside it, or
    from an allowed root); ``BundleError``."""
    data, lines = _checked_data(text, path.name)
    reader = Reader(path.name)
    reader.lines = lines
    files = _check(reader, data, path)
    if reader.problems:
        raise _listed(reader.problems)
    track = get_track(data["track"])
    any_default = any(s.get("default") for s in data["splits"])
    return Bundle(
        path=path, track=track.name, title=data["title"], description=data.get("description", track.description),
        order=data.get("order", 0), maintainers=tuple(data.get("maintainers", [])),
        splits=tuple(_split(s, i, any_default, files) for i, s in enumerate(data["splits"])),
        paper_rows=tuple(data.get("paper_rows", [])), board=data.get("board", {}))


def read_bundle(path: Path | str) -> Bundle:
    """The bundle in the file ``path``: refused over ``MAX_BUNDLE_BYTES`` before it is parsed."""
    path = Path(path)
    try:
        data = read_limited(path, MAX_BUNDLE_BYTES)
    except OSError as exc:
        raise BundleError([f"{path}: cannot be read: {exc.strerror}"]) from None
    if isinstance(data, int):
        raise _too_big(path.name, data)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BundleError([f"{path.name}: expected UTF-8 text, but byte {exc.start} is "
                           f"{data[exc.start:exc.start + 1]!r}"]) from None
    return parse_bundle(text, path)


def bundled_paper_rows() -> dict[str, list[dict[str, Any]]]:
    """The paper rows of the repository's bundles by track, read without checks (for data migrations)."""
    rows: dict[str, list[dict[str, Any]]] = {}
    for path in bundled_paths():
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        rows.setdefault(data["track"], []).extend(data.get("paper_rows", []))
    return rows
