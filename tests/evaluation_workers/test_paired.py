"""Paired significance tests against slow, obvious references.

McNemar's exact test against scipy's exact binomial test; the paired
bootstrap against a loop over the same resamples (``bootstrap.draw_indices``)
that rebuilds each resample's per-question hits and subtracts the means.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy.stats import binomtest

from evaluation_workers import outcomes, significance
from evaluation_workers.metrics import bootstrap, paired
from evaluation_workers.tracks import get_track
from evaluation_workers.tracks import sqa3d as sqa3d_track


@pytest.mark.parametrize(("n", "p_a", "p_b", "seed"), [(40, 0.5, 0.5, 1), (300, 0.6, 0.5, 2), (3519, 0.45, 0.44, 3),
                                                       (25, 0.9, 0.1, 4), (10, 0.5, 0.5, 5)])
def test_mcnemar_equals_the_exact_binomial_test(n: int, p_a: float, p_b: float, seed: int) -> None:
    rng = np.random.default_rng(seed)
    a, b = rng.random(n) < p_a, rng.random(n) < p_b
    found = paired.mcnemar(a, b)
    only_a, only_b = int((a & ~b).sum()), int((~a & b).sum())
    want = binomtest(only_a, only_a + only_b, 0.5).pvalue if only_a + only_b else 1.0
    assert (found["only_a"], found["only_b"]) == (only_a, only_b)
    assert found["p_value"] == pytest.approx(want, rel=1e-9, abs=1e-300)
    assert found["difference"] == pytest.approx(a.mean() - b.mean())


def test_mcnemar_of_identical_submissions_is_one() -> None:
    a = np.array([True, False, True])
    assert paired.mcnemar(a, a)["p_value"] == 1.0


def _reference(a: dict[str, np.ndarray], b: dict[str, np.ndarray], resamples: int) -> tuple[float, list[float]]:
    """p-value and percentile interval of A - B of EM, one resample at a time."""
    n = a["em"].shape[0]
    diffs = []
    for block in bootstrap.draw_indices(n, resamples):
        for idx in block:
            diffs.append(sum(bool(a["em"][i]) for i in idx) / n - sum(bool(b["em"][i]) for i in idx) / n)
    below = sum(d <= 0 for d in diffs)
    above = sum(d >= 0 for d in diffs)
    p = min(1.0, 2 * (min(below, above) + 1) / (len(diffs) + 1))
    ordered = sorted(diffs)

    def percentile(q: float) -> float:  # numpy's linear interpolation
        pos = q / 100 * (len(ordered) - 1)
        lo = int(pos)
        return ordered[lo] + (ordered[min(lo + 1, len(ordered) - 1)] - ordered[lo]) * (pos - lo)

    return p, [percentile(2.5), percentile(97.5)]


@pytest.mark.parametrize(("shift", "seed"), [(0.0, 1), (0.05, 2), (0.2, 3)])
def test_the_paired_bootstrap_equals_a_loop_over_the_same_resamples(shift: float, seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = 120
    types = rng.integers(0, 6, n)
    em_a = rng.random(n) < 0.5
    em_b = np.where(rng.random(n) < shift, False, em_a) ^ (rng.random(n) < 0.1)
    a = {"em": em_a, "em_r": em_a, "type": types}
    b = {"em": em_b, "em_r": em_b, "type": types}
    found = paired.paired_bootstrap(sqa3d_track.outcomes_statistic(a), sqa3d_track.outcomes_statistic(b), n,
                                    "EM", 150)
    p, interval = _reference(a, b, 150)
    assert found["p_value"] == pytest.approx(p, abs=1e-12)
    assert found["interval"] == pytest.approx(interval, abs=1e-12)
    assert found["difference"] == pytest.approx(em_a.mean() - em_b.mean(), abs=1e-12)


def test_a_submission_against_itself_is_not_significant(tmp_path: Path) -> None:
    import json

    from evaluation_workers.synthetic.mmscan_vg import make_data

    labels, preds = make_data(40, seed=2, min_preds=1, max_preds=8, max_gt=3, empty_fraction=0.0,
                              objects_per_scene=5)
    (tmp_path / "l.json").write_text(json.dumps(labels))
    (tmp_path / "p.json").write_text(json.dumps(preds))
    kept: dict[str, Any] = {}
    get_track("mmscan-vg").score(tmp_path / "l.json", tmp_path / "p.json", outcomes=kept)
    found = significance.compare("mmscan-vg", kept, kept, "AP_box@0.25", resamples=50)
    assert found["p_value"] == 1.0 and found["interval"] == [0.0, 0.0] and found["difference"] == 0.0


def test_outcomes_round_trip_through_the_worker_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVAL_OUTCOMES_DIR", str(tmp_path))
    kept = {"material": {"group": np.arange(3), "score": np.array([0.5, 0.2, 0.1]),
                         "unit": np.array([0, 70_000, -3])}, "em": np.array([True])}
    outcomes.save("openscan/abc/def-v1.1.0.npz", kept)
    back = outcomes.load("openscan/abc/def-v1.1.0.npz")
    assert back is not None and back["em"].tolist() == [True]
    assert back["material"]["score"].tolist() == [0.5, 0.2, 0.1]
    assert back["material"]["unit"].tolist() == [0, 70_000, -3] and back["material"]["unit"].dtype == np.int64
    assert outcomes.load("openscan/abc/none.npz") is None
    assert not list(tmp_path.rglob(".part-*"))
