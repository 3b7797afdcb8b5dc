"""Exact IoU of oriented 9-DoF boxes, batched over pairs, for any array namespace.

A box is ``(cx, cy, cz, sx, sy, sz, a, b, c)``: centre, full sizes along the
box's own axes, and Euler angles in radians in the 'ZXY' convention,
``R = Rz(a) @ Rx(b) @ Ry(c)``; the box is ``{centre + R @ u : |u_k| <= s_k / 2}``.

Method (exact up to rounding, float64):

1. For a pair (A, B), work in A's frame with A's centre as origin. The
   intersection A ∩ B is a convex polytope whose boundary is made of the
   parts of A's six faces inside B and the parts of B's six faces inside A.
2. Each face is a rectangle in its own 2D coordinates; it is clipped
   (Sutherland-Hodgman) against the other box's six planes, written in that
   face's coordinates as half-planes ``alpha*u + beta*v <= gamma``. Polygons
   live in fixed-size padded arrays: a polygon may repeat vertices (a repeated
   vertex adds nothing to an area), and clipping a convex polygon by one
   half-plane keeps one cyclic run of inside slots and adds two crossing
   points, so a rectangle clipped by six planes needs at most 4 + 6 slots.
   The run is found by a roll and an argmax and moved to the front by
   ``take_along_axis``; there is no Python loop over boxes or pairs, only over
   the six planes.
3. By the divergence theorem, volume = (1/3) * sum over boundary pieces of
   (signed distance of the piece's plane from the origin) * (its area).
4. Coplanar faces, decided once per (face of A, plane of B) and used by both
   clipping passes so the boundary is assembled consistently: the pair is
   coplanar when all four corners of A's face lie within ``tol`` of B's plane,
   or all four corners of B's face within ``tol`` of A's plane. Same outward
   direction (same floor, identical boxes): A's face ignores that plane of B and
   B's face is dropped, so the shared piece counts once. Opposite directions
   (touching boxes): both faces are dropped; the intersection is at most
   ``tol`` thick there. Signed distances with ``|s| <= tol`` are snapped to 0
   and count as inside, so rounding noise never splits a face that lies on a
   plane. ``tol = TOL_REL * scale`` with ``scale`` the pair's extent (largest
   half size of each box plus the distance between centres).

Accuracy: equal to the closed form on axis-aligned pairs and to a half-space
intersection volume on random pairs to about 1e-12. The snapping moves no
plane by more than ``tol``. The one ill-conditioned case left is two faces
that cross at an angle θ between about ``TOL_REL`` and 1e-7 rad, where the
error is about ``eps / θ`` (relative): real predictions do not do that.
pytorch3d's ``box3d_overlap`` (the official devkit's) agrees to ~1e-5 in
general position but drops triangles it takes for coplanar, so it is wrong for
close, nearly parallel faces; we do not reproduce that.

Memory: pairs are processed in chunks of ``chunk_pairs`` (default
``DEFAULT_CHUNK_PAIRS``); one chunk needs about 4 KiB per pair that passes
the separating-axis prefilter (about 30 MiB at the default). Raise it on a GPU.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from evaluation_workers._xp import array_namespace

__all__ = ["DEFAULT_CHUNK_PAIRS", "TOL_REL", "box_iou3d", "paired_iou3d", "rotation_matrices"]

DEFAULT_CHUNK_PAIRS = 1 << 13
"""Pairs per chunk; bounds the working memory of ``paired_iou3d``."""

TOL_REL = 1e-10
"""Coplanarity and snapping tolerance, relative to the pair's extent."""

# Face f of a box: axis FACE_AXIS[f], outward sign FACE_SIGN[f]; its 2D
# coordinates (u, v) are the coordinates along FACE_U[f] and FACE_V[f].
_FACE_AXIS = np.array([0, 0, 1, 1, 2, 2])
_FACE_SIGN = np.array([1.0, -1.0, 1.0, -1.0, 1.0, -1.0])
_FACE_U = (_FACE_AXIS + 1) % 3
_FACE_V = (_FACE_AXIS + 2) % 3
# Rectangle corners in (u, v), counter-clockwise, in units of half sizes.
_SQUARE_U = np.array([-1.0, 1.0, 1.0, -1.0])
_SQUARE_V = np.array([-1.0, -1.0, 1.0, 1.0])
_N_PLANES = 6


