"""The three OpenScan prediction forms score alike; validators never fail but with a PredictionFormatError."""

from __future__ import annotations

import argparse
import io
import zipfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from evaluation_workers.convert.openscan_compact import main as convert
from evaluation_workers.errors import PredictionFormatError
from evaluation_workers.synthetic import openscan as synthetic
from evaluation_workers.tracks.openscan import score, validate
from evaluation_workers.tracks.openscan.labels import manifest

GOLDEN = Path(__file__).resolve().parents[1] / "fixtures" / "openscan" / "golden"


def to_text_layout(official: Path, dest: Path, classes: dict[str, int] | None = None) -> Path:
    """ScanNet's text layout of an official zip: ``<aspect>/<scene>.txt`` + ``<aspect>/pred_mask/*.txt``."""
    with zipfile.ZipFile(official) as src, zipfile.ZipFile(dest, "w", zipfile.ZIP_DEFLATED) as out:
        for name in src.namelist():
            aspect, scene = name.split("/")[0], name.split("/")[1][:-4]
            with np.load(io.BytesIO(src.read(name))) as f:
                masks = f["pred_masks"]
                scores = f["pred_scores"] if "pred_scores" in f else f["pred_score"]
                ids = f["pred_classes"]
            lines = []
            for m in range(masks.shape[1]):
                rel = f"pred_mask/{scene}_{m}.txt"
                out.writestr(f"{aspect}/{rel}", "\n".join(map(str, (masks[:, m] != 0).astype(int))) + "\n")
                lines.append(f"{rel} {int(ids[m])} {float(scores[m])!r}")
            out.writestr(f"{aspect}/{scene}.txt", "\n".join(lines) + "\n")
    return dest


def with_classes(official: Path, dest: Path, every: int, value_of: dict[str, int]) -> Path:
    """The official zip with every ``every``-th mask's class set to ``value_of[aspect]``."""
    with zipfile.ZipFile(official) as src, zipfile.ZipFile(dest, "w") as out:
        for name in src.namelist():
            with np.load(io.BytesIO(src.read(name))) as f:
                arrays = dict(f)
            arrays["pred_classes"] = arrays["pred_classes"].copy()
            arrays["pred_classes"][::every] = value_of[name.split("/")[0]]
            buf = io.BytesIO()
            np.savez_compressed(buf, **arrays)
            out.writestr(name, buf.getvalue())
    return dest


def _instance(result: dict) -> tuple[dict, dict]:
    keep = ("AP", "AP50", "AP25", "count")
    return result["details"]["per_class"], {a: {k: r[k] for k in keep} for a, r in result["breakdown"].items()}


def test_the_text_layout_scores_the_golden_inputs_as_the_official_zip(tmp_path: Path) -> None:
    official = score(GOLDEN / "labels", GOLDEN / "predictions.zip")
    text = score(GOLDEN / "labels", to_text_layout(GOLDEN / "predictions.zip", tmp_path / "text.zip"))
    assert text["details"]["format"] == "text"
    assert _instance(text) == _instance(official)


@pytest.fixture(scope="module")
def synthetic_data(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("forms")
    return synthetic.generate(argparse.Namespace(
        out=out, scenes=3, points=2500, instances=(6, 10), masks=18, aspects=["material", "synonym"],
        format="official", semantic=False, missing=0, seed=5))


def test_all_three_forms_drop_unknown_class_ids_alike(synthetic_data: dict[str, Path], tmp_path: Path) -> None:
    labels = synthetic_data["labels"]
    k = {a: len(v) for a, v in manifest(labels)["vocabulary"].items()}
    official = with_classes(synthetic_data["official"], tmp_path / "o.zip", 4,
                            {"material": 0, "synonym": k["synonym"] + 1})
    text = to_text_layout(official, tmp_path / "t.zip")
    assert convert([str(official), str(tmp_path / "c.npz"), "--labels", str(labels)]) == 0
    results = [score(labels, p) for p in (official, text, tmp_path / "c.npz")]
    assert [r["details"]["format"] for r in results] == ["official", "text", "compact"]
    assert _instance(results[0]) == _instance(results[1]) == _instance(results[2])
    assert results[0]["metrics"]["AP"] is not None
    warned = [w for w in results[0]["warnings"] if "dropped" in w]
    assert warned == [w for w in results[1]["warnings"] if "dropped" in w]
    by_aspect = {w.split(":")[0]: w for w in warned}
    assert by_aspect["material"].startswith("material: dropped 15 masks in 3 of 3 scenes")  # 0, 4, ..., 16 of 18
    assert by_aspect["synonym"].startswith("synonym: dropped 15 masks in 3 of 3 scenes")
    assert f"{k['synonym'] + 1} = other" in by_aspect["synonym"]


def _small_files(tmp: Path, data: dict[str, Path]) -> list[bytes]:
    text = to_text_layout(data["official"], tmp / "t.zip")
    convert([str(data["official"]), str(tmp / "c.npz"), "--labels", str(data["labels"])])
    return [data["official"].read_bytes(), text.read_bytes(), (tmp / "c.npz").read_bytes()]


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, list[bytes]]:
    tmp = tmp_path_factory.mktemp("small")
    data = synthetic.generate(argparse.Namespace(
        out=tmp, scenes=2, points=400, instances=(3, 4), masks=4, aspects=["material"],
        format="official", semantic=True, missing=0, seed=9))
    return manifest(data["labels"]), _small_files(tmp, data)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(which=st.integers(0, 2), cuts=st.lists(st.tuples(st.floats(0, 1), st.integers(0, 255)), max_size=6),
       truncate=st.one_of(st.none(), st.floats(0, 1)))
