"""MMScan visual-grounding files: validation messages, gzip, manifest, labels folder, command line."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from evaluation_workers.errors import LabelsError, PredictionFormatError
from evaluation_workers.tracks import get_track, mmscan_vg

BOX = [0.0, 0.0, 0.5, 1.0, 1.0, 1.0, 0.0, 0.0, 0.0]
LABELS = [
    {
        "sample_id": "scene0000_00__0",
        "scan_id": "scene0000_00",
        "text": "the chair",
        "sub_class": "VG_Single_Attribute_Unique",
        "gt_bboxes": [BOX],
    },
    {
        "sample_id": "scene0000_00__1",
        "scan_id": "scene0000_00",
        "text": "the chairs",
        "sub_class": "VG_Inter_Space_OO",
        "gt_bboxes": [BOX, [3.0, 0, 0.5, 1, 1, 1, 0, 0, 0]],
    },
]
TRACK = get_track("mmscan-vg")


@pytest.fixture
def labels(tmp_path: Path) -> Path:
    path = tmp_path / "labels.json"
    path.write_text(json.dumps(LABELS))
    return path


def _preds(tmp_path: Path, content, name: str = "pred.json") -> Path:
    path = tmp_path / name
    path.write_text(content if isinstance(content, str) else json.dumps(content))
    return path


def _entry(sample: str = "scene0000_00__0", boxes=None, scores=None) -> dict:
    boxes = [BOX] if boxes is None else boxes
    return {
        "sample_id": sample,
        "pred_bboxes": boxes,
        "pred_scores": [0.5] * len(boxes) if scores is None else scores,
    }


def _error(tmp_path: Path, labels: Path, content) -> str:
    with pytest.raises(PredictionFormatError) as info:
        TRACK.score(labels, _preds(tmp_path, content), lambda f, m="": None)
    return info.value.message


def test_it_scores_a_perfect_submission(tmp_path: Path, labels: Path) -> None:
    preds = [_entry(), _entry("scene0000_00__1", [LABELS[1]["gt_bboxes"][1], BOX], [0.9, 0.8])]
    result = TRACK.score(labels, _preds(tmp_path, preds), lambda f, m="": None)
    assert all(v == 1.0 for v in result["metrics"].values())
    assert result["warnings"] == ["No confidence intervals: 1 scene scored, and an interval needs at least 20 "
                                  "(the bootstrap resamples scenes)."]
    assert result["breakdown"]["ST-attr"]["count"] == 1
    assert result["track"] == "mmscan-vg"


def test_it_accepts_an_object_keyed_by_sample_id_and_gzip(tmp_path: Path, labels: Path) -> None:
    content = {"scene0000_00__0": {"pred_bboxes": [BOX], "pred_scores": [1.0]}}
    path = tmp_path / "pred.json"  # gzip is recognised by its bytes, whatever the name
    path.write_bytes(gzip.compress(json.dumps(content).encode()))
    result = TRACK.score(labels, path, lambda f, m="": None)
    assert result["breakdown"]["ST-attr"]["gTop-1@0.5"] == 1.0
    assert result["breakdown"]["OO-space"]["gTop-1@0.5"] == 0.0
    assert "1 sample(s)" in result["warnings"][0]


@pytest.mark.parametrize(
    "content, words",
    [
        ([_entry(boxes=[[0, 0, 0, 1, 1, 1, 0, 0]])], "list of 9 numbers"),
        ([_entry(boxes=[[0, 0, 0, 1, 1, 1, 0, 0, "x"]])], "Expected numbers"),
        ([_entry(boxes=[[0, 0, 0, 1, 0, 1, 0, 0, 0]])], "sizes"),
        ([_entry(boxes=[[0, 0, 0, 1, -1, 1, 0, 0, 0]])], "sizes"),
        ([_entry(scores=[0.5, 0.4])], "one score per box"),
        ([_entry("scene9999_00__0")], "unknown"),
        ([_entry(), _entry()], "appears twice"),
        ([_entry(boxes=[BOX] * (mmscan_vg.MAX_BOXES_PER_PROMPT + 1))], "at most"),
        ([{"sample_id": "scene0000_00__0", "pred_bboxes": BOX, "pred_scores": 0.5}], "pred_scores"),
        ([3], "Expected an object"),
        ("[{", "does not parse"),
        ("7", "Expected a JSON list or object"),
    ],
)
def test_it_rejects_bad_predictions(tmp_path: Path, labels: Path, content, words: str) -> None:
    message = _error(tmp_path, labels, content)
    assert words in message
    assert message.startswith("pred.json")


def test_it_rejects_non_finite_numbers(tmp_path: Path, labels: Path) -> None:
    text = '[{"sample_id": "scene0000_00__0", "pred_bboxes": [[0, 0, NaN, 1, 1, 1, 0, 0, 0]], "pred_scores": [1]}]'
    assert "finite" in _error(tmp_path, labels, text)
    text = '[{"sample_id": "scene0000_00__0", "pred_bboxes": [[0, 0, 0, 1, 1, 1, 0, 0, 0]], "pred_scores": [Infinity]}]'
    message = _error(tmp_path, labels, text)
    assert "finite" in message and "pred_scores" in message


def test_it_rejects_duplicate_keys_in_the_object_form(tmp_path: Path, labels: Path) -> None:
    text = (
        '{"scene0000_00__0": {"pred_bboxes": [], "pred_scores": []}, '
        '"scene0000_00__0": {"pred_bboxes": [], "pred_scores": []}}'
    )
    assert "appears twice" in _error(tmp_path, labels, text)


def test_it_refuses_bad_labels(tmp_path: Path) -> None:
    bad = [dict(LABELS[0], sub_class="VG_Unknown")]
    (tmp_path / "l.json").write_text(json.dumps(bad))
    with pytest.raises(LabelsError, match="sub_class"):
        mmscan_vg.load_labels(tmp_path / "l.json")
    bad = [dict(LABELS[0], gt_bboxes=[[0, 0, 0, 0, 1, 1, 0, 0, 0]])]
    (tmp_path / "l.json").write_text(json.dumps(bad))
    with pytest.raises(LabelsError, match="size"):
        mmscan_vg.load_labels(tmp_path / "l.json")


def test_it_writes_a_manifest_without_boxes_and_scores_from_a_prepared_folder(
    tmp_path: Path, labels: Path
) -> None:
    dest = tmp_path / "prepared"
    manifest = TRACK.prepare_labels(labels, dest)
    assert manifest["sample_ids"] == [x["sample_id"] for x in LABELS]
    assert manifest["groups"]["OO-space"] == 1
    assert "gt_bboxes" not in json.dumps(manifest) and "0.5" not in json.dumps(manifest["sample_ids"])
    assert sorted(p.name for p in dest.iterdir()) == [".cache", "labels.json"]  # the file and its parsed copy
    assert (dest / mmscan_vg.labels.CACHE_FILE).is_file()
    preds = _preds(tmp_path, [_entry()])
    summary = TRACK.validate(preds, manifest)
    assert summary == {"samples": 1, "boxes": 1, "missing_samples": 1}
    assert (
        TRACK.score(dest, preds, lambda f, m="": None)["labels_sha256"]
        == TRACK.score(labels, preds, lambda f, m="": None)["labels_sha256"]
    )


def test_it_scores_from_the_command_line(tmp_path: Path, labels: Path) -> None:
    preds = _preds(tmp_path, [_entry()])
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "evaluation_workers",
            "score",
            "--track",
            "mmscan-vg",
            "--labels",
            str(labels),
            "--predictions",
            str(preds),
            "--quiet",
        ],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).resolve().parents[2],
    )
    result = json.loads(out.stdout)
    assert result["metrics"]["gTop-1@0.25"] == 0.5
    assert set(result["metrics"]) == set(TRACK.metrics)


def test_a_scoring_process_imports_neither_numpy_testing_nor_f2py(tmp_path: Path, labels: Path) -> None:
    """array-api-compat's ``from numpy import *`` (ours and scipy's copy) would import both (0.1 s a process),
    and polynomials and string arrays (7 ms)."""
    preds = _preds(tmp_path, [_entry()])
    script = (
        "import sys\n"
        "from evaluation_workers import cli\n"
        f"assert cli.main(['score', '--track', 'mmscan-vg', '--labels', {str(labels)!r}, "
        f"'--predictions', {str(preds)!r}, '--quiet']) == 0\n"
        "print(sorted(m for m in ('numpy.testing', 'numpy.f2py', 'numpy.polynomial', 'numpy.char', 'scipy.sparse')"
        " if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parents[2], env={**os.environ, "EVAL_DEVICE": "cpu"})
    assert out.stdout.strip().splitlines()[-1] == "['scipy.sparse']"  # the bootstrap's import, and only it


def test_it_generates_synthetic_files_that_score(tmp_path: Path) -> None:
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "evaluation_workers.synthetic",
            "mmscan-vg",
            "--out",
            str(tmp_path),
            "--samples",
            "40",
            "--gzip",
            "--empty-fraction",
            "0.2",
        ],
        capture_output=True,
        text=True,
        check=True,
        cwd=root,
    )
    written = json.loads(out.stdout)
    labels = json.loads(Path(written["labels"]).read_text())
    assert len(labels) == 40
    assert {x["sub_class"] for x in labels} <= set(mmscan_vg.SUB_CLASS_GROUP)
    assert all(1 <= len(x["gt_bboxes"]) <= 5 for x in labels)
    result = TRACK.score(Path(written["labels"]), Path(written["predictions"]), lambda f, m="": None)
    assert 0 < result["metrics"]["gTop-5@0.25"] <= 1


def test_it_scores_every_form_of_the_same_content_identically(tmp_path: Path) -> None:
    """JSON, .json.gz, the devkit's shape (N, 1 scores, extra keys) and .npz: the same numbers, to the bit."""
    import numpy as np

    from evaluation_workers.synthetic.mmscan_vg import make_arrays, make_data, write_npz

    labels, preds = make_data(60, seed=3, min_preds=0, max_preds=12, empty_fraction=0.1)
    labels_path = tmp_path / "labels.json"
    labels_path.write_text(json.dumps(labels))
    forms = {"plain.json": json.dumps(preds).encode()}
    forms["packed.json.gz"] = gzip.compress(forms["plain.json"])
    devkit = [dict(p, pred_scores=[[s] for s in p["pred_scores"]], scan_id="x", text="y") for p in preds]
    forms["devkit.json"] = json.dumps(devkit).encode()
    results = {}
    for name, data in forms.items():
        (tmp_path / name).write_bytes(data)
        results[name] = TRACK.score(labels_path, tmp_path / name, lambda f, m="": None)
    _, arrays = make_arrays(60, seed=3, min_preds=0, max_preds=12, empty_fraction=0.1, dtype=np.float64)
    write_npz(tmp_path / "binary.npz", arrays)
    results["binary.npz"] = TRACK.score(labels_path, tmp_path / "binary.npz", lambda f, m="": None)
    want = results["plain.json"]
    for name, got in results.items():
        assert (got["metrics"], got["breakdown"], got["details"]) == (
            want["metrics"], want["breakdown"], want["details"]), name
    assert results["devkit.json"]["warnings"][0] == "devkit.json: ignored unknown keys in 60 items: scan_id, text"


