"""Tracks are found through the ``scene_leaderboards.tracks`` entry points: a track package pip
installs is scored without a change to the service; one that is broken is named, never a crash."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from importlib.metadata import entry_points
from pathlib import Path

import pytest

from evaluation_workers import tracks
from evaluation_workers.tracks import ENTRY_POINT_GROUP, UnknownTrack, get_track, names

ROOT = Path(__file__).resolve().parents[2]
PLUGIN = ROOT / "tests" / "fixtures" / "track_plugin"


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The example track package, installed by pip into a folder of this module's."""
    target = tmp_path_factory.mktemp("site-packages")
    source = tmp_path_factory.mktemp("source") / "track_plugin"  # a copy: a build writes beside its sources
    shutil.copytree(PLUGIN, source)
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                    "--no-index", "--target", str(target), str(source)],
                   check=True, cwd=source, capture_output=True, timeout=120)
    return target


def run_python(installed: Path, code: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(installed), str(ROOT)])}
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=env, timeout=120)


def test_the_built_in_tracks_are_entry_points_of_the_installed_service() -> None:
    declared = {ep.name: ep.value for ep in entry_points(group=ENTRY_POINT_GROUP)}
    for name in ("sqa3d", "mmscan-vg", "openscan"):
        assert declared[name] == f"evaluation_workers.tracks.{name.replace('-', '_')}:TRACK"
        assert get_track(name).name == name
    assert names()[:3] == ["sqa3d", "mmscan-vg", "openscan"]  # the source tree's declared order


def test_an_unknown_track_is_a_key_error_naming_the_installed_ones() -> None:
    with pytest.raises(UnknownTrack, match=r"Unknown track 'nope'; installed tracks: sqa3d, mmscan-vg, openscan"):
        get_track("nope")
    assert not tracks.is_installed("nope")


def test_an_installed_package_is_found_and_scores_from_the_command_line(installed: Path, tmp_path: Path) -> None:
    labels, predictions = tmp_path / "labels.json", tmp_path / "predictions.json"
    labels.write_text("[1, 2, 3]")
    predictions.write_text("[0.5, 1.5]")
    listed = run_python(installed, "from evaluation_workers.tracks import names; print(names())")
    assert "'example'" in listed.stdout, listed.stderr
    scored = subprocess.run([sys.executable, "-m", "evaluation_workers", "score", "--quiet", "--track", "example",
                             "--labels", str(labels), "--predictions", str(predictions)],
                            capture_output=True, text=True, timeout=120, cwd=tmp_path,
                            env={**os.environ, "PYTHONPATH": os.pathsep.join([str(installed), str(ROOT)])})
    assert scored.returncode == 0, scored.stderr
    result = json.loads(scored.stdout)
    assert result["track"] == "example" and result["metrics"]["mean"] == 1.0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["labels.json", "predictions.json"]  # nothing left behind


@pytest.mark.parametrize(("name", "expected"), [
    ("misnamed", "is registered as 'misnamed' but calls itself 'example'"),
    ("not-a-track", "is a object, expected an evaluation_workers.tracks.base.Track"),
    ("broken", "No module named 'example_track_missing'"),
])
def test_a_broken_plugin_is_named_and_the_others_still_load(installed: Path, name: str, expected: str) -> None:
    code = ("import sys\nfrom evaluation_workers.tracks import all_tracks, get_track\n"
            "print(sorted(t.name for t in all_tracks()))\n"
            "try:\n    get_track(sys.argv[1])\nexcept Exception as e:\n    print(type(e).__name__, e)\n")
    out = run_python(installed, code, name)
    assert out.returncode == 0, out.stderr
    loaded, error = out.stdout.splitlines()
    assert loaded == str(sorted([*names(), "example", "incomplete"]))  # every other installed track, and the plugins that load
    assert expected in error
    assert f"Track plugin {name!r} failed to load" in out.stderr  # logged, not hidden


def check_track(installed: Path, name: str) -> subprocess.CompletedProcess[str]:
    """The documented command for a track's author (docs/writing-a-track.md), on a package installed outside
    the checkout."""
    return subprocess.run([sys.executable, "-m", "evaluation_workers", "check-track", name], capture_output=True,
                          text=True, timeout=120, cwd=installed,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join([str(installed), str(ROOT)])})


def test_an_installed_plugin_passes_the_track_contract_with_the_documented_command(installed: Path) -> None:
    out = check_track(installed, "example")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "ok      scores a full result" in out.stdout and "0 failed" in out.stdout


def test_a_plugin_that_breaks_the_contract_is_told_each_rule_in_words(installed: Path) -> None:
    out = check_track(installed, "incomplete")
    assert out.returncode == 1, out.stdout + out.stderr
    failed = [line.split("FAILED")[1].split(":")[0].strip() for line in out.stdout.splitlines() if "FAILED" in line]
    assert failed == ["has a format page", "its manifest is public facts", "scores a full result",
                      "its samples pass its own validation"]
    assert "format_doc is not set" in out.stdout and "the result says track 'example'" in out.stdout
    assert "breaks 4 rule(s) of the track contract: has a format page; its manifest is public facts;" in out.stderr
    unknown = check_track(installed, "nope")
    assert unknown.returncode == 2 and "Unknown track 'nope'" in unknown.stderr