def test_mutated_files_validate_or_raise_a_format_error(
    small: tuple[dict, list[bytes]], tmp_path: Path, which: int, cuts: list[tuple[float, int]],
    truncate: float | None,
) -> None:
    man, files = small
    data = bytearray(files[which])
    for where, byte in cuts:
        data[min(int(where * len(data)), len(data) - 1)] = byte
    if truncate is not None:
        data = data[: int(truncate * len(data))]
    path = tmp_path / ("p.npz" if which == 2 else "p.zip")
    path.write_bytes(bytes(data))
    try:
        validate(path, man)
    except PredictionFormatError:
        pass


def _deflated_golden(path: Path) -> Path:
    with zipfile.ZipFile(GOLDEN / "predictions.zip") as src, zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as out:
        for name in src.namelist():
            out.writestr(name, src.read(name))
    return path


def test_a_deflated_scene_past_the_memory_share_is_inflated_to_disk_with_the_same_result(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from evaluation_workers.tracks.openscan import members

    deflated = _deflated_golden(tmp_path / "deflated.zip")
    in_memory = score(GOLDEN / "labels", deflated)
    spilled: list[object] = []
    original = members.Archive.spill

    def spill(self, name, cap, what):  # type: ignore[no-untyped-def]
        spilled.append(result := original(self, name, cap, what))
        return result

    monkeypatch.setattr(members, "SPILL_IN_MEMORY", 1024)
    monkeypatch.setattr(members.Archive, "spill", spill)
    on_disk = score(GOLDEN / "labels", deflated)
    assert spilled and all(not isinstance(s, bytes) for s in spilled)  # temporary files
    assert _instance(on_disk) == _instance(in_memory) and on_disk["metrics"] == in_memory["metrics"]


def test_a_deflated_scene_is_inflated_in_one_call_and_a_lying_size_changes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import struct

    from evaluation_workers.tracks.openscan import members

    honest = _deflated_golden(tmp_path / "deflated.zip")
    calls: list[int] = []
    original = members.MemberStream.read_up_to

    def read_up_to(self, n):  # type: ignore[no-untyped-def]
        calls.append(n)
        return original(self, n)

    monkeypatch.setattr(members.MemberStream, "read_up_to", read_up_to)
    expected = score(GOLDEN / "labels", honest)
    with zipfile.ZipFile(honest) as zf:
        sizes = [i.file_size for i in zf.infolist() if i.filename.endswith(".npz")]
    # Per scene: the npz in one inflate call, then the empty call that finds its end.
    assert sorted(n for n in calls if n in sizes) == sorted(sizes)
    for lie in (1, 0x100):  # the directory states 1 byte, or 256 bytes, for each scene's npz
        data = bytearray(honest.read_bytes())
        at = data.find(b"PK\x01\x02")
        while at >= 0:
            struct.pack_into("<L", data, at + 24, lie)  # uncompressed size
            at = data.find(b"PK\x01\x02", at + 4)
        lying = tmp_path / f"lying{lie}.zip"
        lying.write_bytes(bytes(data))
        got = score(GOLDEN / "labels", lying)
        assert _instance(got) == _instance(expected) and got["metrics"] == expected["metrics"]


def test_a_file_that_is_no_zip_is_told_both_forms(small: tuple[dict, list[bytes]], tmp_path: Path) -> None:
    """A researcher who uploads the wrong file (here MMScan's JSON) learns which files OpenScan takes."""
    wrong = tmp_path / "predictions.json"
    wrong.write_text('[{"sample_id": "x", "pred_bboxes": []}]')
    with pytest.raises(PredictionFormatError) as caught:
        validate(wrong, small[0])
    assert caught.value.message == ("predictions.json: Expected a zip archive: the official zip (an .npz per scene) "
                                    "or the compact .npz, but got no readable zip directory (a zip file ends "
                                    "with one; this file was cut short, is damaged, or is another kind of file)")
