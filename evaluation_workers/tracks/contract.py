"""The contract every installed track keeps (docs/writing-a-track.md), as rules an author runs.

``python -m evaluation_workers check-track NAME`` runs every rule on the track's own demo data
(``write_demo``: labels prepared as the site prepares them, its predictions validated and scored) and
names each rule that fails, in words; it needs neither pytest nor the service's checkout, only the core
and the track's package. ``tests/evaluation_workers/test_track_contract.py`` runs the same rules over
every installed track.
"""

from __future__ import annotations

import math
import re
import tempfile
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from evaluation_workers.results import labels_sha256, sha256_file
from evaluation_workers.tracks import get_track
from evaluation_workers.tracks.base import Track, no_progress

# The service's own metrics page: the built-in tracks' sections (a plugin brings its own, ``metrics_doc``).
METRICS_DOC = Path(__file__).resolve().parents[2] / "docs" / "metrics.md"


class Broken(Exception):
    """A rule does not hold; the message says what was found."""


class Skipped(Exception):
    """A rule cannot be checked here; the message says why."""


@dataclass
class Demo:
    """The track's demo split, prepared and scored once for every rule."""

    labels: Path
    predictions: Path
    prepared: Path
    manifest: dict[str, Any]
    result: dict[str, Any]
    outcomes: dict[str, Any]
    folder: Path


@dataclass(frozen=True)
class Rule:
    name: str  # a few words, what the check-track output and the tests call it
    says: str  # what a track must do to keep it
    check: Callable[[Track, Demo | None], None]
    needs_demo: bool = True


@dataclass
class Finding:
    rule: Rule
    status: str  # "passed", "failed" or "skipped"
    detail: str = ""


def _require(condition: bool, detail: str) -> None:
    if not condition:
        raise Broken(detail)


def _built_in(track: Track) -> bool:
    return str(getattr(track.score, "__module__", "")).startswith("evaluation_workers.tracks.")


def _says_what_it_is(track: Track, demo: Demo | None) -> None:
    missing = [f for f in ("title", "description", "scorer_version", "unit") if not getattr(track, f)]
    _require(not missing, f"empty: {', '.join(missing)}")
    _require(track.primary_metric in track.metrics,
             f"primary_metric {track.primary_metric!r} is not one of metrics {list(track.metrics)}")
    _require(track.chart in ("bars", "radar"), f"chart is {track.chart!r}")
    _require(track.max_inflated_bytes > 0, f"max_inflated_bytes is {track.max_inflated_bytes}")
    if track.detail_rows is not None:
        extra = sorted(set(track.detail_rows.metrics) - set(track.metrics))
        _require(not extra, f"detail_rows show metrics the track does not have: {extra}")


def _names_its_files(track: Track, demo: Demo | None) -> None:
    _require(bool(track.upload_suffixes) and all(s.startswith(".") for s in track.upload_suffixes),
             f"upload_suffixes are {list(track.upload_suffixes)}")
    _require(track.name_refusal("predictions" + track.upload_suffixes[0]) is None,
             f"name_refusal refuses predictions{track.upload_suffixes[0]}")
    _require(track.name_refusal("predictions.exe") is not None, "name_refusal accepts predictions.exe")


def _doc(track: Track, path: Path | None, field_name: str) -> str:
    _require(path is not None, f"{field_name} is not set")
    assert path is not None
    if not Path(path).is_file():
        if _built_in(track) and not METRICS_DOC.is_file():
            raise Skipped(f"the built-in tracks' pages are the repository's docs/, not installed with the core "
                          f"({path})")
        raise Broken(f"{field_name} {path} is not a file")
    return Path(path).read_text(encoding="utf-8")


def _has_a_format_page(track: Track, demo: Demo | None) -> None:
    text = _doc(track, track.format_doc, "format_doc")
    _require(text.startswith("# "), f"{track.format_doc} starts with {text[:20]!r}, not a '# ' title")