def rotation_matrices(euler: Any) -> Any:
    """Rotation matrices of 'ZXY' Euler angles, ``R = Rz(a) Rx(b) Ry(c)``.

    Args:
        euler: (N, 3) angles (a, b, c) in radians.

    Returns:
        (N, 3, 3); column k is the box's k-th axis in world coordinates.
    """
    xp = array_namespace(euler)
    ca, cb, cc = xp.cos(euler[:, 0]), xp.cos(euler[:, 1]), xp.cos(euler[:, 2])
    sa, sb, sc = xp.sin(euler[:, 0]), xp.sin(euler[:, 1]), xp.sin(euler[:, 2])
    rows = [
        ca * cc - sa * sb * sc,
        -sa * cb,
        ca * sc + sa * sb * cc,
        sa * cc + ca * sb * sc,
        ca * cb,
        sa * sc - ca * sb * cc,
        -cb * sc,
        sb,
        cb * cc,
    ]
    return xp.reshape(xp.stack(rows, axis=1), (-1, 3, 3))


def box_iou3d(boxes1: Any, boxes2: Any, chunk_pairs: int = DEFAULT_CHUNK_PAIRS) -> Any:
    """IoU of every box of ``boxes1`` with every box of ``boxes2``.

    Args:
        boxes1: (N, 9) float64 boxes.
        boxes2: (M, 9) float64 boxes.

    Returns:
        iou: (N, M) float64 in [0, 1].
    """
    xp = array_namespace(boxes1, boxes2)
    n, m = boxes1.shape[0], boxes2.shape[0]
    rows = xp.repeat(xp.arange(n), m)
    cols = xp.tile(xp.arange(m), (n,))
    return xp.reshape(indexed_iou3d(boxes1, boxes2, rows, cols, chunk_pairs), (n, m))


def paired_iou3d(boxes1: Any, boxes2: Any, chunk_pairs: int = DEFAULT_CHUNK_PAIRS) -> Any:
    """IoU of ``boxes1[i]`` with ``boxes2[i]`` for every row i.

    Args:
        boxes1: (P, 9) float64 boxes.
        boxes2: (P, 9) float64 boxes.

    Returns:
        iou: (P,) float64 in [0, 1].
    """
    xp = array_namespace(boxes1, boxes2)
    rows = xp.arange(boxes1.shape[0])
    return indexed_iou3d(boxes1, boxes2, rows, rows, chunk_pairs)


def indexed_iou3d(
    boxes1: Any, boxes2: Any, index1: Any, index2: Any, chunk_pairs: int = DEFAULT_CHUNK_PAIRS
) -> Any:
    """IoU of ``boxes1[index1[i]]`` with ``boxes2[index2[i]]`` for every pair i.

    Rotations are computed once per box. A bounding-sphere test over all pairs
    (a few floats per pair) and a separating-axis test leave the pairs that may
    overlap; those are intersected exactly in chunks of ``chunk_pairs``.

    Args:
        boxes1: (N, 9) float64 boxes.
        boxes2: (M, 9) float64 boxes.
        index1: (P,) integer rows of ``boxes1``.
        index2: (P,) integer rows of ``boxes2``.
        chunk_pairs: pairs per exact chunk (memory bound, see module docstring).

    Returns:
        iou: (P,) float64 in [0, 1]; 0 where a box has zero volume.
    """
    xp = array_namespace(boxes1, boxes2)
    boxes1 = xp.astype(boxes1, xp.float64)
    boxes2 = xp.astype(boxes2, xp.float64)
    half1, half2 = boxes1[:, 3:6] / 2, boxes2[:, 3:6] / 2
    vol1 = xp.prod(boxes1[:, 3:6], axis=1)
    vol2 = xp.prod(boxes2[:, 3:6], axis=1)
    reach = xp.take(xp.linalg.vector_norm(half1, axis=1), index1) + xp.take(
        xp.linalg.vector_norm(half2, axis=1), index2
    )
    delta = xp.take(boxes2[:, :3], index2, axis=0) - xp.take(boxes1[:, :3], index1, axis=0)
    pv1, pv2 = xp.take(vol1, index1), xp.take(vol2, index2)
    near = (xp.sum(delta * delta, axis=1) <= reach * reach) & (pv1 > 0) & (pv2 > 0)
    inter = xp.zeros_like(reach)
    if bool(xp.any(near)):
        rot1 = rotation_matrices(boxes1[:, 6:9])
        rot2 = rotation_matrices(boxes2[:, 6:9])
        i1, i2, d = index1[near], index2[near], delta[near]
        total = int(i1.shape[0])
        parts = []
        for a in range(0, total, chunk_pairs):
            b = min(a + chunk_pairs, total)
            parts.append(
                _intersection_chunk(
                    xp.take(half1, i1[a:b], axis=0),
                    xp.take(half2, i2[a:b], axis=0),
                    xp.take(rot1, i1[a:b], axis=0),
                    xp.take(rot2, i2[a:b], axis=0),
                    d[a:b, :],
                    xp,
                )
            )
        inter[near] = parts[0] if len(parts) == 1 else xp.concat(parts)
    inter = xp.minimum(xp.clip(inter, 0.0, None), xp.minimum(pv1, pv2))
    union = pv1 + pv2 - inter
    safe = xp.where(union > 0, union, xp.ones_like(union))
    return xp.where(union > 0, inter / safe, xp.zeros_like(union))


