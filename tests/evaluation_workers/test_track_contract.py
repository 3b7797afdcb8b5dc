"""The contract every installed track keeps (docs/writing-a-track.md): the built-in tracks and
every plugin pass the same tests, from the track's own demo data to a scored result."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import jsonschema
import numpy as np
import pytest

from evaluation_workers.results import sha256_file, sha256_tree
from evaluation_workers.tracks import get_track, names
from evaluation_workers.tracks.base import Track, no_progress

METRICS_DOC = Path(__file__).resolve().parents[2] / "docs" / "metrics.md"


@pytest.fixture(scope="module", params=names())
def demo(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The track's demo labels, prepared as the site prepares them, and its demo predictions scored."""
    track = get_track(request.param)
    folder = tmp_path_factory.mktemp(track.name)
    assert track.write_demo is not None, f"{track.name}: a track provides write_demo for demo splits and tests"
    labels, predictions = track.write_demo(folder / "demo", "val")
    prepared = folder / "prepared"
    manifest = track.prepare_labels(labels, prepared)
    outcomes: dict[str, Any] = {}
    result = track.score(prepared, predictions, no_progress, outcomes)
    return {"track": track, "labels": labels, "prepared": prepared, "predictions": predictions, "manifest": manifest,
            "result": result, "outcomes": outcomes, "folder": folder}


def test_its_facts_are_consistent(demo: dict[str, Any]) -> None:
    track: Track = demo["track"]
    assert track.primary_metric in track.metrics
    assert track.scorer_version and track.title and track.description and track.unit
    assert track.upload_suffixes and all(s.startswith(".") for s in track.upload_suffixes)
    assert track.name_refusal("predictions" + track.upload_suffixes[0]) is None
    assert track.name_refusal("predictions.exe") is not None
    assert track.chart in ("bars", "radar")
    assert track.format_doc is not None and track.format_doc.read_text(encoding="utf-8").startswith("# ")
    # /metrics/ has a section on it (#<name>): docs/metrics.md's, or the track's own
    sections = {re.sub(r"[^a-z0-9]+", "-", h.lower()).strip("-")
                for h in re.findall(r"^## (.+)$", METRICS_DOC.read_text(encoding="utf-8"), flags=re.M)}
    assert track.name in sections or (track.metrics_doc is not None and track.metrics_doc.is_file())
    assert track.statistic and track.units_of and track.max_inflated_bytes > 0
    if track.detail_rows is not None:
        assert set(track.detail_rows.metrics) <= set(track.metrics)


def test_its_manifest_is_public_facts_that_match_its_schema(demo: dict[str, Any]) -> None:
    track: Track = demo["track"]
    manifest = demo["manifest"]
    assert manifest == track.manifest(demo["prepared"])
    assert manifest.get("track") == track.name
    assert isinstance(manifest.get("scenes"), (list, dict)) and manifest["scenes"]  # partitions draw scenes
    assert track.manifest_schema is not None
    jsonschema.validate(manifest, dict(track.manifest_schema))


def test_its_demo_predictions_validate_and_score_to_a_full_result(demo: dict[str, Any]) -> None:
    track: Track = demo["track"]
    summary = track.validate(demo["predictions"], demo["manifest"])
    assert isinstance(summary, dict)
    result = demo["result"]
    assert result["track"] == track.name and result["scorer_version"] == track.scorer_version
    # the checksum of the labels as the maintainer loaded them (a prepared folder may add caches)
    assert result["labels_sha256"] == sha256_tree(demo["labels"])
    assert result["predictions_sha256"] == sha256_file(demo["predictions"])
    assert track.primary_metric in result["metrics"] and set(result["metrics"]) <= set(track.metrics)
    assert set(result["breakdown"]) <= set(track.groups)
    value = result["metrics"][track.primary_metric]
    assert value is None or 0.0 <= value <= 1.0


def test_its_statistic_on_the_whole_split_is_the_scored_value(demo: dict[str, Any]) -> None:
    """What the bootstrap resamples is the metric itself: all units once give the exact numbers; and
    the paired test's stack of two results holds each: one half's units alone give its numbers."""
    track: Track = demo["track"]
    outcomes = demo["outcomes"]
    assert outcomes, f"{track.name}: score(..., outcomes={{}}) fills the per-unit outcomes"
    n = track.units_of(outcomes)
    values = track.statistic(outcomes)(np.ones((1, n), dtype=np.float64))
    result = demo["result"]
    for metric, scored in result["metrics"].items():
        if scored is not None and metric in values:
            assert float(np.asarray(values[metric])[0]) == pytest.approx(scored, abs=1e-12), metric
    if track.scenes_of is not None:
        assert np.asarray(track.scenes_of(outcomes)).shape == (n,)
    # The paired test's stack of the outcomes with themselves: either half alone is the whole split again.
    assert track.stack is not None, f"{track.name}: Track.stack gives the paired test"
    stacked = track.statistic(track.stack(outcomes, outcomes))
    halves = stacked(np.concatenate([np.eye(2).repeat(n, axis=1)]))  # rows: A's units only, B's units only
    for metric, scored in result["metrics"].items():
        if scored is not None and metric in halves:
            assert np.asarray(halves[metric]) == pytest.approx([scored, scored], abs=1e-12), metric


def test_its_samples_pass_its_own_validation(demo: dict[str, Any]) -> None:
    track: Track = demo["track"]
    assert track.samples, f"{track.name}: the format page offers at least one sample"
    for form, sample in track.samples.items():
        path = demo["folder"] / "samples" / form / sample.file_name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(sample.build(demo["manifest"]))
        assert track.name_refusal(path.name) is None
        track.validate(path, demo["manifest"])