def _has_a_metrics_section(track: Track, demo: Demo | None) -> None:
    if track.metrics_doc is not None:
        _doc(track, track.metrics_doc, "metrics_doc")
        return
    if not _built_in(track):
        raise Broken("metrics_doc is not set (a plugin's section of /metrics/: how each metric is computed)")
    if not METRICS_DOC.is_file():
        raise Skipped("the built-in tracks' sections are the repository's docs/metrics.md, not installed")
    sections = {re.sub(r"[^a-z0-9]+", "-", h.lower()).strip("-")
                for h in re.findall(r"^## (.+)$", METRICS_DOC.read_text(encoding="utf-8"), flags=re.M)}
    _require(track.name in sections, f"docs/metrics.md has no section '## ...' for {track.name}")


def _has_intervals(track: Track, demo: Demo | None) -> None:
    _require(track.statistic is not None and track.units_of is not None,
             "statistic and units_of are not both set (every track has intervals by scene)")


def _writes_a_demo(track: Track, demo: Demo | None) -> None:
    """Checked while the demo is made (``make_demo``): reaching here means it was."""


def _manifest_is_public_facts(track: Track, demo: Demo | None) -> None:
    assert demo is not None
    manifest = demo.manifest
    _require(manifest == track.manifest(demo.prepared),
             "manifest(prepared labels) differs from what prepare_labels returned")
    _require(manifest.get("track") == track.name, f"manifest['track'] is {manifest.get('track')!r}")
    scenes = manifest.get("scenes")
    _require(isinstance(scenes, (list, dict)) and bool(scenes),
             "manifest['scenes'] is not a non-empty list or object of scene ids (partitions and intervals "
             "draw scenes)")


def _manifest_matches_its_schema(track: Track, demo: Demo | None) -> None:
    assert demo is not None
    schema = track.manifest_schema
    if schema is None:
        raise Skipped("no manifest_schema: the API describes the manifest as an object (optional)")
    try:
        import jsonschema
    except ImportError:  # the core does not need it: check what a schema says at the top level
        missing = [k for k in schema.get("required", []) if k not in demo.manifest]
        _require(not missing, f"the manifest lacks required keys {missing}")
        unknown = sorted(set(demo.manifest) - set(schema.get("properties", demo.manifest)))
        _require(not unknown or schema.get("additionalProperties", True) is not False,
                 f"the manifest has keys the schema does not allow: {unknown}")
        return
    try:
        jsonschema.validate(demo.manifest, dict(schema))
    except jsonschema.ValidationError as exc:
        raise Broken(f"the manifest does not match manifest_schema: {exc.message}") from None


def _validates_its_demo(track: Track, demo: Demo | None) -> None:
    assert demo is not None
    summary = track.validate(demo.predictions, demo.manifest)
    _require(isinstance(summary, dict), f"validate returned a {type(summary).__name__}, not a dict")


def _scores_a_full_result(track: Track, demo: Demo | None) -> None:
    assert demo is not None
    result = demo.result
    _require(result.get("track") == track.name and result.get("scorer_version") == track.scorer_version,
             f"the result says track {result.get('track')!r}, scorer {result.get('scorer_version')!r}")
    metrics = result.get("metrics", {})
    _require(track.primary_metric in metrics, f"the result has no {track.primary_metric!r}")
    _require(set(metrics) <= set(track.metrics), f"metrics not declared: {sorted(set(metrics) - set(track.metrics))}")
    _require(set(result.get("breakdown", {})) <= set(track.groups),
             f"breakdown groups not declared: {sorted(set(result.get('breakdown', {})) - set(track.groups))}")
    value = metrics[track.primary_metric]
    _require(value is None or 0.0 <= value <= 1.0, f"{track.primary_metric} is {value}, not a fraction")
    _require(result.get("predictions_sha256") == sha256_file(demo.predictions),
             "predictions_sha256 is not the sha256 of the predictions file")


