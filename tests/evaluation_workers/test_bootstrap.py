"""Bootstrap intervals: the vectorised statistics against a loop that rebuilds each resample and scores it.

The reference draws the same scenes (``bootstrap.draw_indices`` over the
split's scenes in sorted order, same seed), takes every unit of each drawn
scene, writes the resampled split as files (a unit whose scene was drawn twice
is two units with new ids, next to each other in label order) and scores it
with the track's own scorer, intervals off. The intervals in the result must
be the percentiles of those reference values.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from evaluation_workers.metrics import bootstrap, confidence, weighted
from evaluation_workers.synthetic.mmscan_vg import make_data
from evaluation_workers.tracks import get_track
from evaluation_workers.tracks import sqa3d as sqa3d_track

RESAMPLES = 24


def quiet(fraction: float, message: str = "") -> None:
    pass


def _keys(result: dict[str, Any]) -> dict[str, float | None]:
    """Every value that has an interval: "<metric>" and "<group>/<metric>"."""
    out: dict[str, float | None] = dict(result["metrics"])
    for group, row in result["breakdown"].items():
        out.update({f"{group}/{k}": v for k, v in row.items() if k != "count"})
    return out


def _check(result: dict[str, Any], reference: list[dict[str, float | None]]) -> None:
    assert result["bootstrap"]["resamples"] == len(reference)
    assert set(result["intervals"]) == set(_keys(result))
    for key, interval in result["intervals"].items():
        values = np.array([np.nan if r[key] is None else r[key] for r in reference], dtype=np.float64)
        want = confidence.percentile_interval(values)
        if want is None:
            assert interval is None, key
        else:
            assert interval == pytest.approx(want, abs=1e-12), key


def _indices(scene_of: list[str]) -> list[np.ndarray]:
    """Each resample as the units it takes, in label order: every unit of each drawn scene, as often
    as its scene was drawn."""
    scenes = sorted(set(scene_of))
    index = np.array([scenes.index(s) for s in scene_of])
    return [np.repeat(np.arange(len(scene_of)), np.bincount(row, minlength=len(scenes))[index])
            for block in bootstrap.draw_indices(len(scenes), RESAMPLES) for row in block]


def test_it_draws_the_same_resamples_whatever_the_block_size() -> None:
    """Blocks of rows are drawn from their own seeded generator, so chunking cannot change them."""
    rows = np.concatenate(list(bootstrap.draw_indices(50, 250)))
    again = np.concatenate(list(bootstrap.draw_indices(50, 250)))
    assert rows.shape == (250, 50) and (rows == again).all()
    assert (bootstrap.counts_of(rows, 50).sum(axis=1) == 50).all()


def test_counts_are_drawn_block_by_block_and_kept_for_the_next_submission(monkeypatch: pytest.MonkeyPatch) -> None:
    drawn: list[int] = []
    original = bootstrap.block_counts

    def draw(n_units: int, resamples: int, seed: int, j: int) -> np.ndarray:
        drawn.append(j)
        return original(n_units, resamples, seed, j)

    def sums(counts: np.ndarray) -> dict[str, np.ndarray]:
        return {"first": counts[:, 0], "total": counts.sum(axis=1)}

    monkeypatch.setattr(bootstrap, "block_counts", draw)
    monkeypatch.setattr(bootstrap, "_kept", {})
    monkeypatch.setenv("EVAL_THREADS", "2")
    fresh = bootstrap.replicates(sums, 37, 350, seed=5)
    assert sorted(drawn) == [0, 1, 2, 3]  # blocks of 100, 100, 100 and 50 resamples
    assert (fresh["total"] == 37).all() and fresh["first"].shape == (350,)
    want = np.concatenate([bootstrap.counts_of(rows, 37)[:, 0] for rows in bootstrap.draw_indices(37, 350, 5)])
    assert np.array_equal(fresh["first"], want)  # the blocks in order, whichever thread drew them
    again = bootstrap.replicates(sums, 37, 350, seed=5)
    assert sorted(drawn) == [0, 1, 2, 3]  # kept: not drawn again
    assert all(np.array_equal(again[k], fresh[k]) for k in fresh)

    def huge(n_units: int, resamples: int, seed: int, j: int) -> np.ndarray:
        return np.full((resamples, n_units), 300.0)  # beyond uint8: that split is not kept

    monkeypatch.setattr(bootstrap, "block_counts", huge)
    assert bootstrap.replicates(sums, 3, 2, seed=1)["first"].max() == 300 and (3, 2, 1) not in bootstrap._kept


def test_sqa3d_intervals_equal_the_reference_loop(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    subprocess.run([sys.executable, "-m", "evaluation_workers.synthetic", "sqa3d", "--out", str(tmp_path / "d"),
                    "--questions", "150", "--accuracy", "0.5"], check=True, capture_output=True)
    labels, preds = tmp_path / "d" / "labels", tmp_path / "d" / "predictions.json"
    monkeypatch.setenv("EVAL_BOOTSTRAP_RESAMPLES", str(RESAMPLES))
    monkeypatch.setenv("EVAL_BOOTSTRAP_MIN_SCENES", "1")  # every value's interval, however few its scenes
    result = get_track("sqa3d").score(labels, preds, quiet)
    monkeypatch.setenv("EVAL_BOOTSTRAP_RESAMPLES", "0")
    questions = json.loads(next(labels.glob("v1_balanced_questions_*")).read_text())["questions"]
    annotations = json.loads(next(labels.glob("v1_balanced_sqa_annotations_*")).read_text())["annotations"]
    answers = {p["question_id"]: p["answer"] for p in json.loads(preds.read_text())}
    by_id = {a["question_id"]: a for a in annotations}
    reference = []
    assert len({q["scene_id"] for q in questions}) >= bootstrap.DEFAULT_MIN_SCENES
    for b, idx in enumerate(_indices([q["scene_id"] for q in questions])):
        qs, ans, pred = [], [], []
        for new_id, i in enumerate(idx, start=1):
            q = questions[i]
            qs.append({**q, "question_id": new_id})
            ans.append({**by_id[q["question_id"]], "question_id": new_id})
            if q["question_id"] in answers:
                pred.append({"question_id": new_id, "answer": answers[q["question_id"]]})
        folder = tmp_path / f"r{b}"
        folder.mkdir()
        (folder / "v1_balanced_questions_test_scannetv2.json").write_text(json.dumps({"questions": qs}))
        (folder / "v1_balanced_sqa_annotations_test_scannetv2.json").write_text(json.dumps({"annotations": ans}))
        (folder / "p.json").write_text(json.dumps(pred))
        reference.append(_keys(sqa3d_track.score(folder, folder / "p.json", quiet)))
    _check(result, reference)
    assert "intervals" not in sqa3d_track.score(labels, preds, quiet)  # 0 turns them off


def test_mmscan_intervals_equal_the_reference_loop(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    labels, preds = make_data(60, seed=3, min_preds=0, max_preds=12, max_gt=4, empty_fraction=0.0,
                              objects_per_scene=6)
    preds = [p for i, p in enumerate(preds) if i % 17]  # a few prompts without predictions
    (tmp_path / "labels.json").write_text(json.dumps(labels))
    (tmp_path / "preds.json").write_text(json.dumps(preds))
    monkeypatch.setenv("EVAL_BOOTSTRAP_RESAMPLES", str(RESAMPLES))
    monkeypatch.setenv("EVAL_BOOTSTRAP_MIN_SCENES", "1")  # every value's interval, however few its scenes
    result = get_track("mmscan-vg").score(tmp_path / "labels.json", tmp_path / "preds.json", quiet)
    monkeypatch.setenv("EVAL_BOOTSTRAP_RESAMPLES", "0")
    scored = [lab for lab in labels if lab["gt_bboxes"]]
    by_id = {p["sample_id"]: p for p in preds}
    reference = []
    for b, idx in enumerate(_indices([lab["scan_id"] for lab in scored])):
        labs, prs = [], []
        for k, i in enumerate(idx):
            sid = f"r{k}"
            labs.append({**scored[i], "sample_id": sid})
            if scored[i]["sample_id"] in by_id:
                prs.append({**by_id[scored[i]["sample_id"]], "sample_id": sid})
        (tmp_path / f"l{b}.json").write_text(json.dumps(labs))
        (tmp_path / f"p{b}.json").write_text(json.dumps(prs))
        reference.append(_keys(get_track("mmscan-vg").score(tmp_path / f"l{b}.json", tmp_path / f"p{b}.json",
                                                             quiet)))
    _check(result, reference)


def test_intervals_are_bit_identical_whatever_the_threads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each resample is computed in a call of the same shape at any ``EVAL_THREADS`` (a BLAS product's
    last bits depend on how many rows it is given: OpenBLAS treats an odd tail of rows apart)."""
    from evaluation_workers import _xp
    from evaluation_workers.tracks.mmscan_vg import intervals
    from evaluation_workers.tracks.mmscan_vg.labels import load_labels
    from evaluation_workers.tracks.mmscan_vg.reader import load_predictions
    from evaluation_workers.tracks.mmscan_vg.score import score_arrays

    labels, preds = make_data(300, seed=4, min_preds=1, max_preds=30, max_gt=4, empty_fraction=0.0)
    (tmp_path / "l.json").write_text(json.dumps(labels))
    (tmp_path / "p.json").write_text(json.dumps(preds))
    lab = load_labels(tmp_path / "l.json")
    outcomes: dict[str, Any] = {}
    score_arrays(lab, load_predictions(tmp_path / "p.json", lab.index), _xp.backend(), outcomes=outcomes)
    stat, n, width = intervals.statistic(outcomes), intervals.units_of(outcomes), intervals.width(outcomes)
    # Room for 58 resamples of this split at once: shared by two threads, 29 each (a larger split's case).
    monkeypatch.setattr(bootstrap, "MAX_ELEMENTS", 58 * max(width, n))
    rows = {threads: bootstrap.rows_per_call(n, width) for threads in (1, 2)}
    values = {}
    for threads in (1, 2):
        monkeypatch.setenv("EVAL_THREADS", str(threads))
        values[threads] = bootstrap.replicates(stat, n, 230, width=width)
    assert rows[1] == rows[2] and bootstrap.BLOCK % rows[1] == 0
    assert values[1].keys() == values[2].keys()
    assert all(np.array_equal(values[1][k], values[2][k], equal_nan=True) for k in values[1])