def _intersection_chunk(half1: Any, half2: Any, rot1: Any, rot2: Any, delta: Any, xp: Any) -> Any:
    """Exact intersection volumes, (n,), of n pairs given half sizes, rotations, centre offsets."""
    # Q[k, j] = (axis k of box 1) . (axis j of box 2); t12 = centre of 2 in 1's frame.
    q12 = xp.matmul(xp.matrix_transpose(rot1), rot2)
    t12 = xp.sum(rot1 * delta[:, :, None], axis=1)
    t21 = -xp.sum(rot2 * delta[:, :, None], axis=1)
    overlap = _may_overlap(half1, half2, q12, t12, t21)
    inter = xp.zeros((half1.shape[0],), dtype=xp.float64)
    if bool(xp.any(overlap)):
        inter[overlap] = _intersection_volume(
            half1[overlap], half2[overlap], q12[overlap], t12[overlap], t21[overlap], xp
        )
    return inter


def _may_overlap(half1: Any, half2: Any, q12: Any, t12: Any, t21: Any) -> Any:
    """False where one of the six face axes separates the boxes (conservative)."""
    xp = array_namespace(half1)
    absq = xp.abs(q12)
    reach1 = half1 + xp.sum(absq * half2[:, None, :], axis=2)  # along box 1's axes
    reach2 = half2 + xp.sum(absq * half1[:, :, None], axis=1)  # along box 2's axes
    return xp.all(xp.abs(t12) <= reach1, axis=1) & xp.all(xp.abs(t21) <= reach2, axis=1)