def _checksums_what_was_loaded(track: Track, demo: Demo | None) -> None:
    assert demo is not None
    want = labels_sha256(demo.labels)
    _require(demo.result.get("labels_sha256") == want,
             f"labels_sha256 is {demo.result.get('labels_sha256')!r}, the site records {want!r}: sha256_tree of "
             "the labels as loaded, less manifest.json and .cache (evaluation_workers.plugin.labels_sha256)")


def _statistic_gives_the_scored_values(track: Track, demo: Demo | None) -> None:
    assert demo is not None
    if track.statistic is None or track.units_of is None:
        raise Skipped("no statistic (see the rule on intervals)")
    _require(bool(demo.outcomes), "score(..., outcomes={}) left the outcomes empty")
    n = track.units_of(demo.outcomes)
    values = track.statistic(demo.outcomes)(np.ones((1, n), dtype=np.float64))
    for metric, scored in demo.result["metrics"].items():
        if scored is not None and metric in values:
            got = float(np.asarray(values[metric])[0])
            _require(math.isclose(got, scored, rel_tol=0, abs_tol=1e-12),
                     f"{metric}: the statistic with every unit once gives {got}, the result {scored}")
    if track.scenes_of is not None:
        shape = np.asarray(track.scenes_of(demo.outcomes)).shape
        _require(shape == (n,), f"scenes_of gives shape {shape}, not ({n},)")


def _stacks_two_results(track: Track, demo: Demo | None) -> None:
    assert demo is not None
    if track.stack is None:
        raise Skipped("no stack: the track's pairs of results get no paired test")
    if track.statistic is None or track.units_of is None:
        raise Skipped("no statistic (see the rule on intervals)")
    n = track.units_of(demo.outcomes)
    halves = track.statistic(track.stack(demo.outcomes, demo.outcomes))(np.eye(2).repeat(n, axis=1))
    for metric, scored in demo.result["metrics"].items():
        if scored is not None and metric in halves:
            got = [float(v) for v in np.asarray(halves[metric])]
            _require(all(math.isclose(v, scored, rel_tol=0, abs_tol=1e-12) for v in got),
                     f"{metric}: the stack of the outcomes with themselves gives {got} with either half's units "
                     f"alone, the result {scored}")


def _samples_pass_its_validation(track: Track, demo: Demo | None) -> None:
    assert demo is not None
    _require(bool(track.samples), "samples is empty (the format page offers at least one file to download)")
    for form, sample in track.samples.items():
        path = demo.folder / "samples" / form / sample.file_name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(sample.build(demo.manifest))
        _require(track.name_refusal(path.name) is None, f"sample {form!r}: {track.name_refusal(path.name)}")
        track.validate(path, demo.manifest)


RULES: tuple[Rule, ...] = (
    Rule("says what it is", "a title, a description, a scorer version, a unit; its primary metric among its "
         "metrics; chart bars or radar; a positive max_inflated_bytes", _says_what_it_is, needs_demo=False),
    Rule("names the files it accepts", "upload_suffixes start with a dot, and name_refusal accepts them "
         "and refuses others", _names_its_files, needs_demo=False),
    Rule("has a format page", "format_doc: a Markdown file that starts with a '# ' title", _has_a_format_page,
         needs_demo=False),
    Rule("has a metrics section", "metrics_doc: a Markdown file saying how each metric is computed "
         "(built-in tracks: their section of docs/metrics.md)", _has_a_metrics_section, needs_demo=False),
    Rule("has intervals by scene", "statistic and units_of are set", _has_intervals, needs_demo=False),
    Rule("writes a demo", "write_demo(folder, split) writes labels and predictions that prepare_labels, "
         "manifest and score take", _writes_a_demo),
    Rule("its manifest is public facts", "prepare_labels returns manifest(prepared labels), naming the track "
         "and its scenes", _manifest_is_public_facts),
    Rule("its manifest matches its schema", "the manifest matches manifest_schema, when there is one",
         _manifest_matches_its_schema),
    Rule("validates its demo predictions", "validate(predictions, manifest) returns a summary dict",
         _validates_its_demo),
    Rule("scores a full result", "the result names the track and scorer version, the predictions' sha256, "
         "declared metrics and groups, a primary value in [0, 1]", _scores_a_full_result),
    Rule("checksums the labels as loaded", "labels_sha256 equals sha256_tree of the labels as loaded, less "
         "manifest.json and .cache (plugin.labels_sha256)", _checksums_what_was_loaded),
    Rule("its statistic gives the scored values", "statistic(outcomes) on one resample of every unit once "
         "gives each scored metric exactly; scenes_of one scene per unit", _statistic_gives_the_scored_values),
    Rule("stacks two results for the paired test", "statistic(stack(outcomes, outcomes)) with either half's "
         "units alone gives each scored metric exactly, when there is a stack", _stacks_two_results),
    Rule("its samples pass its own validation", "at least one sample, each named as the track accepts and "
         "valid against the demo's manifest", _samples_pass_its_validation),
)