@pytest.mark.parametrize("sums", ["precomputed matrices", "running sums (many units x points)"])
def test_openscan_intervals_equal_the_reference_loop(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                     sums: str) -> None:
    from evaluation_workers.tracks.openscan import intervals

    if sums.startswith("running"):
        monkeypatch.setattr(intervals, "DENSE_ELEMENTS", 0)
    data = tmp_path / "d"
    subprocess.run([sys.executable, "-m", "evaluation_workers.synthetic", "openscan", "--out", str(data),
                    "--scenes", "8", "--points", "6000", "--instances", "3", "8", "--masks", "12",
                    "--aspects", "material", "manner", "--semantic", "--missing", "1", "--format", "official"],
                   check=True, capture_output=True)
    monkeypatch.setenv("EVAL_BOOTSTRAP_RESAMPLES", str(RESAMPLES))
    monkeypatch.setenv("EVAL_BOOTSTRAP_MIN_SCENES", "1")  # every value's interval, however few its scenes
    track = get_track("openscan")
    result = track.score(data / "labels", data / "predictions.zip", quiet)
    monkeypatch.setenv("EVAL_BOOTSTRAP_RESAMPLES", "0")
    scenes = sorted({p.stem for p in (data / "labels" / "gt").glob("*/*.txt")})
    with zipfile.ZipFile(data / "predictions.zip") as zf:
        members = {name: zf.read(name) for name in zf.namelist()}
    reference = []
    for b, idx in enumerate(_indices(scenes)):
        folder = tmp_path / f"r{b}"
        shutil.copy(data / "labels" / "vocabulary.json", folder.mkdir() or folder / "vocabulary.json")
        out: dict[str, bytes] = {}
        for k, i in enumerate(idx):
            new = f"scene{k:04d}_00"
            for gt in (data / "labels" / "gt").glob(f"*/{scenes[i]}.txt"):
                (folder / "gt" / gt.parent.name).mkdir(parents=True, exist_ok=True)
                shutil.copy(gt, folder / "gt" / gt.parent.name / f"{new}.txt")
            for name, blob in members.items():
                aspect, scene = name.split("/")
                if scene == f"{scenes[i]}.npz":
                    out[f"{aspect}/{new}.npz"] = blob
        with zipfile.ZipFile(folder / "p.zip", "w") as zf:
            for name, blob in out.items():
                zf.writestr(name, blob)
        reference.append(_keys(track.score(folder, folder / "p.zip", quiet)))
    _check(result, reference)