def _intersection_volume(half1: Any, half2: Any, q12: Any, t12: Any, t21: Any, xp: Any) -> Any:
    """Exact volume of box 1 ∩ box 2 given box 2 in box 1's frame. Shapes (n, ...) -> (n,)."""
    n = half1.shape[0]
    scale = xp.max(half1, axis=1) + xp.max(half2, axis=1) + xp.max(xp.abs(t12), axis=1)
    tol = TOL_REL * scale
    # Two clipping passes stacked on the first axis: rows [:n] clip box 1's faces
    # against box 2 (in box 1's frame), rows [n:] box 2's faces against box 1.
    own_half = xp.concat([half1, half2])
    other_half = xp.concat([half2, half1])
    other_axes = xp.concat([q12, xp.matrix_transpose(q12)])  # columns: other box's axes
    other_centre = xp.concat([t12, t21])
    tol2 = xp.concat([tol, tol])

    sign = xp.asarray(_FACE_SIGN, dtype=xp.float64)
    face_axis = xp.asarray(_FACE_AXIS)
    # The other box's planes as columns: normal (rows, 3, 6), offset (rows, 6): normal . x <= offset.
    normal = xp.repeat(other_axes, 2, axis=2) * sign[None, None, :]
    offset = xp.sum(normal * other_centre[:, :, None], axis=1) + xp.take(other_half, face_axis, axis=1)
    # Plane g in face f's coordinates: alpha*u + beta*v - gamma, arrays (rows, f, g).
    alpha = xp.take(normal, xp.asarray(_FACE_U), axis=1)
    beta = xp.take(normal, xp.asarray(_FACE_V), axis=1)
    n_along = xp.take(normal, face_axis, axis=1)  # normal . own face axis
    face_h = xp.take(own_half, face_axis, axis=1)  # (rows, f)
    gamma = offset[:, None, :] - n_along * (sign * face_h)[:, :, None]
    half_u = xp.take(own_half, xp.asarray(_FACE_U), axis=1)
    half_v = xp.take(own_half, xp.asarray(_FACE_V), axis=1)

    # Extremes over the rectangle's corners of s = alpha*u + beta*v - gamma.
    spread = xp.abs(alpha) * half_u[:, :, None] + xp.abs(beta) * half_v[:, :, None]
    s_max, s_min = spread - gamma, -spread - gamma
    tol3 = tol2[:, None, None]
    near = (s_max <= tol3) & (s_min >= -tol3)

    # Coplanar (face of 1, plane of 2), from both sides, shared by both passes.
    coplanar = near[:n, ...] | xp.matrix_transpose(near[n:, ...])
    same = (n_along[:n, ...] * sign[None, :, None]) > 0
    skip = xp.concat([coplanar & same, xp.zeros_like(coplanar)])
    dead = xp.concat([xp.any(coplanar & ~same, axis=2), xp.any(coplanar, axis=1)])

    # Snapped signs: |s| <= tol counts as 0, which is inside.
    all_in = (s_max <= tol3) | skip
    all_out = (s_min > tol3) & ~skip
    dead = dead | xp.any(all_out, axis=2)
    partial = ~all_in & ~all_out & ~dead[:, :, None]
    alive = xp.astype(~dead, xp.float64)

    area = 4 * half_u * half_v * alive
    todo = xp.any(partial, axis=2)
    if bool(xp.any(todo)):
        area[todo] = _clipped_area(
            half_u[todo],
            half_v[todo],
            alpha[todo],
            beta[todo],
            gamma[todo],
            partial[todo],
            xp.broadcast_to(tol2[:, None], todo.shape)[todo],
            xp,
        )

    # Signed distance of each face's plane from the origin (box 1's centre).
    origin = xp.concat([xp.zeros_like(t21), t21])
    dist = face_h - sign[None, :] * xp.take(origin, face_axis, axis=1)
    volume = xp.sum(dist * area, axis=1) / 3
    return volume[:n] + volume[n:]


def _clipped_area(
    half_u: Any, half_v: Any, alpha: Any, beta: Any, gamma: Any, partial: Any, tol: Any, xp: Any
) -> Any:
    """Area of rectangles clipped by the half-planes marked ``partial``.

    Half-planes that are not partial leave the rectangle whole, so each
    rectangle is clipped only by its partial ones: rectangles are sorted by
    how many they have (most first) and step j clips the leading rows that
    have more than j, so every step works on a slice and no work is wasted.

    Args:
        half_u, half_v: (F,) half sizes of each rectangle.
        alpha, beta, gamma: (F, 6) half-planes ``alpha*u + beta*v <= gamma``.
        partial: (F, 6) which half-planes cut the rectangle's corners.
        tol: (F,) snapping tolerance.

    Returns:
        (F,) areas.
    """
    count = xp.sum(xp.astype(partial, xp.int64), axis=1)
    rows = xp.argsort(count, descending=True, stable=True)
    count = xp.take(count, rows)
    alpha, beta, gamma = (
        xp.take(alpha, rows, axis=0),
        xp.take(beta, rows, axis=0),
        xp.take(gamma, rows, axis=0),
    )
    partial = xp.take(partial, rows, axis=0)
    rank = xp.cumulative_sum(xp.astype(partial, xp.int8), axis=1, dtype=xp.int8)
    tol = xp.take(tol, rows)
    # Vertices as complex numbers u + iv: one gather and one select per step.
    corners = xp.asarray(_SQUARE_U + 1j * _SQUARE_V)
    z = (
        xp.astype(xp.take(half_u, rows), xp.complex128)[:, None] * xp.real(corners)[None, :]
        + 1j * xp.astype(xp.take(half_v, rows), xp.complex128)[:, None] * xp.imag(corners)[None, :]
    )
    nonempty = xp.ones(z.shape[0], dtype=xp.bool)
    area = xp.zeros(z.shape[0], dtype=xp.float64)
    active = z.shape[0]
    for step in range(_N_PLANES + 1):
        done = int(xp.count_nonzero(count > step)) if step < _N_PLANES else 0
        if done < active:  # rows [done, active) have no more planes
            area[done:active] = _polygon_area(z[done:active, :], xp)
        if done == 0:
            break
        active = done
        # The step-th partial plane of each active row.
        plane = xp.argmax(xp.astype(partial[:active, :] & (rank[:active, :] == step + 1), xp.int8), axis=1)[
            :, None
        ]
        z, hit = _clip(
            z[:active, :],
            xp.take_along_axis(alpha[:active, :], plane, axis=1)[:, 0],
            xp.take_along_axis(beta[:active, :], plane, axis=1)[:, 0],
            xp.take_along_axis(gamma[:active, :], plane, axis=1)[:, 0],
            tol[:active],
            xp,
        )
        nonempty[:active] = nonempty[:active] & hit
    area = xp.where(nonempty, area, xp.zeros_like(area))
    # Undo the row sort.
    return xp.take(area, xp.argsort(rows))


