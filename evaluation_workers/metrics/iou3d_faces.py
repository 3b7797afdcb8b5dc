"""Intersection volume of two oriented boxes by clipping their faces: the exact fallback.

Used by ``iou3d`` for the pairs that ``iou3d_edges`` reports degenerate
(coplanar faces, an edge lying on the other box's face), which it decides
explicitly. Method (exact up to rounding, float64):

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
   plane.

One chunk needs about 4 KiB per pair.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["intersection_volume"]

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


def intersection_volume(half1: Any, half2: Any, q12: Any, t12: Any, t21: Any, tol: Any, xp: Any) -> Any:
    """Exact volume of box 1 ∩ box 2 given box 2 in box 1's frame. Shapes (n, ...) -> (n,).

    ``tol`` (n,) is the snapping and coplanarity tolerance (see ``iou3d``).
    """
    n = half1.shape[0]
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
