"""Benchmark bundles: one YAML file declares a benchmark (its splits, their labels, phases and
limits, its paper rows and its board's default view). Here they are read and checked;
``bundle_apply`` writes them to the database.

The shape is the published JSON Schema ``bundle.schema.json`` (served at
``/schemas/benchmark-bundle.json``); every problem names the file, the line and the
key path (``sqa3d.yaml:12: splits[0].phases.deadline: ...``).
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time
from pathlib import Path
from typing import Any

import yaml
from jsonschema import Draft202012Validator

from evaluation_workers.tracks import get_track, names
from leaderboard.benchmarks import bundle_participation
from leaderboard.benchmarks.bundle_participation import AnnouncementSpec, ParticipationSpec, WebhookSpec

HERE = Path(__file__).resolve().parent
BUNDLES_DIR = HERE / "bundles"  # the repository's bundles: the demo site's benchmarks
SCHEMA_PATH = HERE / "bundle.schema.json"
LIMIT_FIELDS = ("per_day", "total", "in_flight", "min_interval")

Key = tuple[str | int, ...]


class BundleError(ValueError):
    """A bundle that cannot be loaded; ``problems`` are its lines, each ``file:line: key.path: what``."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__("\n".join(problems))


@dataclass(frozen=True)
class Labels:
    kind: str  # "pending", "synthetic" or "source"
    source: Path | None = None
    public_subset: Path | None = None


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
    # Who may submit (None: anyone, as before), messages to the participants, the host's webhook.
    participation: ParticipationSpec | None = None
    announcements: tuple[AnnouncementSpec, ...] = ()
    webhook: WebhookSpec | None = None


@functools.cache
def schema() -> dict[str, Any]:
    return json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))


def bundled_paths() -> list[Path]:
    """The repository's bundles, by name."""
    return sorted(BUNDLES_DIR.glob("*.yaml"))


def key_path(path: Key) -> str:
    """``splits[0].phases.deadline`` for ``("splits", 0, "phases", "deadline")``."""
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or "(top)"


def moment(text: str) -> datetime:
    """An ISO 8601 date or moment of a bundle; a date is midnight UTC, a moment without offset is UTC."""
    text = text.strip()
    if len(text) == 10:
        return datetime.combine(date.fromisoformat(text), time(), tzinfo=UTC)
    parsed = datetime.fromisoformat(re.sub(r"\s+(?=[Zz+-]\d*)", "", text).replace("t", "T"))
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


class _Reader:
    """Plain data from a YAML node tree, with each key path's line (1-based)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.lines: dict[Key, int] = {}
        self.problems: list[str] = []
        self._scalars = yaml.SafeLoader("")

    def problem(self, path: Key, message: str) -> None:
        self.problems.append(f"{self.name}:{self.line(path)}: {key_path(path)}: {message}")

    def line(self, path: Key) -> int:
        while path not in self.lines and path:
            path = path[:-1]
        return self.lines.get(path, 1)

    def data(self, node: yaml.Node, path: Key = ()) -> Any:
        self.lines.setdefault(path, node.start_mark.line + 1)
        if isinstance(node, yaml.MappingNode):
            out: dict[str, Any] = {}
            for key_node, value_node in node.value:
                key = str(self._scalars.construct_object(key_node))
                if key in out:
                    self.lines[(*path, key)] = key_node.start_mark.line + 1
                    self.problem((*path, key), "the key is given twice")
                self.lines[(*path, key)] = key_node.start_mark.line + 1
                out[key] = self.data(value_node, (*path, key))
            return out
        if isinstance(node, yaml.SequenceNode):
            return [self.data(item, (*path, i)) for i, item in enumerate(node.value)]
        if node.tag == "tag:yaml.org,2002:timestamp":
            return node.value  # checked as text by the schema, read by ``moment``
        return self._scalars.construct_object(node)


def _schema_problem(reader: _Reader, error: Any) -> None:
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
    reader.problem(path, error.message)


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
    return found + bundle_participation.moments(data)


def _check_dates(reader: _Reader, where: Key, split: dict[str, Any]) -> None:
    phases = split.get("phases", {})
    moments = [(k, moment(phases[k])) for k in ("starts_at", "freeze_at", "deadline") if phases.get(k)]
    for (a, first), (b, second) in zip(moments, moments[1:]):
        wrong = second <= first if (a, b) == ("starts_at", "freeze_at") else second < first
        if wrong:
            reader.problem((*where, "phases", b), f"expected {b} after {a} (starts_at < freeze_at <= deadline), "
                                                 f"but got {a} {first:%Y-%m-%d %H:%M} and {b} "
                                                 f"{second:%Y-%m-%d %H:%M} UTC")


def _check(reader: _Reader, data: dict[str, Any], path: Path) -> str:
    """The rules the schema cannot say: the track, the splits, the dates, the paths, the protocols, the
    participation section (``bundle_participation``). Returns the terms' text (empty without terms)."""
    base = path.parent
    for where, text in _moments(data):
        try:
            moment(text)
        except ValueError as exc:
            reader.problem(where, f"not a date: {exc}")
    if reader.problems:
        return ""
    terms = bundle_participation.check(reader.problem, data, path)
    if data["track"] not in names():
        reader.problem(("track",), f"unknown track {data['track']!r}; installed: {', '.join(names())}")
        return terms
    spec = get_track(data["track"])
    splits = data["splits"]
    seen: set[str] = set()
    for i, split in enumerate(splits):
        if split["name"] in seen:
            reader.problem(("splits", i, "name"), f"split {split['name']!r} is declared twice")
        seen.add(split["name"])
        _check_dates(reader, ("splits", i), split)
        for key in ("source", "public_subset"):
            relative = split["labels"].get(key)
            if relative and not (base / relative).exists():
                reader.problem(("splits", i, "labels", key), f"{base / relative} does not exist")
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
    return terms