def _polygon_area(z: Any, xp: Any) -> Any:
    """Shoelace area of polygons (complex vertices) in padded arrays (F, n) -> (F,)."""
    cross = xp.imag(xp.conj(z) * xp.roll(z, -1, axis=1))
    return xp.abs(xp.sum(cross, axis=1)) / 2


def _clip(z: Any, alpha: Any, beta: Any, gamma: Any, tol: Any, xp: Any) -> tuple[Any, Any]:
    """One Sutherland-Hodgman step on convex polygons in padded arrays.

    Args:
        z: (F, n) complex vertices u + iv (repeats allowed), cyclic order.
        alpha, beta, gamma, tol: (F,) the half-plane ``alpha*u + beta*v <= gamma``.

    Returns:
        (F, n + 1) vertices of the clipped polygons, and (F,) whether each is
        non-empty (an empty one's vertices are meaningless).
    """
    n = z.shape[1]
    s = alpha[:, None] * xp.real(z) + beta[:, None] * xp.imag(z) - gamma[:, None]
    s = xp.where(xp.abs(s) <= tol[:, None], xp.zeros_like(s), s)
    inside = s <= 0
    n_in = xp.count_nonzero(inside, axis=1)
    start = inside & ~xp.roll(inside, 1, axis=1)
    first = xp.argmax(xp.astype(start, xp.int8), axis=1)  # 0 when all in or all out
    slots = xp.arange(n + 1)
    order = (first[:, None] + slots[None, :]) % n
    rz = xp.take_along_axis(z, order, axis=1)
    rs = xp.take_along_axis(s, order, axis=1)
    # After the rotation slots [0, n_in) are inside and [n_in, n) outside: the
    # polygon leaves the half-plane on edge (n_in-1, n_in) and re-enters on
    # edge (n-1, n), slot n being slot 0 again. When all are inside, the
    # "exit" lands on the closing edge (n-1, n): a harmless collinear point.
    k = n_in[:, None]
    last_in = xp.maximum(k - 1, xp.zeros_like(k))
    za = xp.take_along_axis(rz, last_in, axis=1)
    t_exit = _fraction(xp.take_along_axis(rs, last_in, axis=1), xp.take_along_axis(rs, k, axis=1), xp)
    exit_z = za + t_exit * (xp.take_along_axis(rz, k, axis=1) - za)
    t_entry = _fraction(rs[:, n - 1 : n], rs[:, n:], xp)
    entry_z = rz[:, n - 1 : n] + t_entry * (rz[:, n:] - rz[:, n - 1 : n])
    out = xp.where(slots < k, rz, xp.where(slots == k, exit_z, entry_z))
    return out, n_in > 0


def _fraction(sa: Any, sb: Any, xp: Any) -> Any:
    """Where the edge from s = sa to s = sb crosses s = 0, as a fraction in [0, 1]."""
    den = sa - sb
    den = xp.where(den == 0, xp.ones_like(den), den)
    return xp.clip(sa / den, 0.0, 1.0)
