"""Masks of class 0 or K+1 are dropped exactly as the unmodified official evaluator drops them."""

from __future__ import annotations

import csv
import math
from pathlib import Path

import pytest

from evaluation_workers.tracks.openscan import score

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "openscan"
DROP = FIXTURES / "golden_drop"


@pytest.fixture(scope="module")
def result() -> dict:
    return score(FIXTURES / "golden" / "labels", DROP / "predictions.zip")


def _same(ours: float | None, official: float) -> bool:
    if math.isnan(official):
        return ours is None
    return ours is not None and abs(ours - official) < 1e-12


@pytest.fixture(scope="module")
def text_result(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """The same predictions in ScanNet's text layout (the OpenScan README's other form), unconverted."""
    from tests.evaluation_workers.test_openscan_forms import to_text_layout

    text = to_text_layout(DROP / "predictions.zip", tmp_path_factory.mktemp("text") / "text.zip")
    return score(FIXTURES / "golden" / "labels", text)


@pytest.mark.parametrize("form", ["official npz zip", "ScanNet text layout"])
@pytest.mark.parametrize("aspect", ["material", "synonym"])
def test_it_equals_the_official_evaluator_per_class_and_overall(
    request: pytest.FixtureRequest, aspect: str, form: str
) -> None:
    result = request.getfixturevalue("result" if form.startswith("official") else "text_result")
    assert result["details"]["format"] == ("official" if form.startswith("official") else "text")
    rows = list(csv.reader((DROP / f"official_instance_{aspect}.csv").open()))
    for name, _, ap, ap50, ap25 in rows[1:-1]:
        ours = result["details"]["per_class"][f"{aspect}/{name}"]
        assert _same(ours["AP"], float(ap)) and _same(ours["AP50"], float(ap50)) and _same(ours["AP25"], float(ap25))
    ap, ap50, ap25 = (float(x) for x in rows[-1])
    row = result["breakdown"][aspect]
    assert _same(row["AP"], ap) and _same(row["AP50"], ap50) and _same(row["AP25"], ap25)


def test_it_says_how_many_masks_of_which_aspect_it_dropped(result: dict) -> None:
    import re

    dropped = dict(found[0] for w in result["warnings"]
                   if (found := re.findall(r"^(\w+): dropped (\d+) masks in 4 of 4 scenes", w)))
    assert set(dropped) == {"material", "synonym"} and all(int(n) > 0 for n in dropped.values())
