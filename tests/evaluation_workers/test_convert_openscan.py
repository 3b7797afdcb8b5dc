"""Open3DIS ``.pth`` files and OpenMask3D dumps, written by each codebase's own save call, convert to
files that score exactly like the same content in the official zip."""

from __future__ import annotations

import argparse
import io
import json
import zipfile
from pathlib import Path

import numpy as np
import pytest

from evaluation_workers.cli import main as cli
from evaluation_workers.convert import ConvertError, convert
from evaluation_workers.synthetic import openscan as synthetic
from evaluation_workers.tracks.openscan import score
from evaluation_workers.tracks.openscan.labels import manifest as labels_manifest

torch = pytest.importorskip("torch", reason="torch (requirements-dev.txt) writes Open3DIS's .pth inputs")


@pytest.fixture(scope="module")
def official(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("openscan")
    written = synthetic.generate(argparse.Namespace(
        out=out, scenes=3, points=4000, instances=(6, 10), masks=20, aspects=["material", "type"],
        format="official", semantic=False, missing=0, seed=5))
    return {"labels": Path(written["labels"]), "official": Path(written["official"]), "out": out}


def _members(zip_path: Path) -> dict[tuple[str, str], dict[str, np.ndarray]]:
    with zipfile.ZipFile(zip_path) as zf:
        return {(n.split("/")[0], n.split("/")[1][:-4]): dict(np.load(io.BytesIO(zf.read(n))))
                for n in zf.namelist()}


def _open3dis_rle(masks: torch.Tensor) -> list[dict[str, object]]:
    """RLE as Open3DIS's ``rle_encode_gpu_batch`` stores it: 1-based starts and lengths, a numpy array."""
    n, length = masks.shape
    padded = torch.cat([torch.zeros((n, 1), dtype=torch.bool), masks, torch.zeros((n, 1), dtype=torch.bool)], 1)
    rles = []
    for m in range(n):
        runs = torch.nonzero(padded[m, 1:] != padded[m, :-1]).view(-1) + 1
        runs[1::2] -= runs[::2]
        rles.append({"length": length, "counts": runs.numpy()})
    return rles


def _write_open3dis(folder: Path, members: dict[tuple[str, str], dict[str, np.ndarray]], string_counts: bool) -> None:
    for (aspect, scene), arrays in members.items():
        (folder / aspect).mkdir(parents=True, exist_ok=True)
        masks = torch.from_numpy(arrays["pred_masks"].T != 0)
        ins = _open3dis_rle(masks)
        if string_counts:  # the CPU rle_encode writes the same numbers as one string
            ins = [{"length": r["length"], "counts": " ".join(map(str, r["counts"]))} for r in ins]
        torch.save({"ins": ins, "conf": torch.from_numpy(arrays["pred_scores"]).float(),
                    "final_class": torch.from_numpy(arrays["pred_classes"]).long() - 1},
                   folder / aspect / f"{scene}.pth")


@pytest.mark.parametrize("to", ["official", "compact"])
def test_it_converts_open3dis_pth_files_to_a_file_that_scores_like_the_official_zip(
        official: dict[str, Path], tmp_path: Path, to: str) -> None:
    members = _members(official["official"])
    # Open3DIS stores float32 scores: the direct file gets the same values
    for arrays in members.values():
        arrays["pred_scores"] = arrays["pred_scores"].astype(np.float32).astype(np.float64)
    direct = tmp_path / "direct.zip"
    with zipfile.ZipFile(direct, "w") as zf:
        for (aspect, scene), arrays in members.items():
            buf = io.BytesIO()
            np.savez(buf, **arrays)
            zf.writestr(f"{aspect}/{scene}.npz", buf.getvalue())
    _write_open3dis(tmp_path / "open3dis", members, string_counts=to == "compact")
    manifest = labels_manifest(official["labels"])
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    dest = tmp_path / ("out.zip" if to == "official" else "out.npz")
    assert cli(["convert", "--track", "openscan", "--from", "open3dis", "--to", to, "--manifest",
                str(tmp_path / "manifest.json"), str(tmp_path / "open3dis"), str(dest)]) == 0
    want, got = score(official["labels"], direct), score(official["labels"], dest)
    assert got["metrics"] == want["metrics"] and got["breakdown"] == want["breakdown"]
    assert got["details"]["per_class"] == want["details"]["per_class"]
    assert want["metrics"]["AP"] > 0.05  # a real signal, not two empty files


def test_it_reads_dense_open3dis_masks_and_one_aspect_folders(official: dict[str, Path], tmp_path: Path) -> None:
    members = {k: v for k, v in _members(official["official"]).items() if k[0] == "material"}
    folder = tmp_path / "material_only"
    folder.mkdir()
    for (_, scene), arrays in members.items():
        torch.save({"ins": torch.from_numpy(arrays["pred_masks"].T.astype(np.int64)),
                    "conf": torch.from_numpy(arrays["pred_scores"]),
                    "final_class": torch.from_numpy(arrays["pred_classes"]) - 1}, folder / f"{scene}.pth")
    dest = tmp_path / "out.zip"
    convert("openscan", "open3dis", folder, dest, labels_manifest(official["labels"]), aspect="material")
    for key, arrays in _members(dest).items():
        np.testing.assert_array_equal(arrays["pred_masks"], members[key]["pred_masks"] != 0)
        np.testing.assert_array_equal(arrays["pred_classes"], members[key]["pred_classes"])


def test_it_never_unpickles_code_from_a_pth_file(tmp_path: Path) -> None:
    (tmp_path / "material").mkdir()
    torch.save({"ins": [], "conf": None, "final_class": argparse.Namespace(x=1)},
               tmp_path / "material" / "scene0000_00.pth")
    with pytest.raises(ConvertError, match=r"material/scene0000_00.pth: .*weights_only=True\) refused it"):
        convert("openscan", "open3dis", tmp_path, tmp_path / "out.zip", None)


def test_it_names_the_file_and_run_of_a_bad_rle(tmp_path: Path) -> None:
    (tmp_path / "type").mkdir()
    torch.save({"ins": [{"length": 10, "counts": np.array([9, 5])}], "conf": torch.ones(1),
                "final_class": torch.zeros(1, dtype=torch.long)}, tmp_path / "type" / "scene0000_00.pth")
    with pytest.raises(ConvertError, match=r"type/scene0000_00.pth: ins\[0\].counts: Expected runs inside "
                                           r"1..10 \(1-based starts\), but got start 9 with length 5"):
        convert("openscan", "open3dis", tmp_path, tmp_path / "out.zip", None)


def test_it_converts_an_openmask3d_dump_to_the_official_zip(official: dict[str, Path], tmp_path: Path) -> None:
    members = _members(official["official"])
    dump = tmp_path / "openscan_dump"
    for (aspect, scene), arrays in members.items():
        # the documented lines, with pred_masks a torch tensor as OpenMask3D's torch.load gives it
        pred_masks = torch.from_numpy(arrays["pred_masks"].astype(np.float32))
        (dump / aspect).mkdir(parents=True, exist_ok=True)
        np.savez(dump / aspect / f"{scene}.npz", pred_masks=np.asarray(pred_masks),
                 pred_scores=arrays["pred_scores"], pred_classes=arrays["pred_classes"])
    dest = tmp_path / "out.zip"
    summary = convert("openscan", "openmask3d", dump, dest, labels_manifest(official["labels"]))
    assert summary.startswith(f"{len(members)} OpenMask3D scene dumps")
    want, got = score(official["labels"], official["official"]), score(official["labels"], dest)
    assert got["metrics"] == want["metrics"] and got["details"]["per_class"] == want["details"]["per_class"]


def test_it_refuses_a_dump_with_the_wrong_vertex_count(official: dict[str, Path], tmp_path: Path) -> None:
    (tmp_path / "material").mkdir()
    np.savez(tmp_path / "material" / "scene0000_00.npz", pred_masks=np.zeros((7, 1)), pred_scores=np.ones(1),
             pred_classes=np.ones(1, dtype=np.int64))
    with pytest.raises(ConvertError, match=r"material/scene0000_00.npz: pred_masks: Expected 4,000 rows "
                                           r"\(the scene's vertices\), but got 7"):
        convert("openscan", "openmask3d", tmp_path, tmp_path / "out.zip", labels_manifest(official["labels"]))
