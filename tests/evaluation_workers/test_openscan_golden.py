"""Our scorer equals the official evaluators' printed numbers on the committed golden inputs."""

from __future__ import annotations

import csv
import math
import re
from pathlib import Path

import pytest

from evaluation_workers.tracks.openscan import score

GOLDEN = Path(__file__).resolve().parents[1] / "fixtures" / "openscan" / "golden"
ASPECTS = ("material", "synonym")


@pytest.fixture(scope="module")
def result(tmp_path_factory: pytest.TempPathFactory) -> dict:
    return score(GOLDEN / "labels", GOLDEN / "predictions.zip")


def _official_instance(aspect: str) -> tuple[dict[str, tuple[float, float, float]], tuple[float, ...]]:
    rows = list(csv.reader((GOLDEN / f"official_instance_{aspect}.csv").open()))
    per_class = {r[0]: (float(r[2]), float(r[3]), float(r[4])) for r in rows[1:-1]}
    return per_class, tuple(float(x) for x in rows[-1])


def _same(ours: float | None, official: float) -> bool:
    if math.isnan(official):
        return ours is None
    return ours is not None and abs(ours - official) < 1e-12


@pytest.mark.parametrize("aspect", ASPECTS)
def test_it_equals_the_official_instance_ap_per_class(result: dict, aspect: str) -> None:
    per_class, _ = _official_instance(aspect)
    for name, (ap, ap50, ap25) in per_class.items():
        ours = result["details"]["per_class"][f"{aspect}/{name}"]
        assert _same(ours["AP"], ap) and _same(ours["AP50"], ap50) and _same(ours["AP25"], ap25), name


@pytest.mark.parametrize("aspect", ASPECTS)
def test_it_equals_the_official_aspect_averages(result: dict, aspect: str) -> None:
    _, (ap, ap50, ap25) = _official_instance(aspect)
    row = result["breakdown"][aspect]
    assert _same(row["AP"], ap) and _same(row["AP50"], ap50) and _same(row["AP25"], ap25)


@pytest.mark.parametrize("aspect", ASPECTS)
def test_it_equals_the_official_semantic_iou_per_class(result: dict, aspect: str) -> None:
    text = (GOLDEN / f"official_semantic_{aspect}.stdout.txt").read_text()
    lines = re.findall(r"^(.+?)\s*:\s*\S+\s+\(\s*(\d+)/(\d+)\s*\)$", text, flags=re.MULTILINE)
    assert lines
    for name, tp, denom in lines:
        ours = result["details"]["semantic_per_class"][f"{aspect}/{name.strip()}"]["IoU"]
        expected = int(tp) / int(denom) if int(denom) else float("nan")
        assert _same(ours, expected), name


def test_it_averages_all_attribute_classes_for_the_overall_ap(result: dict) -> None:
    values = [v["AP"] for v in result["details"]["per_class"].values() if v["AP"] is not None]
    assert result["metrics"]["AP"] == pytest.approx(sum(values) / len(values), abs=1e-15)