def _split(data: dict[str, Any], first: bool, any_default: bool, base: Path) -> SplitSpec:
    raw = data["labels"]
    kind = next(k for k in ("pending", "synthetic", "source") if k in raw)
    labels = Labels(kind, base / raw["source"] if "source" in raw else None,
                    base / raw["public_subset"] if "public_subset" in raw else None)
    phases = data.get("phases", {})
    when = lambda v: moment(v) if v else None  # noqa: E731
    return SplitSpec(
        name=data["name"], description=data.get("description", ""),
        default=data.get("default", False) if any_default else first, labels=labels,
        labels_public=data.get("labels_public", False),
        accepting_submissions=data.get("accepting_submissions", True),
        results_visible_after=when(data.get("results_visible_after")),
        starts_at=when(phases.get("starts_at")), freeze_at=when(phases.get("freeze_at")),
        deadline=when(phases.get("deadline")), reveal_at_deadline=phases.get("reveal_at_deadline", True),
        limits={scope: {f: values.get(f) for f in LIMIT_FIELDS} for scope, values in data.get("limits", {}).items()})


def parse_bundle(text: str, path: Path) -> Bundle:
    """The bundle of ``text`` (read from ``path``: relative label paths start beside it); ``BundleError``."""
    reader = _Reader(path.name)
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise BundleError([f"{path.name}:{mark.line + 1 if mark else 1}: not YAML: {exc}"]) from None
    if node is None:
        raise BundleError([f"{path.name}:1: the file is empty; expected a bundle (see the schema)"])
    data = reader.data(node)
    if not reader.problems:
        for error in sorted(Draft202012Validator(schema()).iter_errors(data), key=lambda e: list(map(str, e.path))):
            _schema_problem(reader, error)
    terms = _check(reader, data, path) if not reader.problems else ""
    if reader.problems:
        raise BundleError(reader.problems)
    track = get_track(data["track"])
    any_default = any(s.get("default") for s in data["splits"])
    participation, announcements, webhook = bundle_participation.parse(data, terms)
    return Bundle(
        path=path, track=track.name, title=data["title"], description=data.get("description", track.description),
        order=data.get("order", 0), maintainers=tuple(data.get("maintainers", [])),
        splits=tuple(_split(s, i == 0, any_default, path.parent) for i, s in enumerate(data["splits"])),
        paper_rows=tuple(data.get("paper_rows", [])), board=data.get("board", {}),
        participation=participation, announcements=announcements, webhook=webhook)


def read_bundle(path: Path | str) -> Bundle:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise BundleError([f"{path}: cannot be read: {exc.strerror}"]) from None
    bundle = _parsed(text, path)
    if bundle.participation and bundle.participation.terms_file and not _same_terms(bundle):
        bundle = parse_bundle(text, path)  # the terms file changed beside an unchanged bundle
    return bundle


def _same_terms(bundle: Bundle) -> bool:
    from leaderboard.benchmarks.bundle_files import read_bundle_text

    assert bundle.participation is not None
    try:
        return read_bundle_text(bundle.path, bundle.participation.terms_file,
                                key="participation.terms") == bundle.participation.terms_text
    except BundleError:
        return False


@functools.lru_cache(maxsize=16)
def _parsed(text: str, path: Path) -> Bundle:
    """``parse_bundle``, once per text (tests load the repository's bundles before each test)."""
    return parse_bundle(text, path)


def bundled_paper_rows() -> dict[str, list[dict[str, Any]]]:
    """The paper rows of the repository's bundles by track, read without checks (for data migrations)."""
    rows: dict[str, list[dict[str, Any]]] = {}
    for path in bundled_paths():
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        rows.setdefault(data["track"], []).extend(data.get("paper_rows", []))
    return rows