def _scene_coverage(by_scene: bool, repetitions: int = 150, scenes: int = 67, per_scene: int = 52,
                    icc: float = 0.09) -> float:
    """How often the 95 % interval of EM covers the population accuracy (0.5) of splits drawn with scene
    effects: a scene's accuracy ~ Beta(5.06, 5.06), so that questions of one scene have intra-scene
    correlation ``icc`` (benchmarks/coverage.py runs the same at every track's shape)."""
    rng = np.random.default_rng(7)
    a = 0.5 * (1 / icc - 1)
    scene = np.repeat(np.arange(scenes), per_scene)
    covered = 0
    for r in range(repetitions):
        em = rng.random(scene.shape[0]) < rng.beta(a, a, scenes)[scene]
        outcomes = {"em": em, "em_r": em, "type": rng.integers(0, 6, scene.shape[0])}
        found = bootstrap.intervals(sqa3d_track.outcomes_statistic(outcomes), scene.shape[0], "question",
                                    resamples=500, seed=r + 1, scenes=scene if by_scene else None)
        assert found is not None and found[1]["unit"] == "scene"
        lo, hi = found[0]["EM"]  # type: ignore[misc]
        covered += lo <= 0.5 <= hi
    return covered / repetitions


def test_intervals_by_scene_cover_the_population_accuracy_where_intervals_by_question_do_not() -> None:
    """SQA3D's shape (67 scenes x 52 questions, intra-scene correlation 0.09): 150 simulated splits. The
    binomial 99 % band of 150 draws at 0.95 is 0.90-0.99; resampling questions as if they were independent
    covers about 60 % (benchmarks/README.md, "Coverage")."""
    assert _scene_coverage(by_scene=True) >= 0.90
    assert _scene_coverage(by_scene=False, repetitions=60) <= 0.75


