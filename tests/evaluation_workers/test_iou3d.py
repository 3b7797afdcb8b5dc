"""Exact oriented-box IoU against an independent half-space intersection, closed forms and pytorch3d."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from scipy.optimize import linprog
from scipy.spatial import ConvexHull, HalfspaceIntersection

from evaluation_workers.metrics.iou3d import box_iou3d, paired_iou3d, rotation_matrices

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "mmscan_vg"


# ---- slow, obvious reference: scipy half-space intersection, one pair at a time ----


def _rotation(a: float, b: float, c: float) -> np.ndarray:
    rz = np.array([[np.cos(a), -np.sin(a), 0], [np.sin(a), np.cos(a), 0], [0, 0, 1]])
    rx = np.array([[1, 0, 0], [0, np.cos(b), -np.sin(b)], [0, np.sin(b), np.cos(b)]])
    ry = np.array([[np.cos(c), 0, np.sin(c)], [0, 1, 0], [-np.sin(c), 0, np.cos(c)]])
    return rz @ rx @ ry


def _halfspaces(box: np.ndarray) -> np.ndarray:
    """Rows (n, -offset) with n . x - offset <= 0, scipy's layout."""
    rot, centre, half = _rotation(*box[6:9]), box[:3], box[3:6] / 2
    rows = []
    for k in range(3):
        for sign in (1.0, -1.0):
            normal = sign * rot[:, k]
            rows.append([*normal, -(normal @ centre + half[k])])
    return np.array(rows)


def reference_iou(box1: np.ndarray, box2: np.ndarray) -> float:
    spaces = np.vstack([_halfspaces(box1), _halfspaces(box2)])
    a, b = spaces[:, :3], -spaces[:, 3]
    # Chebyshev centre: the deepest interior point; no depth means no volume.
    lp = linprog(
        [0, 0, 0, -1],
        A_ub=np.hstack([a, np.linalg.norm(a, axis=1)[:, None]]),
        b_ub=b,
        bounds=[(None, None)] * 3 + [(0, None)],
        method="highs",
    )
    scale = np.abs(box1[:3]).max() + np.abs(box2[:3]).max() + box1[3:6].max() + box2[3:6].max()
    inter = 0.0
    if lp.status == 0 and lp.x[3] > 1e-12 * scale:
        inter = ConvexHull(HalfspaceIntersection(spaces, lp.x[:3]).intersections).volume
    v1, v2 = np.prod(box1[3:6]), np.prod(box2[3:6])
    return inter / (v1 + v2 - inter)


def _iou(xp, b1: np.ndarray, b2: np.ndarray, chunk: int = 1 << 13) -> np.ndarray:
    return np.asarray(paired_iou3d(xp.asarray(b1), xp.asarray(b2), chunk))


def _assert_matches_reference(xp, b1: np.ndarray, b2: np.ndarray, tol: float = 1e-9) -> None:
    got = _iou(xp, b1, b2)
    want = np.array([reference_iou(x, y) for x, y in zip(b1, b2)])
    worst = int(np.argmax(np.abs(got - want)))
    assert np.abs(got - want).max() <= tol, (b1[worst].tolist(), b2[worst].tolist(), got[worst], want[worst])


def _boxes(rng: np.random.Generator, n: int, tilt: str = "full", size=(0.2, 2.0)) -> np.ndarray:
    euler = rng.uniform(-np.pi, np.pi, (n, 3))
    if tilt == "yaw":
        euler[:, 1:] = 0
    elif tilt == "none":
        euler[:] = 0
    return np.hstack([rng.uniform(-1, 1, (n, 3)), rng.uniform(*size, (n, 3)), euler])


def _axes(boxes: np.ndarray) -> np.ndarray:
    from array_api_compat import numpy as compat

    return np.asarray(rotation_matrices(compat.asarray(boxes[:, 6:9])))


# ---- tests ----


def test_it_builds_zxy_rotations() -> None:
    euler = np.random.default_rng(0).uniform(-np.pi, np.pi, (20, 3))
    want = np.stack([_rotation(*e) for e in euler])
    assert np.abs(_axes(np.hstack([np.zeros((20, 6)), euler])) - want).max() < 1e-15


@pytest.mark.parametrize("tilt", ["full", "yaw"])
def test_it_matches_the_half_space_reference_on_random_pairs(xp, tilt: str) -> None:
    rng = np.random.default_rng(1 if tilt == "full" else 2)
    n = 600 if xp.__name__.endswith("numpy") else 150
    b1 = _boxes(rng, n, tilt)
    b2 = _boxes(rng, n, tilt)
    b2[:, :3] = b1[:, :3] + rng.normal(0, 0.5, (n, 3))
    _assert_matches_reference(xp, b1, b2)


