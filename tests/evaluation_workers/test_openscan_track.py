"""OpenScan track end to end: formats, label cache, missing scenes, and hostile predictions."""

from __future__ import annotations

import argparse
import io
import json
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from evaluation_workers.errors import PredictionFormatError
from evaluation_workers.synthetic import openscan as synthetic
from evaluation_workers.tracks import get_track
from evaluation_workers.tracks.openscan import TRACK, class_keys, score, validate
from evaluation_workers.tracks.openscan.labels import CACHE_FILE, manifest, prepare_labels

ROOT = Path(__file__).resolve().parents[2]
FEW_SCENES = ("No confidence intervals: {} scenes scored, and an interval needs at least 150 (the bootstrap "
              "resamples scenes).")


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("openscan")
    args = argparse.Namespace(
        out=out,
        scenes=3,
        points=4000,
        instances=(8, 12),
        masks=20,
        aspects=["material", "manner"],
        format="both",
        semantic=True,
        missing=0,
        seed=3,
    )
    written = synthetic.generate(args)
    written["prepared"] = out / "prepared"
    prepare_labels(written["labels"], written["prepared"])
    return written


def _npz(**arrays: Any) -> bytes:
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    return buf.getvalue()


def _zip(path: Path, members: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(path, "w") as zf:
        for name, blob in members.items():
            zf.writestr(name, blob)
    return path


def _scene(data: dict[str, Path]) -> tuple[str, int]:
    man = manifest(data["labels"])
    scene = man["aspects"]["material"][0]
    return scene, man["scenes"][scene]


def test_it_registers_the_track_with_the_spec_facts() -> None:
    assert get_track("openscan") is TRACK
    assert TRACK.groups == (
        "affordance",
        "property",
        "type",
        "manner",
        "synonym",
        "requirement",
        "element",
        "material",
    )
    assert TRACK.metric_families == (("AP", "AP50", "AP25"), ("mIoU", "mAcc")) and TRACK.wants_gpu


def test_it_scores_both_formats_alike_and_from_the_cache(data: dict[str, Path]) -> None:
    official = score(data["labels"], data["official"])
    compact = score(data["labels"], data["compact"])
    cached = score(data["prepared"], data["compact"])
    assert (data["prepared"] / CACHE_FILE).is_file()
    assert official["metrics"]["AP"] is not None and official["metrics"]["mIoU"] is not None
    assert official["metrics"] == compact["metrics"] == cached["metrics"]
    assert official["breakdown"] == compact["breakdown"]
    assert official["labels_sha256"] == cached["labels_sha256"]
    assert set(official["breakdown"]) == {"material", "manner"}
    assert official["breakdown"]["material"]["count"] > 0 and official["warnings"] == [FEW_SCENES.format(3)]


def test_a_labels_folder_is_parsed_once_per_checksum(
    data: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import shutil

    from evaluation_workers import parsed_cache
    from evaluation_workers.tracks.openscan import labels as labels_module

    monkeypatch.setenv("EVAL_CACHE_DIR", str(tmp_path / "cache"))
    parsed, hashed = [], []
    real_parse, real_hash = labels_module.parse_labels, parsed_cache.sha256_tree
    monkeypatch.setattr(labels_module, "parse_labels", lambda f: parsed.append(f) or real_parse(f))
    monkeypatch.setattr(parsed_cache, "sha256_tree", lambda f: hashed.append(f) or real_hash(f))
    folder = tmp_path / "labels"
    shutil.copytree(data["labels"], folder)
    first = score(folder, data["compact"])
    again = score(folder, data["compact"])
    assert (len(parsed), len(hashed)) == (1, 1)  # the second run neither parsed nor hashed the text
    assert first["metrics"] == again["metrics"] and first["labels_sha256"] == again["labels_sha256"]
    copy = tmp_path / "copy"
    shutil.copytree(folder, copy)
    assert score(copy, data["compact"])["labels_sha256"] == first["labels_sha256"]
    assert (len(parsed), len(hashed)) == (1, 2)  # same checksum elsewhere: hashed, not parsed
    ids = next((folder / "gt" / "material").glob("*.txt"))
    values = ids.read_text().split()
    values[0] = "0" if values[0] != "0" else "1001"
    ids.write_text("\n".join(values) + "\n")
    changed = score(folder, data["compact"])
    assert len(parsed) == 2 and changed["labels_sha256"] != first["labels_sha256"]
    cache = tmp_path / "cache" / "openscan-labels"
    assert sorted(p.name for p in cache.glob("*.npz")) == sorted(
        f"{s}.npz" for s in {first["labels_sha256"], changed["labels_sha256"]})
    assert not list(cache.rglob("*.tmp*"))


def test_a_damaged_user_cache_is_rebuilt(data: dict[str, Path], tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVAL_CACHE_DIR", str(tmp_path / "cache"))
    want = score(data["labels"], data["compact"])
    for cached in (tmp_path / "cache" / "openscan-labels").glob("*.npz"):
        cached.write_bytes(b"not a zip")
    assert score(data["labels"], data["compact"])["metrics"] == want["metrics"]


def test_it_counts_a_missing_scene_as_misses_and_warns(data: dict[str, Path], tmp_path: Path) -> None:
    scene, _ = _scene(data)
    with zipfile.ZipFile(data["official"]) as src:
        members = {n: src.read(n) for n in src.namelist() if not n.endswith(f"{scene}.npz")}
    result = score(data["labels"], _zip(tmp_path / "p.zip", members))
    assert any(scene in w and "material" in w for w in result["warnings"])
    full = score(data["labels"], data["official"])
    assert result["breakdown"]["material"]["AP"] <= full["breakdown"]["material"]["AP"]
    assert result["breakdown"]["material"]["count"] == full["breakdown"]["material"]["count"]


def test_it_keys_a_repeated_attribute_name_by_its_id() -> None:
    keys = class_keys("affordance", ["a", "hang clothes", "b", "hang clothes"])
    assert keys == ["affordance/a", "affordance/hang clothes", "affordance/b", "affordance/hang clothes (4)"]


def test_it_writes_a_manifest_without_labels(data: dict[str, Path]) -> None:
    man = prepare_labels(data["labels"], data["prepared"])
    assert set(man) == {"track", "vocabulary", "aspects", "scenes"}
    assert len(man["vocabulary"]["material"]) == 10 and len(man["scenes"]) == 3
    assert validate(data["compact"], man)["format"] == "compact"


def _bad(data: dict[str, Path], tmp_path: Path, **override: Any) -> str:
    scene, n_vertices = _scene(data)
    arrays = {
        "pred_masks": np.ones((n_vertices, 2), np.uint8),
        "pred_scores": np.array([0.5, 0.4]),
        "pred_classes": np.array([1, 2]),
    }
    arrays.update(override)
    arrays = {k: v for k, v in arrays.items() if v is not None}
    path = _zip(tmp_path / "bad.zip", {f"material/{scene}.npz": _npz(**arrays)})
    with pytest.raises(PredictionFormatError) as err:
        score(data["labels"], path)
    return err.value.message


def test_it_rejects_masks_of_the_wrong_length(data: dict[str, Path], tmp_path: Path) -> None:
    msg = _bad(data, tmp_path, pred_masks=np.ones((7, 2), np.uint8))
    assert "material/scene" in msg and "`pred_masks`" in msg and "(7, 2)" in msg


@pytest.mark.parametrize("value", [np.nan, np.inf])
def test_it_rejects_scores_that_are_not_finite(data: dict[str, Path], tmp_path: Path, value: float) -> None:
    msg = _bad(data, tmp_path, pred_scores=np.array([0.5, value]))
    assert "`pred_scores`" in msg and "finite" in msg and "mask 1" in msg


@pytest.mark.parametrize("value", [0, 11, -3, 10**6])
def test_it_drops_masks_whose_class_id_is_not_an_attribute_id(
    data: dict[str, Path], tmp_path: Path, value: int
) -> None:
    """METRICS.md: MaskClustering's 0 and OpenMask3D's K+1 (`other`) are dropped, as the official code does."""
    scene, n_vertices = _scene(data)
    masks = np.zeros((n_vertices, 3), np.uint8)
    masks[:500, 0] = masks[500:1500, 1] = masks[1500:2500, 2] = 1
    with_unknown = {
        "pred_masks": masks,
        "pred_scores": np.array([0.5, 0.9, 0.4]),
        "pred_classes": np.array([1, value, 2]),
    }
    without = {"pred_masks": masks[:, [0, 2]], "pred_scores": np.array([0.5, 0.4]), "pred_classes": np.array([1, 2])}
    dropped = score(data["labels"], _zip(tmp_path / "a.zip", {f"material/{scene}.npz": _npz(**with_unknown)}))
    clean = score(data["labels"], _zip(tmp_path / "b.zip", {f"material/{scene}.npz": _npz(**without)}))
    assert dropped["details"]["per_class"] == clean["details"]["per_class"]
    assert [w for w in dropped["warnings"] if "dropped" in w] == [
        "material: dropped 1 masks in 1 of 3 scenes whose class id is not an attribute id 1..10 "
        "(0 = unlabelled, 11 = other), as the official evaluator drops them"
    ]
    assert not any("dropped" in w for w in clean["warnings"])


def test_it_accepts_an_out_of_range_sem_pred_as_a_miss(data: dict[str, Path], tmp_path: Path) -> None:
    scene, n_vertices = _scene(data)
    members = {
        f"material/{scene}.npz": _npz(
            pred_masks=np.zeros((n_vertices, 0), bool),
            pred_score=np.zeros(0),
            pred_classes=np.zeros(0, int),
            sem_pred=np.full(n_vertices, 99),
        )
    }
    result = score(data["labels"], _zip(tmp_path / "p.zip", members))
    assert result["breakdown"]["material"]["mIoU"] == 0.0 and result["breakdown"]["material"]["AP"] == 0.0


def test_it_rejects_sem_pred_in_some_scenes_only(data: dict[str, Path], tmp_path: Path) -> None:
    man = manifest(data["labels"])
    members = {}
    for i, scene in enumerate(man["aspects"]["material"][:2]):
        v = man["scenes"][scene]
        extra = {"sem_pred": np.ones(v, int)} if i == 0 else {}
        members[f"material/{scene}.npz"] = _npz(
            pred_masks=np.zeros((v, 0), bool), pred_scores=np.zeros(0), pred_classes=np.zeros(0, int), **extra
        )
    with pytest.raises(PredictionFormatError, match="`sem_pred` in every scene"):
        score(data["labels"], _zip(tmp_path / "p.zip", members))


def test_it_rejects_unknown_scenes_and_aspects(data: dict[str, Path], tmp_path: Path) -> None:
    blob = _npz(pred_masks=np.zeros((5, 0)), pred_scores=np.zeros(0), pred_classes=np.zeros(0, int))
    with pytest.raises(PredictionFormatError, match="unknown scene 'scene9999_00'"):
        score(data["labels"], _zip(tmp_path / "a.zip", {"material/scene9999_00.npz": blob}))
    with pytest.raises(PredictionFormatError, match="'colour'"):
        score(data["labels"], _zip(tmp_path / "b.zip", {"colour/scene0000_00.npz": blob}))


@pytest.mark.parametrize(
    "name", ["../material/scene0000_00.npz", "/material/scene0000_00.npz", "material/../../x.npz"]
)
def test_it_rejects_paths_escaping_the_archive(data: dict[str, Path], tmp_path: Path, name: str) -> None:
    with pytest.raises(PredictionFormatError, match="inside the archive"):
        score(data["labels"], _zip(tmp_path / "p.zip", {name: b"x"}))


def test_it_rejects_pickled_objects(data: dict[str, Path], tmp_path: Path) -> None:
    scene, n_vertices = _scene(data)
    blob = _npz(
        pred_masks=np.ones((n_vertices, 1), np.uint8),
        pred_scores=np.array([{"a": 1}], dtype=object),
        pred_classes=np.array([1]),
    )
    with pytest.raises(PredictionFormatError, match="Python objects"):
        score(data["labels"], _zip(tmp_path / "p.zip", {f"material/{scene}.npz": blob}))


def test_it_refuses_a_header_announcing_a_huge_array_before_allocating(
    data: dict[str, Path], tmp_path: Path
) -> None:
    scene, n_vertices = _scene(data)
    header = io.BytesIO()
    np.lib.format.write_array_header_2_0(
        header, {"descr": "<f8", "fortran_order": False, "shape": (n_vertices, 10**7)}
    )
    inner = io.BytesIO()
    with zipfile.ZipFile(inner, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("pred_masks.npy", b"\x93NUMPY\x02\x00" + header.getvalue()[8:] + b"\x00" * 10**6)
        zf.writestr("pred_scores.npy", _npy(np.zeros(1)))
        zf.writestr("pred_classes.npy", _npy(np.ones(1, int)))
    with pytest.raises(PredictionFormatError, match="at most"):
        score(data["labels"], _zip(tmp_path / "p.zip", {f"material/{scene}.npz": inner.getvalue()}))


def _npy(arr: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, arr)
    return buf.getvalue()


def test_it_stops_inflating_at_the_announced_size(data: dict[str, Path], tmp_path: Path) -> None:
    # a zip bomb: the header announces 2 masks, the member inflates to 200 MB of zeros
    scene, n_vertices = _scene(data)
    inner = io.BytesIO()
    with zipfile.ZipFile(inner, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("pred_masks.npy", _npy(np.zeros((n_vertices, 2), np.uint8)) + b"\x00" * 200 * 2**20)
        zf.writestr("pred_scores.npy", _npy(np.zeros(2)))
        zf.writestr("pred_classes.npy", _npy(np.ones(2, int)))
    path = _zip(tmp_path / "p.zip", {f"material/{scene}.npz": inner.getvalue()})
    assert path.stat().st_size < 2**20
    result = score(data["labels"], path)  # reads only the announced bytes
    assert result["breakdown"]["material"]["AP"] == 0.0


def test_it_rejects_empty_files(data: dict[str, Path], tmp_path: Path) -> None:
    empty = tmp_path / "empty.zip"
    empty.write_bytes(b"")
    with pytest.raises(PredictionFormatError, match="empty"):
        score(data["labels"], empty)
    scene, _ = _scene(data)
    with pytest.raises(PredictionFormatError, match="0-byte"):
        score(data["labels"], _zip(tmp_path / "p.zip", {f"material/{scene}.npz": b""}))


def test_it_rejects_overlapping_runs_in_the_compact_form(data: dict[str, Path], tmp_path: Path) -> None:
    with np.load(data["compact"]) as f:
        arrays = dict(f)
    arrays["run_starts"] = arrays["run_starts"].copy()
    first = arrays["run_offsets"][int(np.argmax(np.diff(arrays["run_offsets"]) >= 2))]
    arrays["run_starts"][first + 1] = arrays["run_starts"][
        first
    ]  # a proposal's second run starts on its first
    np.savez(tmp_path / "p.npz", **arrays)
    with pytest.raises(PredictionFormatError, match="non-overlapping"):
        score(data["labels"], tmp_path / "p.npz")


def test_it_prints_the_result_json_from_the_command_line(data: dict[str, Path]) -> None:
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "evaluation_workers",
            "score",
            "--track",
            "openscan",
            "--labels",
            str(data["prepared"]),
            "--predictions",
            str(data["compact"]),
            "--quiet",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    result = json.loads(out.stdout)
    assert result["track"] == "openscan" and set(result["metrics"]) == {"AP", "AP50", "AP25", "mIoU", "mAcc"}