def test_a_split_or_group_with_too_few_scenes_gets_no_interval_and_says_why(monkeypatch: pytest.MonkeyPatch) -> None:
    em = np.arange(400) % 3 == 0
    kinds = np.where(np.arange(400) < 380, 0, 1)  # type 1 asked in the last scenes only
    outcomes = {"em": em, "em_r": em, "type": kinds}
    scenes = np.arange(400) // 10  # 40 scenes; type 1 in 2 of them
    groups = {"What": kinds == 0, "Is": kinds == 1}
    found = bootstrap.intervals(sqa3d_track.outcomes_statistic(outcomes), 400, "question", resamples=50,
                                scenes=scenes, groups=groups)
    assert found is not None
    values, record = found
    assert values["EM"] is not None and values["What/EM"] is not None and values["Is/EM"] is None
    assert record["withheld"] == {"Is": 2} and record["units"] == 40 and record["scored_unit"] == "question"
    monkeypatch.setenv("EVAL_BOOTSTRAP_MIN_SCENES", "41")
    values, record = bootstrap.intervals(sqa3d_track.outcomes_statistic(outcomes), 400, "question",
                                         resamples=50, scenes=scenes)  # type: ignore[misc]
    assert set(values.values()) == {None} and "EM" in values and record["withheld"] == {"": 40}
    from evaluation_workers.results import interval_notes

    assert interval_notes(record) == ["No confidence intervals: 40 scenes scored, and an interval needs at "
                                      "least 41 (the bootstrap resamples scenes)."]


