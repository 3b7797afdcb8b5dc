"""The paired bootstrap (the interval of a difference) against a slow, obvious reference: a loop over
the same resamples (``bootstrap.draw_indices``) that rebuilds each resample's per-question hits and
subtracts the means, for every key at once (EM and EM_R, overall and per question type); resampling
scenes, the same scenes for both. The service's test's false-positive rate on methods equally good
by construction, with scene effects (after Holm's adjustment: tests/leaderboard/test_multiplicity.py;
the permutation test itself: test_permutation.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from evaluation_workers import outcomes
from evaluation_workers.metrics import bootstrap, paired, permutation
from evaluation_workers.tracks import get_track
from evaluation_workers.tracks import sqa3d as sqa3d_track
from evaluation_workers.worker import significance


def _percentile(values: list[float], q: float) -> float:
    """numpy's linear interpolation."""
    ordered = sorted(values)
    pos = q / 100 * (len(ordered) - 1)
    lo = int(pos)
    return ordered[lo] + (ordered[min(lo + 1, len(ordered) - 1)] - ordered[lo]) * (pos - lo)


def _reference(a: dict[str, np.ndarray], b: dict[str, np.ndarray], resamples: int,
               units: list[int], scenes: list[list[int]] | None = None
               ) -> dict[str, tuple[float | None, list[float] | None]]:
    """p-value and percentile interval of A - B of every SQA3D key, one resample at a time,
    drawing from ``units`` (their positions) as ``bootstrap.replicates`` does; with ``scenes``
    (each scene's unit positions, in scene order), drawing scenes and taking all their units."""
    keys = [(m, None) for m in ("EM", "EM_R")] + [(m, t) for t in range(len(sqa3d_track.QUESTION_TYPES))
                                                   for m in ("EM", "EM_R")]
    diffs: dict[tuple[str, int | None], list[float]] = {k: [] for k in keys}
    for block in bootstrap.draw_indices(len(units) if scenes is None else len(scenes), resamples):
        for drawn in block:
            idx = [units[i] for i in drawn] if scenes is None else [u for s in drawn for u in scenes[s]]
            for metric, t in keys:
                hits = metric.lower()
                chosen = [i for i in idx if t is None or a["type"][i] == t]
                if chosen:
                    diffs[(metric, t)].append(sum(bool(a[hits][i]) for i in chosen) / len(chosen)
                                              - sum(bool(b[hits][i]) for i in chosen) / len(chosen))
    found: dict[str, tuple[float | None, list[float] | None]] = {}
    for (metric, t), values in diffs.items():
        key = metric if t is None else f"{sqa3d_track.QUESTION_TYPES[t]}/{metric}"
        if not values:
            found[key] = (None, None)
            continue
        far = min(sum(d <= 0 for d in values), sum(d >= 0 for d in values))
        found[key] = (min(1.0, 2 * (far + 1) / (len(values) + 1)), [_percentile(values, 2.5),
                                                                   _percentile(values, 97.5)])
    return found


def _pair(n: int, shift: float, seed: int, types: int = 6) -> tuple[dict[str, Any], dict[str, Any]]:
    rng = np.random.default_rng(seed)
    kinds = rng.integers(0, types, n)
    em_a = rng.random(n) < 0.5
    em_b = np.where(rng.random(n) < shift, False, em_a) ^ (rng.random(n) < 0.1)
    em_r_b = em_b | (rng.random(n) < 0.05)
    return {"em": em_a, "em_r": em_a, "type": kinds}, {"em": em_b, "em_r": em_r_b, "type": kinds}


