"""The plugin's numbers equal a slow re-statement of ScanRefer's script, on generated data."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import scanrefer_reference as reference
import scanrefer_track
from scanrefer_track import iou, synthetic

from evaluation_workers.plugin import no_progress


@pytest.fixture(autouse=True)
def _few_resamples(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVAL_BOOTSTRAP_RESAMPLES", "100")


def _write(tmp_path: Path, labels: list[dict[str, Any]], predictions: list[dict[str, Any]]) -> tuple[Path, Path]:
    return (synthetic.write_json(tmp_path / "labels.json", labels),
            synthetic.write_json(tmp_path / "predictions.json", predictions))


def _assert_equal_to_reference(result: dict[str, Any], expected: dict[str, Any]) -> None:
    """Every accuracy and count of ours equals the script's, an empty cell null where the script prints 0."""
    scores, stats = expected["scores"], expected["stats"]

    def ours_for(subset: str, cell: str) -> dict[str, Any]:
        if cell == "overall":
            if subset == "overall":
                return result["metrics"] | {"count": result["details"]["predicted"] + result["details"]["missing"]}
            return result["breakdown"][subset]
        return result["details"]["cells"][f"{subset}/{cell}"]

    for subset in ("unique", "multiple", "overall"):
        for cell in ("not_in_others", "in_others", "overall"):
            ours = ours_for(subset, cell)
            count = stats[subset][cell]
            assert ours["count"] == count, (subset, cell)
            for metric, key in (("Acc@0.25", "acc@0.25iou"), ("Acc@0.5", "acc@0.5iou")):
                want = scores[subset][cell][key] if count else None
                assert ours[metric] == want, (subset, cell, metric)


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
@pytest.mark.parametrize("form", ["bbox", "box", "mixed"])
def test_it_equals_the_script_on_generated_data(tmp_path: Path, seed: int, form: str) -> None:
    labels = synthetic.random_labels(seed, scenes=8, integer_boxes=seed % 2 == 1)
    predictions = synthetic.random_predictions(labels, seed + 100, form=form, edges=0.3, extra_keys=seed == 2)
    labels_path, predictions_path = _write(tmp_path, labels, predictions)
    result = scanrefer_track.score(labels_path, predictions_path, no_progress)
    _assert_equal_to_reference(result, reference.evaluate(labels, predictions))


def test_it_counts_missing_descriptions_as_misses(tmp_path: Path) -> None:
    labels = synthetic.random_labels(5, scenes=6)
    predictions = synthetic.random_predictions(labels, 6, right=1.0, edges=0.0, drop=0.3)
    labels_path, predictions_path = _write(tmp_path, labels, predictions)
    result = scanrefer_track.score(labels_path, predictions_path, no_progress)
    _assert_equal_to_reference(result, reference.evaluate(labels, predictions, missing_as_miss=True))
    missing = len(labels) - len(predictions)
    assert missing > 0 and result["details"]["missing"] == missing
    assert any(w.startswith(f"{missing} of {len(labels)} descriptions have no prediction") for w in result["warnings"])
    # The script's own denominator (the predictions given) would score higher: the rule matters here.
    script = reference.evaluate(labels, predictions, missing_as_miss=False)["scores"]["overall"]["overall"]
    assert result["metrics"]["Acc@0.25"] < script["acc@0.25iou"]


@pytest.mark.parametrize("kind", synthetic.EDGE_CASES)
@pytest.mark.parametrize("form", ["bbox", "box"])
def test_each_edge_case_has_the_scripts_iou(kind: str, form: str) -> None:
    rng = np.random.default_rng(7)
    for integer in (True, False):
        lo = np.floor(rng.uniform(0, 5, 3)) if integer else rng.uniform(0, 5, 3)
        hi = lo + (np.array([2.0, 1.0, 4.0]) if integer else rng.uniform(0.1, 2, 3))
        gt = synthetic.corners_of(lo, hi, rng)
        p_lo, p_hi = synthetic.edge_box(kind, lo, hi)
        if form == "bbox":
            pred = synthetic.corners_of(p_lo, p_hi, rng)
            ours_lo, ours_hi = iou.corners_to_bounds(np.asarray([pred]))
        else:
            box = [*((p_lo + p_hi) / 2).tolist(), *(p_hi - p_lo).tolist()]
            pred = reference.box_corners(box)
            ours_lo, ours_hi = iou.centre_size_to_bounds(np.asarray([box]))
        gt_lo, gt_hi = iou.corners_to_bounds(np.asarray([gt]))
        ours = float(iou.paired_iou(ours_lo, ours_hi, gt_lo, gt_hi)[0])
        assert ours == reference.box3d_iou(pred, gt)