def test_the_statistic_at_unit_counts_is_the_point_estimate(tmp_path: Path) -> None:
    """With every unit drawn once, each statistic gives back the result's own numbers."""
    labels, preds = make_data(40, seed=1, min_preds=0, max_preds=8, max_gt=3, empty_fraction=0.0,
                              objects_per_scene=5)
    from evaluation_workers import _xp
    from evaluation_workers.tracks.mmscan_vg import intervals
    from evaluation_workers.tracks.mmscan_vg.labels import load_labels
    from evaluation_workers.tracks.mmscan_vg.reader import load_predictions
    from evaluation_workers.tracks.mmscan_vg.score import score_arrays

    (tmp_path / "l.json").write_text(json.dumps(labels))
    (tmp_path / "p.json").write_text(json.dumps(preds))
    lab = load_labels(tmp_path / "l.json")
    outcomes: dict[str, Any] = {}
    values = score_arrays(lab, load_predictions(tmp_path / "p.json", lab.index), _xp.backend(),
                          outcomes=outcomes)
    n = outcomes["group"].shape[0]
    got = intervals.statistic(outcomes)(np.ones((1, n)))
    for key, value in values["metrics"].items():
        assert float(got[key][0]) == pytest.approx(value, abs=1e-12), key
    for group, row in values["breakdown"].items():
        for key, value in row.items():
            if key != "count" and value is not None:
                assert float(got[f"{group}/{key}"][0]) == pytest.approx(value, abs=1e-12), (group, key)


@pytest.mark.parametrize("case", ["many units, short segments", "large counts, one long segment", "few units",
                                  "fractional weights"])
def test_running_sums_equal_the_sum_over_the_ranking(xp, case: str) -> None:
    """``RunningSums`` against the plain running sum of each resample's weights along the ranking,
    through each of its paths: the dense product (few units), the gathered segments in int16 and
    (counts x segment length beyond int16) in int32; as (b, J) and in the interleaved layout."""
    rng = np.random.default_rng(len(case))
    n_units, length = (40, 3000) if case == "few units" else (20_000, 60_000)
    counts = rng.poisson(1.0, (7, n_units)).astype(np.float64)
    if case == "fractional weights":  # not a draw, but never truncated: summed in float64
        counts = counts * 0.5
    if case.startswith("large counts"):
        counts[:, :50] = 300  # 300 x a 20,000-entry segment is beyond int16
    unit = rng.integers(0, n_units, length)
    ends = np.sort(rng.choice(length - 1, 500, replace=False))
    if case.startswith("large counts"):
        unit[: 20_000] = rng.integers(0, 50, 20_000)
        ends = np.concatenate([[19_999], ends[ends > 19_999]])
    want = np.cumsum(counts[:, unit], axis=1)[:, ends]
    running = weighted.RunningSums(unit, ends, n_units)
    got = np.asarray(running(xp.asarray(counts)))
    assert np.allclose(got, want, rtol=0, atol=1e-9) if case == "fractional weights" else np.array_equal(got, want)
    # The same sums in the interleaved layout, from the (units, resamples) weights.
    from evaluation_workers.metrics.interleaved import Interleaved

    layout = Interleaved(int(ends.shape[0]))
    spread = running.interleaved(xp.asarray(np.ascontiguousarray(counts.T)), layout)
    got = np.asarray(layout.to_positions(spread))
    assert np.allclose(got, want, rtol=0, atol=1e-9) if case == "fractional weights" else np.array_equal(got, want)