def test_it_widens_float32_binary_boxes_as_their_json_decimals(tmp_path: Path) -> None:
    import numpy as np

    from evaluation_workers.synthetic.mmscan_vg import make_arrays, write_npz

    labels, arrays = make_arrays(40, seed=4, dtype=np.float32)
    (tmp_path / "labels.json").write_text(json.dumps(labels))
    write_npz(tmp_path / "p.npz", arrays)
    off = arrays["offsets"]
    as_json = [{"sample_id": sid, "pred_bboxes": arrays["pred_bboxes"][a:b].astype(float).tolist(),
                "pred_scores": arrays["pred_scores"][a:b].astype(float).tolist()}
               for sid, a, b in zip(arrays["sample_id"].tolist(), off[:-1], off[1:])]
    (tmp_path / "p.json").write_text(json.dumps(as_json))
    got = TRACK.score(tmp_path / "labels.json", tmp_path / "p.npz", lambda f, m="": None)
    want = TRACK.score(tmp_path / "labels.json", tmp_path / "p.json", lambda f, m="": None)
    assert got["metrics"] == want["metrics"] and got["breakdown"] == want["breakdown"]


@pytest.mark.parametrize("threads", ["1", "3"])
def test_it_gives_the_same_numbers_whatever_the_block_size_and_threads(
    threads: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Blocks of prompts run on EVAL_THREADS threads and are collected in order: every value, and
    every outcome the bootstrap keeps, is the same bit for bit as one block on one thread."""
    from array_api_compat import numpy as compat

    fixtures = Path(__file__).resolve().parents[1] / "fixtures" / "mmscan_vg"
    lab = mmscan_vg.load_labels(fixtures / "devkit_labels.json")
    pr = mmscan_vg.load_predictions(fixtures / "devkit_predictions.json", lab.index)
    monkeypatch.setenv("EVAL_THREADS", "1")
    whole_outcomes: dict[str, np.ndarray] = {}
    whole = mmscan_vg.score_arrays(lab, pr, compat, block_pairs=1 << 30, outcomes=whole_outcomes)
    monkeypatch.setenv("EVAL_THREADS", threads)
    outcomes: dict[str, np.ndarray] = {}
    assert mmscan_vg.score_arrays(lab, pr, compat, block_pairs=7, outcomes=outcomes) == whole
    assert outcomes.keys() == whole_outcomes.keys()
    for key, value in whole_outcomes.items():
        assert np.array_equal(outcomes[key], value), key


def test_labels_are_parsed_once_per_checksum_and_a_stale_copy_is_never_used(
    tmp_path: Path, labels: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from evaluation_workers.tracks.mmscan_vg import labels as labels_module

    monkeypatch.setenv("EVAL_CACHE_DIR", str(tmp_path / "cache"))
    parsed: list[Path] = []
    real = labels_module.parse_labels
    monkeypatch.setattr(labels_module, "parse_labels", lambda f: parsed.append(f) or real(f))
    file = tmp_path / "copy.json"
    file.write_bytes(labels.read_bytes())
    first = mmscan_vg.load_labels(file)
    again = mmscan_vg.load_labels(file)
    assert len(parsed) == 1 and again.sample_ids == first.sample_ids
    assert np.array_equal(again.gt_boxes, first.gt_boxes) and np.array_equal(again.group, first.group)
    changed = json.loads(file.read_text())
    changed[0]["gt_bboxes"][0][0] += 1.0
    file.write_text(json.dumps(changed))
    assert mmscan_vg.load_labels(file).gt_boxes[0, 0] == first.gt_boxes[0, 0] + 1.0
    assert len(parsed) == 2