@pytest.mark.parametrize(("shift", "seed", "types"), [(0.0, 1, 6), (0.05, 2, 6), (0.2, 3, 6), (0.1, 4, 5)])
def test_the_paired_bootstrap_equals_a_loop_over_the_same_resamples_for_every_key(
        shift: float, seed: int, types: int) -> None:
    n = 120
    a, b = _pair(n, shift, seed, types)
    found = paired.paired_bootstrap(sqa3d_track.outcomes_statistic(a), sqa3d_track.outcomes_statistic(b), n, 150)
    want = _reference(a, b, 150, list(range(n)))
    assert set(found) == set(want)
    for key, (p, interval) in want.items():
        assert found[key]["test"] == "paired-bootstrap-by-scene"
        assert found[key]["p_value"] == pytest.approx(p, abs=1e-12), key
        assert found[key]["interval"] == pytest.approx(interval, abs=1e-12), key
    assert found["EM"]["difference"] == pytest.approx(a["em"].mean() - b["em"].mean(), abs=1e-12)
    assert found["EM_R"]["difference"] == pytest.approx(a["em_r"].mean() - b["em_r"].mean(), abs=1e-12)
    what = a["type"] == 0
    assert found["What/EM"]["difference"] == pytest.approx(a["em"][what].mean() - b["em"][what].mean())
    if types == 5:  # no question of the last type: undefined, not 0
        assert found["Others/EM"] == {"test": "paired-bootstrap-by-scene", "difference": None, "p_value": None,
                                      "interval": None}


def test_the_paired_bootstrap_passes_how_to_draw_on_to_the_resampling() -> None:
    """A keyword it does not know itself reaches ``bootstrap.replicates``: with ``subset`` the
    resamples are those of the subset's units alone."""
    n = 90
    a, b = _pair(n, 0.1, 7)
    subset = np.arange(0, n, 3)
    found = paired.paired_bootstrap(sqa3d_track.outcomes_statistic(a), sqa3d_track.outcomes_statistic(b), n, 120,
                                    subset=subset)
    want = _reference(a, b, 120, subset.tolist())
    for key, (p, interval) in want.items():
        assert found[key]["p_value"] == pytest.approx(p, abs=1e-12), key
        assert found[key]["interval"] == pytest.approx(interval, abs=1e-12), key
    whole = paired.paired_bootstrap(sqa3d_track.outcomes_statistic(a), sqa3d_track.outcomes_statistic(b), n, 120)
    assert whole["EM"]["interval"] != found["EM"]["interval"]


def test_the_paired_bootstrap_resamples_the_same_scenes_for_both() -> None:
    n = 150
    a, b = _pair(n, 0.1, 11)
    scene = np.random.default_rng(3).integers(0, 25, n)  # 25 scenes, questions in no order
    found = paired.paired_bootstrap(sqa3d_track.outcomes_statistic(a), sqa3d_track.outcomes_statistic(b), n, 130,
                                    scenes=scene)
    want = _reference(a, b, 130, list(range(n)), [np.flatnonzero(scene == s).tolist() for s in range(25)])
    for key, (p, interval) in want.items():
        assert found[key]["p_value"] == pytest.approx(p, abs=1e-12), key
        assert found[key]["interval"] == pytest.approx(interval, abs=1e-12), key


def equally_good(rng: np.random.Generator, methods: int, scenes: int = 67, per_scene: int = 52) -> list[Any]:
    """``methods`` submissions of the same population EM (0.5) on one SQA3D-shaped split: each scene
    has its difficulty (shared) and each method its own strengths by scene (the scene-by-method
    effect that makes a method's lead in one scene carry over to its other questions)."""
    scene = np.repeat(np.arange(scenes), per_scene)
    kinds = rng.integers(0, 6, scene.shape[0])
    difficulty = rng.normal(0.0, 0.6, scenes)
    found = []
    for _ in range(methods):
        logit = difficulty + rng.normal(0.0, 0.4, scenes)
        em = rng.random(scene.shape[0]) < 1 / (1 + np.exp(-logit[scene]))
        found.append({"em": em, "em_r": em, "type": kinds, "scene": scene})
    return found


def adjacent_p_values(methods: list[Any], by_scene: bool, seed: int, permutations: int = 199) -> list[float]:
    """EM's raw p-values of the adjacent pairs of the methods in order of EM (a board's family), by the
    service's test (``permutation``: 199 swaps here, for speed); ``by_scene`` False swaps single
    questions as if they were independent."""
    ranked = sorted(methods, key=lambda m: -m["em"].mean())
    n = ranked[0]["em"].shape[0]
    out = []
    for upper, lower in zip(ranked, ranked[1:]):
        stacked = sqa3d_track.outcomes_statistic(permutation.stack_units(upper, lower))
        found = permutation.paired_permutation(stacked, n, upper["scene"] if by_scene else np.arange(n),
                                               permutations, seed=seed)
        out.append(found["EM"]["p_value"])
    return out


