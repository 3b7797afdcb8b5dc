"""MMScan grounding metrics: hand-worked cases, a slow loop of METRICS.md, and the devkit's numbers."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from array_api_compat import numpy as compat

from evaluation_workers.metrics import grounding
from evaluation_workers.metrics.iou3d import box_iou3d
from evaluation_workers.synthetic.mmscan_vg import make_data
from evaluation_workers.tracks import mmscan_vg

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "mmscan_vg"
GROUP_OF_DEVKIT = {
    "overall": None,
    "vg_sngl_attr": "ST-attr",
    "vg_sngl_space": "ST-space",
    "vg_int_attr_oo": "OO-attr",
    "vg_int_space_oo": "OO-space",
    "vg_int_or": "OR",
}


# ---- slow, obvious reference of METRICS.md ----


def _best(row: np.ndarray) -> int:
    best, where = -np.inf, -1
    for j, value in enumerate(row):
        if value > best:
            best, where = value, j
    return where


def _voc_ap(tp: list[int], n_gt: int) -> float:
    if not tp:
        return 0.0
    found = np.cumsum(tp)
    recall = list(found / n_gt)
    precision = list(found / np.arange(1, len(tp) + 1))
    mrec, mpre = [0.0] + recall + [1.0], [0.0] + precision + [0.0]
    for i in range(len(mpre) - 1, 0, -1):
        mpre[i - 1] = max(mpre[i - 1], mpre[i])
    return sum((mrec[i + 1] - mrec[i]) * mpre[i + 1] for i in range(len(mrec) - 1) if mrec[i + 1] != mrec[i])


def reference_sample(iou: np.ndarray, t: float, ks=(1, 3, 5)) -> tuple[dict[str, float], list[int]]:
    """Metrics of one sample whose predictions are already in rank order; also its TP flags."""
    n_pred, n_gt = iou.shape
    if n_pred == 0:
        return {"AP": 0.0, "AR": 0.0, **{f"gTop-{k}": 0.0 for k in ks}}, []
    taken = [False] * n_gt
    tp, hits, found = [], set(), []
    for p in range(n_pred):
        j = _best(iou[p])
        if iou[p, j] >= t and not taken[j]:
            taken[j] = True
            tp.append(1)
        else:
            tp.append(0)
        if iou[p, j] >= t:
            hits.add(j)
        found.append(len(hits))
    out = {"AP": _voc_ap(tp, n_gt), "AR": sum(tp) / n_gt}
    for k in ks:
        out[f"gTop-{k}"] = sum(found[min(n * k, n_pred) - 1] >= n for n in range(1, n_gt + 1)) / n_gt
    return out, tp


def reference_score(labels: list[dict], predictions: dict[str, dict]) -> dict[str, dict[str, float]]:
    """Every metric, overall and per group, by loops (IoU from the tested kernel)."""
    rows = []  # (group, sample metrics by key, pooled entries, n_gt)
    for order, lab in enumerate(labels):
        gt = np.array(lab["gt_bboxes"], dtype=float).reshape(-1, 9)
        if len(gt) == 0:
            continue
        pred = predictions.get(lab["sample_id"], {"pred_bboxes": [], "pred_scores": []})
        boxes = np.array(pred["pred_bboxes"], dtype=float).reshape(-1, 9)
        scores = list(pred["pred_scores"])
        rank = sorted(range(len(scores)), key=lambda i: -scores[i])  # Python's sort is stable
        iou = np.asarray(box_iou3d(compat.asarray(boxes[rank]), compat.asarray(gt))).reshape(
            len(rank), len(gt)
        )
        metrics, pooled = {}, []
        for t in (0.25, 0.5):
            values, tp = reference_sample(iou, t)
            for key, value in values.items():
                name = {"AP": "AP_sample", "AR": "AR"}.get(key, key)
                metrics[f"{name}@{t}"] = value
            pooled.append([(-scores[rank[r]], order, r, tp[r]) for r in range(len(rank))])
        rows.append((mmscan_vg.SUB_CLASS_GROUP[lab["sub_class"]], metrics, pooled, len(gt)))
    result: dict[str, dict[str, float]] = {}
    for group in (None, *mmscan_vg.GROUPS):
        members = [r for r in rows if group is None or r[0] == group]
        if not members:
            continue
        values = {key: float(np.mean([m[1][key] for m in members])) for key in members[0][1]}
        if group is not None:
            for ti, t in enumerate((0.25, 0.5)):
                entries = sorted(e for m in members for e in m[2][ti])
                n_gt = sum(m[3] for m in members)
                tp = [e[3] for e in entries]
                values[f"AP_box@{t}"] = _voc_ap(tp, n_gt)
                values[f"AR_box@{t}"] = sum(tp) / n_gt
        result[group or "overall"] = values
    for t in (0.25, 0.5):
        for key in (f"AP_box@{t}", f"AR_box@{t}"):
            result["overall"][key] = sum(
                result[g][key] * sum(1 for r in rows if r[0] == g) for g in mmscan_vg.GROUPS if g in result
            ) / len(rows)
    return result


# ---- helpers for the kernels on hand-made IoU matrices ----


def kernel_sample_metrics(xp, ious: list[np.ndarray], t: float) -> dict[str, np.ndarray]:
    """The vectorized kernels on per-sample IoU matrices whose rows are in rank order."""
    n_cols = max(m.shape[1] for m in ious)
    padded = [np.pad(m, ((0, 0), (0, n_cols - m.shape[1])), constant_values=-1) for m in ious]
    iou = np.concatenate(padded) if padded else np.zeros((0, n_cols))
    pred_count = np.array([m.shape[0] for m in ious])
    pred_sample = xp.asarray(np.repeat(np.arange(len(ious)), pred_count))
    pred_start = xp.asarray(np.cumsum(pred_count) - pred_count)
    best_iou, best_col = grounding.best_match(xp.asarray(iou))
    tp = grounding.true_positives(best_iou, best_col, pred_sample, n_cols, t)
    out = grounding.sample_metrics(
        tp,
        pred_sample,
        pred_start,
        xp.asarray(pred_count),
        xp.asarray(np.array([m.shape[1] for m in ious])),
        (1, 3, 5),
    )
    return {key: np.asarray(value) for key, value in out.items()}


# ---- hand-worked cases (METRICS.md's definition) ----


def test_it_counts_distinct_boxes_in_gtop_k(xp) -> None:
    # p0 and p1 both pick box 0; p2 picks box 1: H = [1, 1, 2].
    iou = np.array([[0.6, 0.1], [0.7, 0.2], [0.1, 0.4]])
    at25 = kernel_sample_metrics(xp, [iou], 0.25)
    assert at25["gTop-1"][0] == 0.5  # n=2 needs H[1] >= 2 (the card's wording would give 1.0)
    assert at25["gTop-3"][0] == 1.0
    assert at25["AR"][0] == 1.0
    assert at25["AP"][0] == pytest.approx(0.5 * 1 + 0.5 * (2 / 3), abs=1e-15)
    at50 = kernel_sample_metrics(xp, [iou], 0.5)  # H = [1, 1, 1]
    assert (at50["gTop-1"][0], at50["gTop-3"][0], at50["gTop-5"][0]) == (0.5, 0.5, 0.5)
    assert (at50["AP"][0], at50["AR"][0]) == (0.5, 0.5)


def test_it_does_not_fall_back_to_the_second_best_box(xp) -> None:
    # p1's best box is taken by p0; its second best (0.3) is free but does not count.
    got = kernel_sample_metrics(xp, [np.array([[0.9, 0.8], [0.85, 0.3]])], 0.25)
    assert (got["AR"][0], got["AP"][0], got["gTop-1"][0], got["gTop-3"][0]) == (0.5, 0.5, 0.5, 0.5)


def test_it_takes_the_first_box_on_iou_ties(xp) -> None:
    got = kernel_sample_metrics(xp, [np.array([[0.5, 0.5], [0.5, 0.5]])], 0.5)
    assert (got["AR"][0], got["gTop-3"][0]) == (0.5, 0.5)


def test_it_caps_the_rank_at_the_number_of_predictions(xp) -> None:
    # G = 3, P = 2, H = [1, 2]: gTop-5 looks at H[min(5n, 2) - 1] = 2 for every n.
    got = kernel_sample_metrics(xp, [np.array([[0.9, 0.0, 0.0], [0.0, 0.9, 0.0]])], 0.25)
    assert got["gTop-5"][0] == pytest.approx(2 / 3, abs=1e-15)
    assert got["gTop-1"][0] == pytest.approx(2 / 3, abs=1e-15)


def test_it_scores_a_sample_without_predictions_as_zero(xp) -> None:
    got = kernel_sample_metrics(xp, [np.zeros((0, 2)), np.array([[0.9, 0.0]])], 0.25)
    for key in ("AP", "AR", "gTop-1", "gTop-3", "gTop-5"):
        assert got[key][0] == 0.0
    assert (got["AP"][1], got["AR"][1], got["gTop-1"][1]) == (0.5, 0.5, 0.5)


def _write(tmp_path: Path, labels: list[dict], predictions: list[dict] | dict) -> tuple[Path, Path]:
    (tmp_path / "labels.json").write_text(json.dumps(labels))
    (tmp_path / "pred.json").write_text(json.dumps(predictions))
    return tmp_path / "labels.json", tmp_path / "pred.json"


def _box(x: float, size: float = 1.0) -> list[float]:
    return [x, 0.0, 0.0, size, 1.0, 1.0, 0.0, 0.0, 0.0]


def test_it_keeps_file_order_for_equal_scores(tmp_path: Path) -> None:
    labels = [
        {
            "sample_id": "s",
            "scan_id": "x",
            "text": "",
            "sub_class": "VG_Single_Space",
            "gt_bboxes": [_box(0.0)],
        }
    ]
    # Same score: the miss (listed first) ranks first, so AP = 1/2, not 1.
    preds = [{"sample_id": "s", "pred_bboxes": [_box(0.9), _box(0.0)], "pred_scores": [0.5, 0.5]}]
    result = mmscan_vg.score(*_write(tmp_path, labels, preds))
    assert result["metrics"]["AP_sample@0.5"] == 0.5
    assert result["metrics"]["AP_box@0.5"] == 0.5


def test_it_pools_predictions_by_score_within_a_category(tmp_path: Path) -> None:
    labels = [
        {"sample_id": "a", "scan_id": "x", "text": "", "sub_class": "VG_Inter_OR", "gt_bboxes": [_box(0.0)]},
        {"sample_id": "b", "scan_id": "x", "text": "", "sub_class": "VG_Inter_OR", "gt_bboxes": [_box(5.0)]},
        {
            "sample_id": "c",
            "scan_id": "x",
            "text": "",
            "sub_class": "VG_Inter_OR",
            "gt_bboxes": [_box(9.0), _box(12.0)],
        },
        {"sample_id": "d", "scan_id": "x", "text": "", "sub_class": "VG_Single_EQ", "gt_bboxes": [_box(0.0)]},
    ]
    preds = {
        "a": {"pred_bboxes": [_box(0.2), _box(3.0)], "pred_scores": [0.9, 0.3]},
        "b": {"pred_bboxes": [_box(5.1)], "pred_scores": [0.6]},
        "d": {"pred_bboxes": [_box(0.0)], "pred_scores": [0.1]},
    }
    result = mmscan_vg.score(*_write(tmp_path, labels, preds))
    # OR pool: TP 0.9, TP 0.6, FP 0.3 over 4 boxes (c has no predictions): AP 0.25 + 0.25.
    assert result["breakdown"]["OR"]["AP_box@0.5"] == 0.5
    assert result["breakdown"]["OR"]["AR_box@0.5"] == 0.5
    assert result["breakdown"]["OR"]["count"] == 3
    assert result["breakdown"]["ST-attr"]["AP_box@0.5"] == 1.0
    assert result["breakdown"]["ST-space"]["AP_box@0.5"] is None
    assert result["breakdown"]["ST-space"]["count"] == 0
    # Weighted by samples: (0.5 * 3 + 1.0 * 1) / 4.
    assert result["metrics"]["AP_box@0.5"] == 0.625
    assert result["metrics"]["AR@0.5"] == (1 + 1 + 0 + 1) / 4
    assert any("1 sample(s)" in w for w in result["warnings"])


def test_it_skips_samples_without_ground_truth(tmp_path: Path) -> None:
    labels = [
        {"sample_id": "a", "scan_id": "x", "text": "", "sub_class": "VG_Inter_OR", "gt_bboxes": []},
        {"sample_id": "b", "scan_id": "x", "text": "", "sub_class": "VG_Inter_OR", "gt_bboxes": [_box(0.0)]},
    ]
    preds = [
        {"sample_id": "a", "pred_bboxes": [_box(0.0)], "pred_scores": [1.0]},
        {"sample_id": "b", "pred_bboxes": [_box(0.0)], "pred_scores": [0.5]},
    ]
    result = mmscan_vg.score(*_write(tmp_path, labels, preds))
    assert result["metrics"]["gTop-1@0.5"] == 1.0
    assert result["breakdown"]["OR"]["count"] == 1
    assert result["details"]["samples_without_ground_truth"] == 1


# ---- random cases against the slow loop ----


def _random_case(seed: int) -> tuple[list[dict], dict[str, dict]]:
    labels, preds = make_data(
        120, seed=seed, min_preds=0, max_preds=25, max_gt=5, empty_fraction=0.1, objects_per_scene=8
    )
    rng = np.random.default_rng(seed)
    for p in preds:  # coarse scores: many ties, within and across samples
        p["pred_scores"] = [round(s, 1) for s in p["pred_scores"]]
    labels[3]["gt_bboxes"] = []
    by_id = {p["sample_id"]: p for p in preds if rng.random() > 0.05}  # a few missing samples
    return labels, by_id


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_it_matches_the_slow_loop_on_random_prompts(tmp_path: Path, seed: int) -> None:
    labels, preds = _random_case(seed)
    result = mmscan_vg.score(*_write(tmp_path, labels, preds))
    want = reference_score(labels, preds)
    for group, values in want.items():
        got = result["metrics"] if group == "overall" else result["breakdown"][group]
        for key, value in values.items():
            assert got[key] == pytest.approx(value, abs=1e-12), (group, key)


def test_it_gives_the_same_numbers_under_array_api_strict(xp) -> None:
    labels, preds = _random_case(5)
    lab = mmscan_vg.Labels(
        sample_ids=[x["sample_id"] for x in labels],
        group=np.array([mmscan_vg.GROUPS.index(mmscan_vg.SUB_CLASS_GROUP[x["sub_class"]]) for x in labels]),
        gt_count=np.array([len(x["gt_bboxes"]) for x in labels]),
        gt_boxes=np.array([b for x in labels for b in x["gt_bboxes"]], dtype=float).reshape(-1, 9),
    )
    index = lab.index
    sample = np.concatenate([[index[s]] * len(p["pred_scores"]) for s, p in preds.items()]).astype(np.int64)
    pr = mmscan_vg.Predictions(
        sample=sample,
        boxes=np.array([b for p in preds.values() for b in p["pred_bboxes"]], dtype=float).reshape(-1, 9),
        scores=np.array([s for p in preds.values() for s in p["pred_scores"]], dtype=float),
        missing=[],
        entries=len(preds),
    )
    got = mmscan_vg.score_arrays(lab, pr, xp)
    want = mmscan_vg.score_arrays(lab, pr, compat)
    assert got["metrics"] == pytest.approx(want["metrics"], abs=1e-14)


# ---- the official devkit's numbers ----


def test_it_matches_the_devkit_on_its_golden_inputs() -> None:
    result = mmscan_vg.score(FIXTURES / "devkit_labels.json", FIXTURES / "devkit_predictions.json")
    golden = json.loads((FIXTURES / "devkit_metrics.json").read_text())
    rename = {"AP@": "AP_sample@", "AP_C@": "AP_box@", "AR_C@": "AR_box@"}
    checked = 0
    for category, values in golden.items():
        group = GROUP_OF_DEVKIT[category]
        got = result["metrics"] if group is None else result["breakdown"][group]
        for key, value in values.items():
            prefix = key.split("@")[0] + "@"
            name = rename.get(prefix, prefix) + key.split("@")[1] if "@" in key else key
            if name in got:
                # The devkit's AP is float32 and its IoU pytorch3d's float32 kernel.
                assert got[name] == pytest.approx(value, abs=1e-6), (category, key)
                checked += 1
    assert checked == 6 * 14


@pytest.mark.parametrize("scores", ["float32 (packed keys)", "float64 (padded rows)"])
@pytest.mark.parametrize("layout", ["grouped", "grouped, one wide sample", "any order"])
def test_sort_predictions_orders_by_sample_then_score_keeping_file_order_on_ties(xp, layout: str,
                                                                                 scores: str) -> None:
    from evaluation_workers.metrics.grounding import sort_predictions

    rng = np.random.default_rng(len(layout))
    counts = rng.integers(0, 9, 300)
    if layout == "grouped, one wide sample":
        counts[7] = 5000  # padded rows would be mostly padding: two plain sorts instead
    sample = np.repeat(np.arange(300), counts)
    if layout == "any order":
        sample = rng.permutation(sample)
    score = rng.integers(0, 4, sample.shape[0]).astype(np.float64)  # many ties
    if scores.startswith("float64"):
        score /= 3  # thirds are no float32
    score[::7] = -0.0
    want = sorted(range(len(sample)), key=lambda i: (sample[i], -score[i], i))
    got = np.asarray(sort_predictions(xp.asarray(sample), xp.asarray(score)))
    assert got.tolist() == want
@pytest.mark.parametrize("values", ["float32 values, many ties", "float64 values", "extremes"])
def test_argsort_descending_is_the_stable_descending_argsort(xp, values: str) -> None:
    """The packed-key sort of float32-exact values (and the plain one otherwise) is NumPy's stable
    argsort of the negated values: largest first, ties and -0.0 beside 0.0 in index order."""
    from evaluation_workers._xp import argsort_descending

    rng = np.random.default_rng(len(values))
    n = 70_000  # above the packed path's minimum
    if values == "float32 values, many ties":
        x = rng.integers(-3, 4, n).astype(np.float32).astype(np.float64) / 8
        x[::5], x[::7] = -0.0, 0.0
    elif values == "float64 values":
        x = rng.random(n)
    else:
        x = np.resize(np.array([np.inf, -np.inf, 1e-45, -1e-45, 3.4e38, -3.4e38, 0.0, -0.0], np.float32), n)
        x = x.astype(np.float64)
    want = np.argsort(-x, kind="stable")
    assert np.array_equal(np.asarray(argsort_descending(xp.asarray(x))), want)


@pytest.mark.parametrize("layout", ["even segments (padded rows)", "one long segment (dense ranks)"])
def test_segment_cummax_reverse_is_each_segments_running_max_from_the_right(xp, layout: str) -> None:
    from evaluation_workers.metrics.grounding import _segment_cummax_reverse

    rng = np.random.default_rng(len(layout))
    counts = rng.integers(1, 9, 200)
    if layout.startswith("one long"):
        counts[3] = 4000
    segment = np.repeat(np.arange(200), counts)
    x = rng.integers(0, 6, segment.shape[0]) / 5  # ties
    start = np.cumsum(counts) - counts
    want = np.concatenate([np.maximum.accumulate(x[a : a + c][::-1])[::-1] for a, c in zip(start, counts)])
    for given in ((None, None), (xp.asarray(start), xp.asarray(counts))):
        got = _segment_cummax_reverse(xp.asarray(x), xp.asarray(segment), 200, xp, *given)
        assert np.array_equal(np.asarray(got), want)


def test_each_pooled_sets_ranking_is_read_off_the_one_ranking(xp) -> None:
    """One sort serves every pooled set: each set's members, in the ranking's order, are the set's own
    ranking by score, descending, ties (many here, and -0.0 beside 0.0) in index order, as a sort of that
    set alone gives; each ranked prediction keeps its sample and true-positive flags."""
    from evaluation_workers.metrics.grounding import pooled_order, rank

    rng = np.random.default_rng(5)
    sample = np.sort(rng.integers(0, 300, 2000))
    score = rng.integers(0, 5, 2000).astype(np.float64)
    score[::9] = -0.0
    tps = [rng.random(2000) < 0.3, rng.random(2000) < 0.1]
    set_of_sample = rng.integers(-1, 4, 300)  # -1: in no set
    ranking = rank(xp.asarray(score), xp.asarray(sample), [xp.asarray(t) for t in tps])
    members = ranking.members(xp.asarray(set_of_sample), 4)
    for s in range(4):
        idx = np.flatnonzero(set_of_sample[sample] == s)
        want = sorted(idx.tolist(), key=lambda i: (-score[i], i))
        own = idx[np.asarray(pooled_order(xp.asarray(score[idx])))]
        assert own.tolist() == want
        positions = np.asarray(members[s])
        assert np.asarray(ranking.sample)[positions].tolist() == sample[want].tolist()
        for t in range(2):
            assert np.asarray(ranking.tp[t])[positions].tolist() == tps[t][want].tolist()


@pytest.mark.parametrize("seed", [0, 3])
def test_each_sub_class_equals_the_slow_loop_on_its_prompts_alone(xp, seed: int) -> None:
    """details.per_sub_class (the drill-down): every metric of a sub-class is what the whole
    scorer gives on that sub-class's prompts only, under every array namespace."""
    labels, preds = _random_case(seed)
    lab = mmscan_vg.load_labels(_labels_file(labels))
    sample = np.concatenate([[lab.index[s]] * len(p["pred_scores"]) for s, p in preds.items()]).astype(np.int64)
    pr = mmscan_vg.Predictions(
        sample=sample,
        boxes=np.array([b for p in preds.values() for b in p["pred_bboxes"]], dtype=float).reshape(-1, 9),
        scores=np.array([s for p in preds.values() for s in p["pred_scores"]], dtype=float),
        missing=[], entries=len(preds))
    got = mmscan_vg.score_arrays(lab, pr, xp)["details"]["per_sub_class"]
    assert list(got) == list(mmscan_vg.labels.SUB_CLASSES)
    for sub, values in got.items():
        mine = [x for x in labels if x["sub_class"] == sub]
        scored = [x for x in mine if x["gt_bboxes"]]
        assert values["count"] == len(scored), sub
        if not scored:
            assert all(values[k] is None for k in mmscan_vg.score.METRICS), sub
            continue
        want = reference_score(mine, preds)["overall"]
        for key, value in want.items():
            assert values[key] == pytest.approx(value, abs=1e-12), (sub, key)


def _labels_file(labels: list[dict]) -> Path:
    import tempfile

    path = Path(tempfile.mkdtemp()) / "labels.json"
    path.write_text(json.dumps(labels))
    return path