def test_it_equals_the_closed_form_on_axis_aligned_pairs(xp) -> None:
    rng = np.random.default_rng(3)
    b1, b2 = _boxes(rng, 3000, "none"), _boxes(rng, 3000, "none")
    # Grid-aligned edges too: equal faces, touching faces, shared floors.
    b2[:1000, :3] = np.round(b1[:1000, :3] * 4) / 4
    b2[:1000, 3:6] = np.round(b1[:1000, 3:6] * 4) / 4 + 0.25
    b1[:500, :3] = np.round(b1[:500, :3] * 4) / 4
    lo = np.maximum(b1[:, :3] - b1[:, 3:6] / 2, b2[:, :3] - b2[:, 3:6] / 2)
    hi = np.minimum(b1[:, :3] + b1[:, 3:6] / 2, b2[:, :3] + b2[:, 3:6] / 2)
    inter = np.prod(np.clip(hi - lo, 0, None), axis=1)
    want = inter / (np.prod(b1[:, 3:6], 1) + np.prod(b2[:, 3:6], 1) - inter)
    assert np.abs(_iou(xp, b1, b2) - want).max() < 1e-9


def test_it_gives_one_for_identical_boxes(xp) -> None:
    b = _boxes(np.random.default_rng(4), 500)
    assert np.abs(_iou(xp, b, b) - 1).max() < 1e-12


def test_it_gives_zero_for_touching_boxes(xp) -> None:
    rng = np.random.default_rng(5)
    n = 300
    b1 = _boxes(rng, n)
    axes = _axes(b1)
    k = rng.integers(0, 3, n)
    b2 = b1.copy()
    b2[:, 3:6] *= rng.uniform(0.5, 1.5, (n, 3))
    # Slide b2 along b1's k-th axis until the faces meet, then along another axis.
    gap = (b1[np.arange(n), 3 + k] + b2[np.arange(n), 3 + k]) / 2
    b2[:, :3] += axes[np.arange(n), :, k] * gap[:, None]
    b2[:, :3] += axes[np.arange(n), :, (k + 1) % 3] * rng.uniform(-0.3, 0.3, n)[:, None]
    assert np.abs(_iou(xp, b1, b2)).max() < 1e-12
    _assert_matches_reference(xp, b1[:100], b2[:100])


def test_it_gives_the_volume_ratio_for_nested_boxes(xp) -> None:
    rng = np.random.default_rng(6)
    outer = _boxes(rng, 300)
    inner = outer.copy()
    inner[:, 3:6] *= rng.uniform(0.1, 0.5, (300, 3))
    same_rotation = _iou(xp, outer, inner)
    assert np.abs(same_rotation - np.prod(inner[:, 3:6], 1) / np.prod(outer[:, 3:6], 1)).max() < 1e-12
    inner[:, 3:6] = outer[:, 3:6].min(axis=1, keepdims=True) * 0.2
    inner[:, 6:9] = rng.uniform(-np.pi, np.pi, (300, 3))  # a small cube turned any way fits
    assert (
        np.abs(_iou(xp, outer, inner) - np.prod(inner[:, 3:6], 1) / np.prod(outer[:, 3:6], 1)).max() < 1e-12
    )


def test_it_counts_shared_faces_once_for_boxes_slid_along_an_axis(xp) -> None:
    rng = np.random.default_rng(7)
    b1 = _boxes(rng, 300)
    k = rng.integers(0, 3, 300)
    shift = rng.uniform(-0.9, 0.9, 300)
    b2 = b1.copy()
    b2[:, :3] += _axes(b1)[np.arange(300), :, k] * (shift * b1[np.arange(300), 3 + k])[:, None]
    want = (1 - np.abs(shift)) / (1 + np.abs(shift))
    assert np.abs(_iou(xp, b1, b2) - want).max() < 1e-12