@pytest.mark.parametrize("op", ["add", "maximum"])
@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("shape", [(7, 2_000), (3, 40), (2_000,), (1, 900)])
def test_accumulate_rows_is_one_accumulate_call_bit_for_bit(xp, op: str, reverse: bool,
                                                            shape: tuple[int, ...]) -> None:
    """Rows longer than ``GIL_FREE_ROW`` are accumulated one by one on NumPy (so that other threads
    run); the values are those of one ``accumulate`` over the whole array: floats of mixed magnitude
    (a different order of additions would show in the last bits), and int32, which keeps its dtype."""
    from evaluation_workers._xp import GIL_FREE_ROW, accumulate_rows

    assert shape[-1] > GIL_FREE_ROW or shape[-1] < 100  # both paths are covered
    rng = np.random.default_rng(shape[-1])
    ufunc = getattr(np, op)
    for x in (rng.random(shape) * 10.0 ** rng.integers(-8, 9, shape), rng.integers(0, 50, shape, dtype=np.int32)):
        kind = x.dtype
        want = (np.flip(ufunc.accumulate(np.flip(x, -1), axis=-1, dtype=kind), -1) if reverse
                else ufunc.accumulate(x, axis=-1, dtype=kind))
        got = np.asarray(accumulate_rows(xp.asarray(x), op, reverse=reverse))
        assert got.dtype == x.dtype
        assert np.array_equal(got, want)


@pytest.mark.parametrize("n", [0, 1, 31, 32, 33, 100, 1_000])
def test_the_interleaved_layout_runs_sums_and_maxima_as_the_plain_accumulate(xp, n: int) -> None:
    """Positions cut into blocks and laid out block-interleaved (``metrics.interleaved``): a gather, the
    running sum, the running maximum from the right and the way back to position order equal the
    plain operations on (b, n), padding included (lengths below, at and past a block)."""
    from evaluation_workers.metrics.interleaved import BLOCK, Interleaved

    rng = np.random.default_rng(n)
    b, m = 7, 50
    source = rng.integers(0, 40, (m, b)).astype(np.int32)
    index = rng.integers(0, m, n)
    layout = Interleaved(n)
    assert layout.rows >= n and layout.rows - n < BLOCK
    rows = xp.asarray(layout.source_rows(index))
    gathered = layout.gather(xp.asarray(source), rows)
    assert np.array_equal(np.asarray(layout.to_positions(gathered)), source[index].T)
    want_sum = np.cumsum(source[index], axis=0, dtype=np.int32).T
    assert np.array_equal(np.asarray(layout.to_positions(layout.running_sum(gathered))), want_sum)
    values = rng.random((m, b))
    spread = layout.gather(xp.asarray(values), rows)
    want_max = np.flip(np.maximum.accumulate(np.flip(values[index], 0), axis=0), 0).T
    assert np.array_equal(np.asarray(layout.to_positions(layout.running_max_reverse(spread))), want_max)
    if n:
        assert layout.position[layout.last_row] == n - 1
        assert np.array_equal(np.sort(layout.position[layout.row_of(np.arange(n))]), np.arange(n))


def test_into_writes_the_result_in_place_where_the_namespace_can(xp) -> None:
    """``_xp.into``: int32 / float64 in float64, the same values as converting first; NumPy and CuPy write
    into ``out`` (no temporary), other namespaces return a new array."""
    from evaluation_workers._xp import into

    whole = np.array([0, 3, 7, 2**30], dtype=np.int32)
    den = np.array([1.0, 3.0, 9.0, 3.0])
    out = xp.asarray(den.copy())
    got = into("divide", xp.asarray(whole), out, out)
    assert np.array_equal(np.asarray(got), whole.astype(np.float64) / den)
    if isinstance(out, np.ndarray):
        assert got is out
