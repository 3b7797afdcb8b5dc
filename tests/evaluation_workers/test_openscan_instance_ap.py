"""The vectorized instance AP equals a slow loop over METRICS.md, and hand-worked cases."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from evaluation_workers.metrics.instance_ap import IOU_THRESHOLDS, instance_ap, intersection_counts
from evaluation_workers.tracks.openscan.labels import scene_instances

# ---- slow, obvious reference (METRICS.md, read literally) -------------------------------------


def reference_ap(scenes: list[dict[str, Any]], n_classes: int) -> np.ndarray:
    """(T, K) AP by loops: scene -> class -> instance -> prediction, as the text describes."""
    out = np.zeros((len(IOU_THRESHOLDS), n_classes))
    for ti, t in enumerate(IOU_THRESHOLDS):
        for k in range(1, n_classes + 1):
            entries: list[tuple[float, bool]] = []
            n_pos = 0
            for sc in scenes:
                ids = sc["ids"]
                void = ~((ids // 1000 >= 1) & (ids // 1000 <= n_classes))
                insts = [v for v in sorted(set(ids[~void].tolist())) if v // 1000 == k]
                sizes = {v: int((ids == v).sum()) for v in insts}
                preds = []
                for m in range(sc["masks"].shape[1]):
                    mask = sc["masks"][:, m] != 0
                    if mask.sum() >= 100 and sc["classes"][m] == k:
                        preds.append((m, mask, float(sc["scores"][m])))

                def iou(mask: np.ndarray, v: int, ids: np.ndarray = ids, sizes: dict = sizes) -> float:
                    inter = int((mask & (ids == v)).sum())
                    return inter / (sizes[v] + int(mask.sum()) - inter)

                visited: set[int] = set()
                for v in insts:
                    if sizes[v] < 100:
                        continue
                    n_pos += 1
                    cur: float | None = None
                    for m, mask, s in preds:
                        if m in visited or not (mask & (ids == v)).any():
                            continue
                        if iou(mask, v) > t:
                            if cur is None:
                                cur = s
                                visited.add(m)
                            else:
                                entries.append((min(cur, s), False))
                                cur = max(cur, s)
                    if cur is not None:
                        entries.append((cur, True))
                for _m, mask, s in preds:
                    if any((mask & (ids == v)).any() and iou(mask, v) > t for v in insts):
                        continue
                    ignore = int((mask & void).sum()) + sum(
                        int((mask & (ids == v)).sum()) for v in insts if sizes[v] < 100
                    )
                    if ignore / mask.sum() <= t:
                        entries.append((s, False))
            if n_pos == 0:
                out[ti, k - 1] = math.nan
                continue
            distinct = sorted({s for s, _ in entries})  # ascending
            prec, rec = [], []
            for s in distinct:
                tp = sum(1 for x, tr in entries if x >= s and tr)
                n = sum(1 for x, _ in entries if x >= s)
                prec.append(tp / n)
                rec.append(tp / n_pos)
            prec.append(1.0)
            rec.append(0.0)
            ap = 0.0
            for i in range(len(prec)):
                r_before = rec[i - 1] if i > 0 else rec[0]
                r_after = rec[i + 1] if i + 1 < len(rec) else 0.0
                ap += prec[i] * (r_before - r_after) / 2
            out[ti, k - 1] = ap
    return out


# ---- the kernel on the same scenes -----------------------------------------------------------


def kernel_ap(xp: Any, scenes: list[dict[str, Any]], n_classes: int) -> np.ndarray:
    rows, classes, scores, bases, gt_class, gt_size = [], [], [], [], [], []
    offset = 0
    locals_ = [scene_instances(sc["ids"].astype(np.int64), n_classes) for sc in scenes]
    width = max(len(c) for _, c, _ in locals_) + 1
    for sc, (local, cls, size) in zip(scenes, locals_):
        vertex, mask = np.nonzero(sc["masks"])
        inter = intersection_counts(
            xp.asarray(vertex),
            xp.asarray(mask),
            xp.asarray(local.astype(np.int64)),
            sc["masks"].shape[1],
            width,
        )
        rows.append(np.asarray(inter))
        classes.append(sc["classes"])
        scores.append(sc["scores"])
        bases.append(np.full(sc["masks"].shape[1], offset))
        gt_class.append(cls)
        gt_size.append(size)
        offset += len(cls)
    ap = instance_ap(
        xp.asarray(np.concatenate(rows)),
        xp.asarray(np.concatenate(classes).astype(np.int64)),
        xp.asarray(np.concatenate(scores).astype(np.float64)),
        xp.asarray(np.concatenate(bases).astype(np.int64)),
        xp.asarray(np.concatenate(gt_class).astype(np.int64)),
        xp.asarray(np.concatenate(gt_size).astype(np.int64)),
        n_classes,
    )
    return np.asarray(ap)


def random_scene(rng: np.random.Generator, n_classes: int) -> dict[str, Any]:
    n_vertices = int(rng.integers(600, 1600))
    ids = np.zeros(n_vertices, dtype=np.int64)
    pos = 0
    inst = 0
    while pos < n_vertices:  # segments of vertices: void or an instance
        length = int(rng.integers(20, 260))
        if rng.random() < 0.75:
            inst += 1
            ids[pos : pos + length] = int(rng.integers(1, n_classes + 1)) * 1000 + inst + 1
        pos += length
    values = [v for v in np.unique(ids) if v]
    masks = []
    cls = []
    for v in values:
        member = ids == v
        for _ in range(int(rng.integers(0, 3))):  # noisy copies and duplicates
            noisy = member ^ (rng.random(n_vertices) < rng.choice([0.0, 0.02, 0.1, 0.4]) * member.mean())
            noisy &= rng.random(n_vertices) > rng.choice([0.0, 0.1, 0.3, 0.6])
            masks.append(noisy)
            cls.append(v // 1000 if rng.random() < 0.8 else int(rng.integers(1, n_classes + 1)))
    for _ in range(int(rng.integers(0, 4))):  # merges of two instances (several matches at 0.25)
        if len(values) >= 2:
            a, b = rng.choice(values, 2, replace=False)
            masks.append((ids == a) | (ids == b))
            cls.append(int(a) // 1000)
    for _ in range(int(rng.integers(0, 4))):  # blobs, some mostly void
        start = int(rng.integers(0, n_vertices))
        blob = np.zeros(n_vertices, bool)
        blob[start : start + int(rng.integers(50, 400))] = True
        masks.append(blob)
        cls.append(int(rng.integers(1, n_classes + 1)))
    m = np.stack(masks, axis=1) if masks else np.zeros((n_vertices, 0), bool)
    scores = (
        rng.choice([0.1, 0.3, 0.5, 0.7, 0.9], size=m.shape[1])
        if rng.random() < 0.5
        else rng.random(m.shape[1])
    )
    return {
        "ids": ids,
        "masks": m.astype(np.uint8),
        "scores": scores,
        "classes": np.array(cls, dtype=np.int64),
    }


@pytest.mark.parametrize("seed", range(40))
def test_it_equals_the_slow_reference_on_random_scenes(seed: int) -> None:
    from array_api_compat import numpy as xp

    rng = np.random.default_rng(seed)
    n_classes = int(rng.integers(1, 4))
    scenes = [random_scene(rng, n_classes) for _ in range(int(rng.integers(1, 4)))]
    np.testing.assert_allclose(
        kernel_ap(xp, scenes, n_classes), reference_ap(scenes, n_classes), rtol=0, atol=1e-12, equal_nan=True
    )


def test_it_runs_under_strict_array_api_and_agrees(xp: Any) -> None:
    rng = np.random.default_rng(7)
    scenes = [random_scene(rng, 3) for _ in range(2)]
    np.testing.assert_allclose(kernel_ap(xp, scenes, 3), reference_ap(scenes, 3), atol=1e-12, equal_nan=True)


# ---- hand-worked cases: one class (1) with two instances A and B of 200 vertices --------------
# Vertices 0-199: instance A (class 1), 200-399: instance B (class 1), 400-599: instance C
# (class 2), 600-799: void, 800-849: a 50-vertex instance D of class 1.


def _hand_scene(preds: list[tuple[slice | list[slice], int, float]]) -> list[dict[str, Any]]:
    ids = np.zeros(850, dtype=np.int64)
    ids[0:200], ids[200:400], ids[400:600], ids[800:850] = 1001, 1002, 2003, 1004
    masks = np.zeros((850, len(preds)), dtype=bool)
    for m, (where, _, _) in enumerate(preds):
        for s in where if isinstance(where, list) else [where]:
            masks[s, m] = True
    return [
        {
            "ids": ids,
            "masks": masks,
            "classes": np.array([p[1] for p in preds]),
            "scores": np.array([p[2] for p in preds], dtype=float),
        }
    ]


def _class1(xp: Any, preds: list[tuple[Any, int, float]]) -> np.ndarray:
    scenes = _hand_scene(preds)
    ap = kernel_ap(xp, scenes, 2)[:, 0]
    np.testing.assert_allclose(ap, reference_ap(scenes, 2)[:, 0], atol=1e-12)
    return ap


def test_it_gives_one_for_a_perfect_prediction(xp: Any) -> None:
    assert _class1(xp, [(slice(0, 200), 1, 0.3), (slice(200, 400), 1, 0.8)]).tolist() == [1.0] * 10


def test_it_gives_one_half_when_one_of_two_instances_is_found(xp: Any) -> None:
    assert _class1(xp, [(slice(0, 200), 1, 0.5)]).tolist() == [0.5] * 10


def test_it_gives_three_eighths_with_a_false_positive_of_equal_score(xp: Any) -> None:
    # points: (p=1/2, r=1/2) and the added (1, 0): 1/2 * 1/2 / 2 + 1 * 1/2 / 2 = 0.375
    assert _class1(xp, [(slice(0, 200), 1, 0.5), (slice(400, 600), 1, 0.5)]).tolist() == [0.375] * 10


def test_it_gives_the_higher_score_of_a_duplicate_to_the_true_positive(xp: Any) -> None:
    # A matched by 0.5 first (file order), duplicate 0.9 on A, and a 0.7 false positive on C.
    # Entries: TP 0.9, FP 0.7, FP 0.5 -> points (1, .5), (.5, .5), (1/3, .5) -> AP = 0.5.
    # (Had the true positive kept 0.5, AP would be 1/12.)
    ap = _class1(xp, [(slice(0, 200), 1, 0.5), (slice(0, 190), 1, 0.9), (slice(400, 600), 1, 0.7)])
    assert ap[:9].tolist() == [0.5] * 9  # IoU of the duplicate is 0.95 > every threshold
    assert ap[9] == 0.5


def test_it_ignores_masks_on_void_only(xp: Any) -> None:
    assert _class1(xp, [(slice(0, 200), 1, 0.5), (slice(600, 800), 1, 0.9)]).tolist() == [0.5] * 10


def test_it_drops_masks_under_100_vertices(xp: Any) -> None:
    # a 99-vertex false positive on C is dropped; a 100-vertex one counts
    assert _class1(xp, [(slice(0, 200), 1, 0.5), (slice(400, 499), 1, 0.5)]).tolist() == [0.5] * 10
    assert _class1(xp, [(slice(0, 200), 1, 0.5), (slice(400, 500), 1, 0.5)]).tolist() == [0.375] * 10


def test_it_does_not_count_small_instances_as_misses_and_ignores_overlap_with_them(xp: Any) -> None:
    # D (50 vertices) is neither a miss nor a match; a mask on D plus void is ignorable
    ap = _class1(
        xp, [(slice(0, 200), 1, 0.5), (slice(200, 400), 1, 0.4), ([slice(800, 850), slice(600, 660)], 1, 0.9)]
    )
    assert ap.tolist() == [1.0] * 10


def test_it_needs_iou_strictly_above_the_threshold(xp: Any) -> None:
    # 100 of A's 200 vertices: IoU exactly 0.5, not a match at 0.5 (a false positive there)
    # at 0.5 the points are (p=0, r=0) at 0.9 and (1/2, 1/2) at 0.8: AP = 1/2 * 1/2 / 2 = 0.125
    ap = _class1(xp, [(slice(0, 100), 1, 0.9), (slice(200, 400), 1, 0.8)])
    assert ap[0] == 0.125
    assert ap[9] == 1.0  # at 0.25 it is a match


def test_it_gives_nan_without_valid_instances_and_zero_without_predictions(xp: Any) -> None:
    scenes = _hand_scene([(slice(0, 200), 1, 0.5)])
    ap = kernel_ap(xp, scenes, 3)
    assert ap[:, 1].tolist() == [0.0] * 10  # class 2 (C) has an instance, no prediction
    assert np.isnan(ap[:, 2]).all()  # class 3 has none


def test_it_matches_a_merged_mask_to_the_first_instance_at_025(xp: Any) -> None:
    # one mask covering A and B (IoU 0.5 with each): at 0.25 it matches A only; B is missed
    ap = _class1(xp, [([slice(0, 200), slice(200, 400)], 1, 0.5)])
    assert ap[9] == 0.5
    assert ap[0] == 0.0  # IoU 0.5 is not > 0.5; it is a false positive at 0.5