def make_demo(track: Track, folder: Path) -> Demo:
    """The demo split as the site prepares it, its predictions scored with outcomes; ``Broken`` naming the
    step that failed."""
    if track.write_demo is None:
        raise Broken("write_demo is not set (the checks, and a bundle's demo split, run on its data)")
    step = "write_demo"
    try:
        labels, predictions = track.write_demo(folder / "demo", "val")
        step = "prepare_labels"
        prepared = folder / "prepared"
        manifest = track.prepare_labels(labels, prepared)
        step = "score"
        outcomes: dict[str, Any] = {}
        result = track.score(prepared, predictions, no_progress, outcomes)
    except Exception as exc:
        raise Broken(f"{step} raised {type(exc).__name__}: {exc}\n{traceback.format_exc(limit=-3)}") from exc
    return Demo(labels=Path(labels), predictions=Path(predictions), prepared=prepared, manifest=manifest,
                result=result, outcomes=outcomes, folder=folder)


def run_rule(rule: Rule, track: Track, demo: Demo | None, why_no_demo: str = "") -> Finding:
    if rule.needs_demo and demo is None:
        if rule.check is _writes_a_demo:
            return Finding(rule, "failed", why_no_demo)
        return Finding(rule, "skipped", "no demo (see 'writes a demo')")
    try:
        rule.check(track, demo)
    except Skipped as exc:
        return Finding(rule, "skipped", str(exc))
    except Broken as exc:
        return Finding(rule, "failed", str(exc))
    except Exception as exc:  # a rule that raises is a broken rule: say what, never a traceback alone
        return Finding(rule, "failed", f"{type(exc).__name__}: {exc}")
    return Finding(rule, "passed")


def check(name: str, folder: Path | None = None) -> Iterator[Finding]:
    """Every rule on the installed track ``name``, in order (``UnknownTrack`` for a name not installed).
    ``folder``: where the demo is written (a temporary folder, removed after, by default)."""
    track = get_track(name)
    with tempfile.TemporaryDirectory(prefix=f"check-{name}-") as tmp:
        where = Path(folder) if folder is not None else Path(tmp)
        where.mkdir(parents=True, exist_ok=True)
        try:
            demo: Demo | None = make_demo(track, where)
            why = ""
        except Broken as exc:
            demo, why = None, str(exc)
        for rule in RULES:
            yield run_rule(rule, track, demo, why)


@dataclass
class Report:
    findings: list[Finding] = field(default_factory=list)

    @property
    def failed(self) -> list[Finding]:
        return [f for f in self.findings if f.status == "failed"]

    def lines(self) -> Iterator[str]:
        for f in self.findings:
            mark = {"passed": "ok     ", "failed": "FAILED ", "skipped": "skipped"}[f.status]
            yield f"  {mark} {f.rule.name}" + (f": {f.rule.says}" if f.status == "failed" else "")
            for line in f.detail.splitlines() if f.status != "passed" else ():
                yield f"            {line}"
        counts = {s: sum(f.status == s for f in self.findings) for s in ("passed", "failed", "skipped")}
        yield f"{len(self.findings)} rules: {counts['passed']} passed, {counts['failed']} failed, " \
              f"{counts['skipped']} skipped"
