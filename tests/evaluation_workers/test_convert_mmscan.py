"""EmbodiedScan's challenge .pkl converts to MMScan's binary .npz, scoring as the devkit scored the same
content; the dataset's annotations and scene-info pickle convert to labels that load_labels takes."""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import numpy as np
import pytest

from evaluation_workers.cli import main as cli
from evaluation_workers.convert import ConvertError, convert
from evaluation_workers.tracks import mmscan_vg

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "mmscan_vg"
DEVKIT_OVERALL = {"gTop-1@0.25": "gTop-1@0.25", "gTop-3@0.5": "gTop-3@0.5", "AP@0.25": "AP_sample@0.25",
                  "AR@0.5": "AR@0.5", "AP_C@0.25": "AP_box@0.25"}


def _challenge_pkl(path: Path, results: list[dict[str, np.ndarray]]) -> None:
    """What EmbodiedScan's tools/submit_results.py writes: mmengine.dump of this dict (pickle protocol 2)."""
    submit = {"method": "Baseline", "team": "EmbodiedScan", "authors": "EmbodiedScan Team", "e-mail": "x@y.z",
              "institution": "Lab", "country": "China", "results": results}
    with open(path, "wb") as f:
        pickle.dump(submit, f, protocol=2)


def test_it_converts_a_challenge_pkl_to_the_binary_form_and_scores_like_the_devkit(tmp_path: Path) -> None:
    labels = FIXTURES / "devkit_labels.json"
    preds = {p["sample_id"]: p for p in json.loads((FIXTURES / "devkit_predictions.json").read_text())}
    order = [s["sample_id"] for s in json.loads(labels.read_text())]
    # format_only's test_results: per prompt in the test set's order, numpy boxes and scores, no ids
    results = [{"bboxes_3d": np.array(preds[s]["pred_bboxes"], dtype=np.float32),
                "scores_3d": np.array(preds[s]["pred_scores"], dtype=np.float32)} for s in order]
    _challenge_pkl(tmp_path / "submission.pkl", results)
    (tmp_path / "manifest.json").write_text(json.dumps(mmscan_vg.manifest(labels)))
    dest = tmp_path / "predictions.npz"
    assert cli(["convert", "--track", "mmscan-vg", "--from", "embodiedscan-pkl", "--manifest",
                str(tmp_path / "manifest.json"), str(tmp_path / "submission.pkl"), str(dest)]) == 0

    got, direct = mmscan_vg.score(labels, dest), mmscan_vg.score(labels, FIXTURES / "devkit_predictions.json")
    assert got["metrics"] == pytest.approx(direct["metrics"], abs=1e-12)  # the fixture's numbers are float32-exact
    for group, values in direct["breakdown"].items():
        assert got["breakdown"][group] == pytest.approx(values, abs=1e-12), group
    devkit = json.loads((FIXTURES / "devkit_metrics.json").read_text())["overall"]
    for theirs, ours in DEVKIT_OVERALL.items():
        assert got["metrics"][ours] == pytest.approx(devkit[theirs], abs=1e-6), theirs


def test_it_matches_a_list_to_explicit_sample_ids_and_reads_devkit_items(tmp_path: Path) -> None:
    ids = ["b", "a"]
    items = [{"pred_bboxes": np.ones((2, 9)), "pred_scores": np.array([[0.9], [0.1]])},  # the devkit's (N, 1)
             {"pred_bboxes": np.zeros((0, 9)), "pred_scores": np.zeros((0, 1))}]
    with open(tmp_path / "r.pkl", "wb") as f:
        pickle.dump(items, f)
    (tmp_path / "ids.txt").write_text("\n".join(ids) + "\n")
    convert("mmscan-vg", "embodiedscan-pkl", tmp_path / "r.pkl", tmp_path / "o.npz", None,
            sample_ids=tmp_path / "ids.txt")
    with np.load(tmp_path / "o.npz") as out:
        assert out["sample_id"].tolist() == ids and out["offsets"].tolist() == [0, 2, 2]
        assert out["pred_scores"].tolist() == [0.9, 0.1]


def test_it_refuses_a_list_whose_length_is_not_the_number_of_ids(tmp_path: Path) -> None:
    _challenge_pkl(tmp_path / "s.pkl", [{"bboxes_3d": np.ones((1, 9)), "scores_3d": np.ones(1)}])
    with pytest.raises(ConvertError, match=r"s.pkl: Expected one result per sample id \(2, in order\), "
                                           r"but got 1 results"):
        convert("mmscan-vg", "embodiedscan-pkl", tmp_path / "s.pkl", tmp_path / "o.npz",
                {"sample_ids": ["x", "y"]})


def test_it_writes_labels_from_the_annotations_and_the_scene_infos(tmp_path: Path, capsys) -> None:
    infos = {"metainfo": {"categories": {"chair": 1, "table": 2}},
             "data_list": [{"sample_idx": "scannet/scene0000_00", "images": [],
                            "instances": [{"bbox_3d": [1, 2, 0.5, 1, 1, 1, 0.1, 0, 0], "bbox_label_3d": 1, "bbox_id": 3},
                                          {"bbox_3d": [4, 2, 0.5, 2, 1, 1, 0, 0, 0], "bbox_label_3d": 2,
                                           "bbox_id": 7}]}]}
    with open(tmp_path / "embodiedscan_infos_val.pkl", "wb") as f:
        pickle.dump(infos, f, protocol=2)  # mmengine.dump, as the dataset ships it
    samples = [
        {"ID": "VG_0", "scan_id": "scannet/scene0000_00", "text": "the chair", "sub_class": "VG_Single_Space",
         "target_id": [3], "target": ["chair"], "anchor_ids": [7], "anchors": ["table"], "distractor_ids": []},
        {"ID": "VG_1", "scan_id": "scannet/scene0000_00", "text": "both", "sub_class": "VG_Inter_OR",
         "target_id": [7, 3], "target": ["table", "chair"], "anchor_ids": [], "distractor_ids": []},
        {"ID": "VG_2", "scan_id": "scannet/scene0000_00", "text": "gone", "sub_class": "VG_Inter_OR",
         "target_id": [99], "target": ["lamp"], "anchor_ids": [], "distractor_ids": []},  # the devkit drops it
    ]
    (tmp_path / "MMScan_VG.json").write_text(json.dumps({"val": samples, "train": []}))
    out = tmp_path / "labels.json"
    assert cli(["convert-labels", "--track", "mmscan-vg", "--annotations", str(tmp_path / "MMScan_VG.json"),
                "--infos", str(tmp_path / "embodiedscan_infos_val.pkl"), "--split", "val", str(out)]) == 0
    captured = capsys.readouterr()
    assert "is a pickle; reading it runs any code it contains" in captured.err
    assert "2 val samples" in captured.out and "1 left out" in captured.out
    labels = mmscan_vg.load_labels(out)
    assert labels.sample_ids == ["VG_0", "VG_1"]
    written = json.loads(out.read_text())
    assert written[1]["gt_bboxes"] == [[4, 2, 0.5, 2, 1, 1, 0, 0, 0], [1, 2, 0.5, 1, 1, 1, 0.1, 0, 0]]