def test_the_scene_paired_test_keeps_its_false_positive_rate_where_a_question_paired_one_does_not() -> None:
    """Two methods equally good by construction, 200 simulated SQA3D-shaped splits: the test swapping
    scenes calls them different at about its 5 % level (binomial 99 % band of 200 draws at 0.05:
    0.01-0.10); swapping questions as if independent calls them different far more often."""
    rng = np.random.default_rng(20261202)
    pairs = [equally_good(rng, 2) for _ in range(200)]
    by_scene = np.mean([adjacent_p_values(p, True, seed=r + 1)[0] < 0.05 for r, p in enumerate(pairs)])
    by_question = np.mean([adjacent_p_values(p, False, seed=r + 1)[0] < 0.05 for r, p in enumerate(pairs[:80])])
    assert 0.01 <= by_scene <= 0.10, by_scene
    assert by_question >= 0.15, by_question


def test_a_submission_against_itself_is_not_significant(tmp_path: Path) -> None:
    import json

    from evaluation_workers.synthetic.mmscan_vg import make_data

    labels, preds = make_data(200, seed=2, min_preds=1, max_preds=8, max_gt=3, empty_fraction=0.0,
                              objects_per_scene=5)  # 20 scenes: the fewest tested
    (tmp_path / "l.json").write_text(json.dumps(labels))
    (tmp_path / "p.json").write_text(json.dumps(preds))
    kept: dict[str, Any] = {}
    get_track("mmscan-vg").score(tmp_path / "l.json", tmp_path / "p.json", outcomes=kept)
    found = significance.compare("mmscan-vg", kept, kept, resamples=50, permutations=40)
    assert found["error"] == "" and found["resamples"] == 50
    spec = get_track("mmscan-vg")
    assert set(found["findings"]) >= {*spec.metrics, *(f"{g}/{m}" for g in spec.groups for m in spec.metrics)}
    for key, finding in found["findings"].items():
        if finding["scenes"] < 20:  # a category of fewer scenes than the minimum: not tested
            assert finding["p_value"] is None and finding["interval"] is None and "/" in key, key
        elif finding["difference"] is not None:
            assert finding["p_value"] == 1.0 and finding["interval"] == [0.0, 0.0], key
            assert finding["difference"] == 0.0, key
            assert finding["test"] == "paired-permutation-by-scene" and finding["permutations"] == 40, key
    assert found["findings"]["AP_box@0.25"]["difference"] == 0.0


def test_outcomes_round_trip_through_the_worker_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVAL_OUTCOMES_DIR", str(tmp_path))
    kept = {"material": {"group": np.arange(3), "score": np.array([0.5, 0.2, 0.1]),
                         "unit": np.array([0, 70_000, -3])}, "em": np.array([True]),
            "pool_score": np.array([0.25, np.nan, -2.0, 1e-3], dtype=np.float32).astype(np.float64)}
    outcomes.save("openscan/abc/def-v1.1.0.npz", kept)
    with np.load(tmp_path / "openscan/abc/def-v1.1.0.npz") as stored:  # floats that are float32s: stored so
        assert stored["pool_score"].dtype == np.float32 and stored["material/score"].dtype == np.float64
    back = outcomes.load("openscan/abc/def-v1.1.0.npz")
    assert back is not None and back["em"].tolist() == [True]
    assert back["material"]["score"].tolist() == [0.5, 0.2, 0.1]
    assert back["pool_score"].dtype == np.float64
    np.testing.assert_array_equal(back["pool_score"], kept["pool_score"])
    assert back["material"]["unit"].tolist() == [0, 70_000, -3] and back["material"]["unit"].dtype == np.int64
    assert outcomes.load("openscan/abc/none.npz") is None
    assert not list(tmp_path.rglob(".part-*"))
