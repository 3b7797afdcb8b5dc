"""Reading ScanRefer labels and predictions: the manifest, each refusal's words, the IoU kernel's backends."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import scanrefer_reference as reference
import scanrefer_track
from scanrefer_track import iou, synthetic

from evaluation_workers.plugin import LabelsError, PredictionFormatError


@pytest.fixture
def split(tmp_path: Path) -> tuple[list[dict[str, Any]], Path, dict[str, Any]]:
    labels = synthetic.random_labels(21, scenes=3)
    path = synthetic.write_json(tmp_path / "labels.json", labels)
    return labels, path, scanrefer_track.manifest(path)


def _predictions(tmp_path: Path, items: Any, name: str = "pred.json") -> Path:
    path = tmp_path / name
    path.write_text(items if isinstance(items, str) else json.dumps(items))
    return path


def _one(labels: list[dict[str, Any]], **fields: Any) -> dict[str, Any]:
    item = {"scene_id": labels[0]["scene_id"], "object_id": labels[0]["object_id"], "ann_id": labels[0]["ann_id"],
            "bbox": labels[0]["bbox"]}
    item.update(fields)
    return {k: v for k, v in item.items() if v is not ...}


def test_the_manifest_holds_public_ids_only(split: tuple[list[dict[str, Any]], Path, dict[str, Any]]) -> None:
    labels, _, manifest = split
    assert manifest["track"] == "scanrefer" and manifest["count"] == len(labels)
    assert manifest["descriptions"] == [[x["scene_id"], x["object_id"], x["ann_id"]] for x in labels]
    assert manifest["scenes"] == sorted({x["scene_id"] for x in labels})
    text = json.dumps(manifest)
    assert "bbox" not in text and "others" not in text and "unique_multiple" not in text
    assert set(manifest) == set(scanrefer_track.MANIFEST_SCHEMA["properties"])


def test_it_validates_a_good_file_and_warns_of_ignored_keys_once(
        tmp_path: Path, split: tuple[list[dict[str, Any]], Path, dict[str, Any]]) -> None:
    labels, _, manifest = split
    predictions = synthetic.random_predictions(labels, 1, form="mixed", drop=0.2, extra_keys=True)
    summary = scanrefer_track.validate(_predictions(tmp_path, predictions), manifest)
    assert summary["predicted"] == len(predictions) and summary["count"] == len(labels)
    assert summary["missing"] == len(labels) - len(predictions) and summary["format"] == "mixed"
    ignored = [w for w in summary["warnings"] if "ignored keys" in w]
    assert len(ignored) == 1 and "others, unique_multiple" in ignored[0]


def test_it_reads_gzip(tmp_path: Path, split: tuple[list[dict[str, Any]], Path, dict[str, Any]]) -> None:
    labels, _, manifest = split
    path = tmp_path / "pred.json"
    path.write_bytes(gzip.compress(json.dumps(synthetic.random_predictions(labels, 2)).encode()))
    assert scanrefer_track.validate(path, manifest)["count"] == len(labels)


BAD_ITEMS = [
    ({"bbox": [[0, 0, 0]] * 7}, "item 1: Expected `bbox` to be 8 corners [[x, y, z], ...] of finite numbers, "
                                "but got a list of 7"),
    ({"bbox": [[0, 0, 0]] * 7 + [[0, 0]]}, "Expected `bbox` to be 8 corners [[x, y, z], ...] of finite numbers, "
                                           "but corner 7 is a list of 2"),
    ({"bbox": [[0, 0, 0]] * 7 + [[0, "1", 0]]}, "but corner 7 holds '1'"),
    ({"bbox": [[0, 0, 0]] * 7 + [[0, True, 0]]}, "but corner 7 holds true"),
    ({"bbox": ..., "box": [0, 0, 0, 1, 1, -0.5]}, "Expected `box` to be [cx, cy, cz, dx, dy, dz] of finite numbers "
                                                  "with sizes dx, dy, dz >= 0, but got a size of -0.5"),
    ({"bbox": ..., "box": [0, 0, 0, 1, 1]}, "Expected `box` to be [cx, cy, cz, dx, dy, dz] of finite numbers, "
                                            "but got a list of 5"),
    ({"box": [0, 0, 0, 1, 1, 1]}, "Expected either `bbox` (8 corners) or `box` ([cx, cy, cz, dx, dy, dz]), "
                                  "but got both"),
    ({"bbox": ...}, "but got neither"),
    ({"object_id": ...}, "Expected keys `scene_id`, `object_id`, `ann_id` and `bbox` (or `box`), but `object_id` "
                         "is missing"),
    ({"ann_id": 1.5}, "Expected `ann_id` to be a string or an integer, but got 1.5"),
    ({"scene_id": 3}, "Expected `scene_id` to be a scene id (a non-empty string), but got 3"),
]


@pytest.mark.parametrize(("fields", "message"), BAD_ITEMS)
def test_it_refuses_a_bad_item_naming_the_field(
        tmp_path: Path, split: tuple[list[dict[str, Any]], Path, dict[str, Any]], fields: dict[str, Any],
        message: str) -> None:
    labels, _, manifest = split
    with pytest.raises(PredictionFormatError) as caught:
        scanrefer_track.validate(_predictions(tmp_path, [_one(labels, **fields)]), manifest)
    assert caught.value.message.startswith("pred.json: item 1: ") and message in caught.value.message


@pytest.mark.parametrize("number", ["NaN", "Infinity", "-Infinity", "1" + "0" * 400])
def test_it_refuses_numbers_that_are_not_finite(
        tmp_path: Path, split: tuple[list[dict[str, Any]], Path, dict[str, Any]], number: str) -> None:
    labels, _, manifest = split
    good = json.dumps([_one(labels), _one(labels, ann_id="other", box=[0, 0, 0, 1, 1, 1], bbox=...)])
    text = good.replace("[0, 0, 0, 1, 1, 1]", f"[0, 0, {number}, 1, 1, 1]")
    with pytest.raises(PredictionFormatError, match=r"pred.json: item 2: Expected `box` to be .* finite numbers"):
        scanrefer_track.validate(_predictions(tmp_path, text), manifest)


def test_it_refuses_a_description_given_twice(
        tmp_path: Path, split: tuple[list[dict[str, Any]], Path, dict[str, Any]]) -> None:
    labels, _, manifest = split
    item = _one(labels)
    twice = [item, _one(labels, object_id=int(item["object_id"]))]  # 5 and "5" are one description
    with pytest.raises(PredictionFormatError, match=r"item 2: Expected each description once, but "
                                                    r"\(scene0000_00, \d+, 0\) was already given at item 1"):
        scanrefer_track.validate(_predictions(tmp_path, twice), manifest)


def test_it_refuses_unknown_descriptions(tmp_path: Path,
                                         split: tuple[list[dict[str, Any]], Path, dict[str, Any]]) -> None:
    labels, _, manifest = split
    unknown = [_one(labels, scene_id="scene0999_00")]
    with pytest.raises(PredictionFormatError, match=r"pred.json: Expected descriptions \(scene_id, object_id, "
                                                    r"ann_id\) of this split only, but got 1 unknown: "
                                                    r"\(scene0999_00, "):
        scanrefer_track.validate(_predictions(tmp_path, unknown), manifest)


@pytest.mark.parametrize(("text", "message"), [
    ("", "Expected a JSON list of predictions, but got an empty file"),
    ("[{]", "Expected valid JSON, but got a syntax error at line 1"),
    ('{"scene_id": "a"}', "Expected a JSON list of {\"scene_id\", \"object_id\", \"ann_id\", \"bbox\"} objects, "
                          "but got an object"),
    ("[3]", "item 1: Expected an object"),
])
def test_it_refuses_a_file_that_is_not_a_list_of_objects(
        tmp_path: Path, split: tuple[list[dict[str, Any]], Path, dict[str, Any]], text: str, message: str) -> None:
    with pytest.raises(PredictionFormatError) as caught:
        scanrefer_track.validate(_predictions(tmp_path, text), split[2])
    assert message in caught.value.message


def test_it_refuses_far_more_items_than_descriptions(
        tmp_path: Path, split: tuple[list[dict[str, Any]], Path, dict[str, Any]]) -> None:
    labels, _, manifest = split
    many = [_one(labels, ann_id=str(i)) for i in range(2 * len(labels) + 1001)]
    with pytest.raises(PredictionFormatError, match="but got more than"):
        scanrefer_track.validate(_predictions(tmp_path, many), manifest)


@pytest.mark.parametrize(("change", "message"), [
    ({"unique_multiple": 2}, "entry 0: Expected `unique_multiple` to be 0 or 1, but got 2"),
    ({"others": None}, "entry 0: Expected `others` to be 0 or 1, but got null"),
    ({"bbox": [[0, 0, 0]]}, "entry 0: Expected `bbox` to be 8 corners"),
    ({"object_id": None}, "entry 0: Expected `object_id` to be a string or an integer"),
])
def test_it_refuses_unusable_labels(tmp_path: Path, change: dict[str, Any], message: str) -> None:
    labels = synthetic.random_labels(22, scenes=2)
    labels[0].update(change)
    with pytest.raises(LabelsError, match=message.replace("[", r"\[")):
        scanrefer_track.manifest(synthetic.write_json(tmp_path / "labels.json", labels))


def test_it_refuses_labels_with_a_description_twice(tmp_path: Path) -> None:
    labels = synthetic.random_labels(23, scenes=2)
    with pytest.raises(LabelsError, match="entry 1: description .* is also entry 0"):
        scanrefer_track.manifest(synthetic.write_json(tmp_path / "labels.json", [labels[0], dict(labels[0])]))


def test_prepare_labels_copies_the_file_and_refuses_a_stale_one(tmp_path: Path) -> None:
    labels = synthetic.random_labels(24, scenes=2)
    path = synthetic.write_json(tmp_path / "ScanRefer_val.json", labels)
    dest = tmp_path / "prepared"
    scanrefer_track.prepare_labels(path, dest)
    assert (dest / path.name).read_bytes() == path.read_bytes()
    other = synthetic.write_json(tmp_path / "other" / "ScanRefer_test.json", labels)
    with pytest.raises(LabelsError, match="Expected no other labels file"):
        scanrefer_track.prepare_labels(other, dest)


def test_the_sample_validates_against_its_own_ids(tmp_path: Path) -> None:
    sample = json.loads(scanrefer_track.SAMPLE.read_text())
    labels = [{"scene_id": s["scene_id"], "object_id": s["object_id"], "ann_id": s["ann_id"],
               "bbox": synthetic.corners_of(np.zeros(3), np.ones(3)), "unique_multiple": 0, "others": 0}
              for s in sample]
    manifest = scanrefer_track.manifest(synthetic.write_json(tmp_path / "labels.json", labels))
    assert scanrefer_track.validate(scanrefer_track.SAMPLE, manifest)["format"] == "mixed"


def test_the_package_files_exist() -> None:
    assert scanrefer_track.FORMAT_DOC.is_file() and scanrefer_track.METRICS_DOC.is_file()


XPS = ["numpy", "array_api_strict"]


@pytest.mark.parametrize("backend", XPS)
def test_the_kernel_runs_on_any_array_namespace(backend: str) -> None:
    xp = pytest.importorskip(backend)
    labels = synthetic.random_labels(3, scenes=4)
    preds = synthetic.random_predictions(labels, 4, edges=0.4)
    corners_pred = np.asarray([p["bbox"] for p in preds], dtype=np.float64)
    corners_gt = np.asarray([x["bbox"] for x in labels], dtype=np.float64)
    p_lo, p_hi = iou.corners_to_bounds(xp.asarray(corners_pred))
    g_lo, g_hi = iou.corners_to_bounds(xp.asarray(corners_gt))
    got = np.asarray(iou.paired_iou(p_lo, p_hi, g_lo, g_hi))
    want = [reference.box3d_iou(p["bbox"], x["bbox"]) for p, x in zip(preds, labels)]
    assert got.tolist() == want


def test_write_demo_gives_an_interval(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVAL_BOOTSTRAP_RESAMPLES", "100")
    labels, predictions = scanrefer_track.write_demo(tmp_path, "val")
    result = scanrefer_track.score(labels, predictions, lambda fraction, message="": None)
    assert result["intervals"]["Acc@0.25"] is not None
    assert 0.2 < result["metrics"]["Acc@0.25"] < 0.7