def test_it_handles_thin_slabs_on_the_same_floor(xp) -> None:
    rng = np.random.default_rng(8)
    n = 400
    floor = rng.uniform(-1, 1, n)
    b1, b2 = _boxes(rng, n, "yaw"), _boxes(rng, n, "yaw")
    b1[:, 5], b2[:, 5] = rng.uniform(0.005, 0.05, n), rng.uniform(0.005, 0.05, n)
    b1[:, 2], b2[:, 2] = floor + b1[:, 5] / 2, floor + b2[:, 5] / 2
    b2[:, :2] = b1[:, :2] + rng.normal(0, 0.4, (n, 2))
    b2[: n // 2, 6] = b1[: n // 2, 6]  # same yaw: vertical faces parallel too
    _assert_matches_reference(xp, b1, b2)


def test_it_handles_tiny_boxes(xp) -> None:
    rng = np.random.default_rng(9)
    small = _boxes(rng, 200, size=(1e-5, 1e-4))
    small[:, :3] *= 1e-4
    other = small.copy()
    other[:, :3] += rng.normal(0, 3e-5, (200, 3))
    other[:, 6:] = rng.uniform(-np.pi, np.pi, (200, 3))
    _assert_matches_reference(xp, small, other)
    big = _boxes(rng, 200)
    inside = big.copy()
    inside[:, 3:6] = 1e-6
    assert np.abs(_iou(xp, big, inside) - 1e-18 / np.prod(big[:, 3:6], 1)).max() < 1e-20


def test_it_gives_zero_for_far_apart_boxes(xp) -> None:
    rng = np.random.default_rng(10)
    b1 = _boxes(rng, 200)
    b2 = _boxes(rng, 200)
    b2[:, :3] += 10
    assert (_iou(xp, b1, b2) == 0).all()


def test_it_handles_nearly_parallel_faces(xp) -> None:
    rng = np.random.default_rng(11)
    b1 = _boxes(rng, 300)
    b2 = b1.copy()
    b2[:, :3] += rng.normal(0, 0.2, (300, 3))
    b2[:, 6:] += rng.normal(0, 1, (300, 3)) * np.logspace(-12, -5, 300)[:, None]
    _assert_matches_reference(xp, b1, b2)


def test_it_does_not_depend_on_the_chunk_size(xp) -> None:
    rng = np.random.default_rng(12)
    b1, b2 = _boxes(rng, 500), _boxes(rng, 500)
    assert np.array_equal(_iou(xp, b1, b2, 1 << 13), _iou(xp, b1, b2, 37))


def test_it_computes_all_pairs_and_zero_for_empty_boxes(xp) -> None:
    rng = np.random.default_rng(13)
    b1, b2 = _boxes(rng, 7), _boxes(rng, 5)
    b2[0, 3] = 0.0
    matrix = np.asarray(box_iou3d(xp.asarray(b1), xp.asarray(b2)))
    assert matrix.shape == (7, 5)
    assert (matrix[:, 0] == 0).all()
    for i in range(7):
        for j in range(1, 5):
            assert abs(matrix[i, j] - reference_iou(b1[i], b2[j])) < 1e-9
    empty = box_iou3d(xp.asarray(np.zeros((0, 9))), xp.asarray(b2))
    assert tuple(empty.shape) == (0, 5)


def _min_face_angle(b1: np.ndarray, b2: np.ndarray) -> np.ndarray:
    """Smallest angle (degrees) between a face normal of box 1 and one of box 2."""
    cos = np.abs(np.einsum("nik,nil->nkl", _axes(b1), _axes(b2))).reshape(len(b1), -1).max(1)
    return np.degrees(np.arccos(np.minimum(cos, 1)))


def test_it_agrees_with_pytorch3d_on_boxes_in_general_position() -> None:
    from array_api_compat import numpy as compat

    boxes = json.loads((FIXTURES / "iou_boxes.json").read_text())
    golden = json.loads((FIXTURES / "iou_pytorch3d.json").read_text())
    b1, b2 = np.array(boxes["pairs1"]), np.array(boxes["pairs2"])
    general = _min_face_angle(b1, b2) > 2.0  # pytorch3d is unreliable for close, nearly parallel faces
    assert general.sum() > 100
    got = _iou(compat, b1, b2)
    assert np.abs(got - np.array(golden["pairs"]))[general].max() < 1e-5
    # Where pytorch3d is off (faces 0.55 degrees apart), the exact reference sides with us.
    for i in np.flatnonzero(~general):
        assert abs(got[i] - reference_iou(b1[i], b2[i])) < 1e-9
    m1, m2 = np.array(boxes["matrix1"]), np.array(boxes["matrix2"])
    matrix = np.asarray(box_iou3d(compat.asarray(m1), compat.asarray(m2)))
    assert np.abs(matrix - np.array(golden["matrix"])).max() < 1e-5


# ---- the kernels behind it: edge lengths, the faces fallback, the floor, threads ----


def _frames(b1: np.ndarray, b2: np.ndarray):  # type: ignore[no-untyped-def]
    """(half1, half2, q12, t12, t21, tol) of each pair, as the kernels take them."""
    r1, r2 = _axes(b1), _axes(b2)
    d = b2[:, :3] - b1[:, :3]
    h1, h2 = b1[:, 3:6] / 2, b2[:, 3:6] / 2
    t12 = np.einsum("nkj,nk->nj", r1, d)
    tol = 1e-10 * (h1.max(1) + h2.max(1) + np.abs(t12).max(1))
    return h1, h2, np.einsum("nki,nkj->nij", r1, r2), t12, -np.einsum("nkj,nk->nj", r2, d), tol


@pytest.mark.parametrize("tilt", ["full", "yaw"])
def test_the_edge_formula_alone_matches_the_reference_in_general_position(xp, tilt: str) -> None:
    from evaluation_workers.metrics import iou3d_edges

    rng = np.random.default_rng(20 if tilt == "full" else 21)
    b1, b2 = _boxes(rng, 200, tilt), _boxes(rng, 200, tilt)
    b2[:, :3] = b1[:, :3] + rng.normal(0, 0.4, (200, 3))
    kernel = iou3d_edges.general_volume if tilt == "full" else iou3d_edges.planar_volume
    volume, degenerate = kernel(*(xp.asarray(a) for a in _frames(b1, b2)), xp)
    volume, degenerate = np.asarray(volume), np.asarray(degenerate)
    assert not degenerate.any()  # general position: the fallback is not used
    want = np.array([reference_iou(x, y) for x, y in zip(b1, b2)])
    inter = want * (np.prod(b1[:, 3:6], 1) + np.prod(b2[:, 3:6], 1)) / (1 + want)
    assert np.abs(volume - inter).max() < 1e-9
    if tilt == "yaw":  # the 3-D formula agrees with the 2-D one where both apply
        general, _ = iou3d_edges.general_volume(*(xp.asarray(a) for a in _frames(b1, b2)), xp)
        assert np.abs(np.asarray(general) - volume).max() < 1e-12


def test_the_edge_formula_reports_coplanar_and_touching_pairs_as_degenerate(xp) -> None:
    from evaluation_workers.metrics import iou3d_edges

    rng = np.random.default_rng(22)
    b = _boxes(rng, 50)
    slid = b.copy()
    slid[:, :3] += _axes(b)[:, :, 0] * (0.3 * b[:, 3])[:, None]  # faces of two axes stay coplanar
    for other in (b, slid):
        _, degenerate = iou3d_edges.general_volume(*(xp.asarray(a) for a in _frames(b, other)), xp)
        assert np.asarray(degenerate).all()
    yaw = _boxes(rng, 50, "yaw")
    _, degenerate = iou3d_edges.planar_volume(*(xp.asarray(a) for a in _frames(yaw, yaw)), xp)
    assert np.asarray(degenerate).all()


@pytest.mark.parametrize("floor", [0.25, 0.5])
def test_a_floor_keeps_every_iou_at_or_above_it_exact(xp, floor: float) -> None:
    from evaluation_workers.metrics.iou3d import indexed_iou3d

    rng = np.random.default_rng(23)
    n = 3000
    b1 = _boxes(rng, n, "full")
    b2 = b1.copy()
    b2[:, :3] += rng.normal(0, 0.3, (n, 3)) * b1[:, 3:6]
    b2[:, 3:6] *= rng.uniform(0.6, 1.5, (n, 3))
    b2[: n // 2, 6:] += rng.normal(0, 0.3, (n // 2, 3))
    rows = xp.arange(n)
    exact = np.asarray(indexed_iou3d(xp.asarray(b1), xp.asarray(b2), rows, rows))
    floored = np.asarray(indexed_iou3d(xp.asarray(b1), xp.asarray(b2), rows, rows, floor=floor))
    assert ((exact >= floor) & (exact < 0.9)).sum() > 50 and (exact < floor).sum() > 300
    assert np.array_equal(floored[exact >= floor], exact[exact >= floor])
    below = exact < floor
    assert ((floored[below] == 0) | (floored[below] == exact[below])).all()
    assert (floored[below] == 0).sum() > 100  # the bound does skip work


def test_threads_do_not_change_a_bit(monkeypatch) -> None:
    from array_api_compat import numpy as compat

    rng = np.random.default_rng(24)
    b1, b2 = _boxes(rng, 4000), _boxes(rng, 4000)
    b2[:, :3] = b1[:, :3] + rng.normal(0, 0.5, (4000, 3))
    monkeypatch.setenv("EVAL_THREADS", "1")
    one = _iou(compat, b1, b2, chunk=97)
    monkeypatch.setenv("EVAL_THREADS", "3")
    assert np.array_equal(one, _iou(compat, b1, b2, chunk=97))