def test_an_exact_iou_of_one_half_falls_below_the_threshold_as_in_the_script() -> None:
    lo, hi = np.zeros(3), np.array([1.0, 1.0, 2.0])
    p_lo, p_hi = synthetic.edge_box("half_height", lo, hi)
    value = float(iou.paired_iou(p_lo[None], p_hi[None], lo[None], hi[None])[0])
    assert value == 1.0 / (2.0 + 1.0 - 1.0 + 1e-8) and value < 0.5
    quarter = synthetic.edge_box("quarter_height", lo, hi)
    assert float(iou.paired_iou(quarter[0][None], quarter[1][None], lo[None], hi[None])[0]) < 0.25


def test_touching_and_flat_boxes_score_zero() -> None:
    lo, hi = np.zeros(3), np.ones(3)
    for kind in ("touching", "flat", "point", "outside"):
        p_lo, p_hi = synthetic.edge_box(kind, lo, hi)
        assert float(iou.paired_iou(p_lo[None], p_hi[None], lo[None], hi[None])[0]) == 0.0


def test_an_empty_group_is_null(tmp_path: Path) -> None:
    labels = [dict(item, unique_multiple=1) for item in synthetic.random_labels(3, scenes=5)]
    predictions = synthetic.random_predictions(labels, 4)
    result = scanrefer_track.score(*_write(tmp_path, labels, predictions), no_progress)
    assert result["breakdown"]["unique"] == {"Acc@0.25": None, "Acc@0.5": None, "count": 0}
    assert result["details"]["cells"]["unique/in_others"]["Acc@0.25"] is None
    assert result["breakdown"]["multiple"]["count"] == len(labels)
    json.dumps(result, allow_nan=False)  # no NaN anywhere


def test_intervals_come_with_enough_scenes(tmp_path: Path) -> None:
    labels = synthetic.random_labels(11, scenes=30, objects=(4, 8))
    predictions = synthetic.random_predictions(labels, 12)
    outcomes: dict[str, Any] = {}
    result = scanrefer_track.score(*_write(tmp_path, labels, predictions), no_progress, outcomes=outcomes)
    for key in ("Acc@0.25", "Acc@0.5", "unique/Acc@0.25", "multiple/Acc@0.5"):
        lo, hi = result["intervals"][key]
        group, _, metric = key.rpartition("/")
        point = result["breakdown"][group][metric] if group else result["metrics"][metric]
        assert lo <= point <= hi, key
    assert "withheld" not in result["bootstrap"]
    assert result["bootstrap"]["unit"] == "scene" and result["bootstrap"]["units"] == 30
    assert result["bootstrap"]["scored_unit"] == "description"
    # The outcomes recompute the result exactly (what partitions and paired tests rely on).
    track = scanrefer_track.TRACK
    assert track.units_of(outcomes) == len(labels)
    assert len(np.unique(track.scenes_of(outcomes))) == 30
    values = track.statistic(outcomes)(np.ones((1, len(labels))))
    assert float(values["Acc@0.25"][0]) == pytest.approx(result["metrics"]["Acc@0.25"], abs=1e-12)
    assert float(values["multiple/Acc@0.5"][0]) == pytest.approx(result["breakdown"]["multiple"]["Acc@0.5"], abs=1e-12)
    assert set(track.groups_of(outcomes)) == {"unique", "multiple"}


def test_intervals_are_withheld_with_few_scenes(tmp_path: Path) -> None:
    labels = synthetic.random_labels(13, scenes=5)
    result = scanrefer_track.score(*_write(tmp_path, labels, synthetic.random_predictions(labels, 14)), no_progress)
    assert set(result["intervals"].values()) == {None}
    assert any(w.startswith("No confidence intervals: 5 scenes scored") for w in result["warnings"])


def test_the_result_records_the_scorer_and_both_checksums(tmp_path: Path) -> None:
    import hashlib

    labels = synthetic.random_labels(15, scenes=3)
    labels_path, predictions_path = _write(tmp_path, labels, synthetic.random_predictions(labels, 16))
    result = scanrefer_track.score(labels_path, predictions_path, no_progress)
    assert result["track"] == "scanrefer" and result["scorer_version"] == scanrefer_track.TRACK.scorer_version
    assert result["labels_sha256"] == hashlib.sha256(labels_path.read_bytes()).hexdigest()
    assert result["predictions_sha256"] == hashlib.sha256(predictions_path.read_bytes()).hexdigest()


def test_prepared_labels_score_alike(tmp_path: Path) -> None:
    labels = synthetic.random_labels(17, scenes=4)
    labels_path, predictions_path = _write(tmp_path, labels, synthetic.random_predictions(labels, 18))
    public = scanrefer_track.prepare_labels(labels_path, tmp_path / "prepared")
    assert public == scanrefer_track.manifest(labels_path)
    from_file = scanrefer_track.score(labels_path, predictions_path, no_progress)
    from_folder = scanrefer_track.score(tmp_path / "prepared", predictions_path, no_progress)
    assert from_folder["metrics"] == from_file["metrics"]
    assert from_folder["labels_sha256"] != "" and from_folder["breakdown"] == from_file["breakdown"]
