"""Intersection volume of two oriented boxes from the lengths of its edges.

The intersection P of boxes A and B is the convex polytope of the twelve
half-spaces ``n_f . x <= c_f`` (A's six faces and B's six), written in A's
frame with A's centre as origin. By the divergence theorem, once in 3-D and
once in each face's plane,

    vol(P) = 1/3 sum_f c_f area_f,   area_f = 1/2 sum_g d_fg L_fg,

where L_fg is the length of the segment of the line (plane f) ∩ (plane g)
that lies in P, and d_fg = (c_g - cos_fg c_f) / sin_fg is that line's
distance, within plane f, from the foot of the origin (cos_fg = n_f . n_g).
Each line serves its two planes, so

    vol(P) = 1/6 sum over lines {f, g} of L_fg (2 c_f c_g - cos_fg (c_f^2 + c_g^2)) / sin_fg.

Only non-parallel pairs of planes make a line: A's 12 edges, B's 12 edges
and the 36 lines of an A face with a B face. Each segment is found by
clipping its line with the slabs of the boxes (the slab method); there is no
polygon to build, sort or gather, so every array has a fixed shape.

Two boxes whose third axes are exactly parallel (two yaw-only boxes, the usual
case in indoor scenes) reduce to a 2-D problem: ``planar_volume`` is the same
formula on the rectangles' 8 edges times the overlap along that axis.

The formula double-counts a face's edge when two of its lines coincide: a
line lying on a third plane, or two coincident planes. Those pairs are
reported as ``degenerate`` (within ``tol``, the caller's snapping tolerance)
and the caller computes them by clipping faces (``iou3d_faces``), which
handles coplanar faces explicitly. Near, but not at, such a configuration the
formula stays exact: a slightly tighter line takes the edge over, and the two
lines' contributions differ by the distance between them.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from evaluation_workers._xp import contiguous, non_negative

__all__ = ["PARALLEL", "general_volume", "planar_volume"]

PARALLEL = 1e-10
"""|sin| (or |cos| to an axis) below which a line is treated as parallel to a plane or line."""

# A's 12 edges, in three directions of four parallel edges: direction d runs along axis _D_K3[d], at
# x_K1 = s1 h_K1 and x_K2 = s2 h_K2 (K1 = _D_K1[d], K2 = _D_K2[d]; s1, s2 = +-1), laid out (d, s1, s2).
_D_K1 = np.array([0, 0, 1])
_D_K2 = np.array([1, 2, 2])
_D_K3 = np.array([2, 1, 0])
_OTHER = np.array([[1, 2], [2, 0], [0, 1]])  # the two axes other than k
# The 4 edges of a rectangle: x_K = S h_K, running along axis 1 - K.
_R_K = np.array([0, 0, 1, 1])
_R_S = np.array([1.0, -1.0, 1.0, -1.0])


def _slab_clip(
    alphas: list[Any], betas: list[Any], halves: list[Any], tol: Any, lo: Any | None, hi: Any | None, xp: Any
) -> tuple[Any, Any | None]:
    """Clip lines ``alpha + s beta`` to the slabs ``|alpha + s beta| <= half``, one slab per list item.

    The slabs are separate arrays, not an axis: reductions over an axis of 2-4
    items are slow in NumPy, element-wise maxima are not.

    ``lo``, ``hi`` None: the whole line (from -inf to inf).

    Returns:
        length of [lo, hi] after clipping (boundaries count as inside), and
        whether the line lies on a slab's boundary (within ``tol``, parallel
        within PARALLEL); None when no line is parallel to any slab (general position).
    """
    # Each slab clips the line to [mid - reach, mid + reach], mid = -alpha / beta, reach = half / |beta|.
    # Written with a = alpha / beta and the lower end negated (neg_lo = -lo), which are the same values
    # bit for bit (IEEE negation is exact; max(x, -y) = -min(-x, y)) in four operations fewer a slab.
    neg_lo = None if lo is None else -lo
    outside = on_boundary = None
    for alpha, beta, half in zip(alphas, betas, halves):
        par = xp.abs(beta) <= PARALLEL
        general = not bool(xp.any(par))  # general position: no line parallel to this slab
        inv = 1 / beta if general else 1 / xp.where(par, xp.ones_like(beta), beta)
        a = alpha * inv
        reach = half * xp.abs(inv)
        if not general:
            reach = xp.where(par, xp.inf, reach)
        neg_lo = a + reach if neg_lo is None else xp.minimum(neg_lo, a + reach)  # min(inf, x) is x, NaN too
        hi = reach - a if hi is None else xp.minimum(hi, reach - a)
        if general:
            continue
        excess = xp.abs(alpha) - half
        out, on = par & (excess > tol), par & (xp.abs(excess) <= tol)
        outside = out if outside is None else outside | out
        on_boundary = on if on_boundary is None else on_boundary | on
    if hi is None or neg_lo is None:
        raise ValueError("Expected at least one slab to clip the lines with")
    length = non_negative(hi + neg_lo)
    if outside is None:
        return length, None
    return xp.where(outside, xp.zeros_like(length), length), on_boundary


def _on_boundary(on_boundary: Any | None, length: Any, xp: Any, pairs_last: bool = False) -> Any:
    """(n,): whether a line of positive length lies on a slab's boundary (False in general position).
    ``length`` (n, lines), or (..., n) with ``pairs_last`` (the structure of arrays)."""
    n = length.shape[-1] if pairs_last else length.shape[0]
    if on_boundary is None:
        return xp.zeros((n,), dtype=xp.bool)
    if pairs_last:
        return xp.any(xp.reshape(on_boundary & (length > 0), (-1, n)), axis=0)
    return xp.any(on_boundary & (length > 0), axis=1)


def _signs(axis: int, ndim: int, xp: Any) -> Any:
    """(+1, -1) along ``axis`` of an ``ndim``-dimensional array of ones elsewhere, for broadcasting."""
    shape = [1] * ndim
    shape[axis] = 2
    return xp.reshape(xp.asarray([1.0, -1.0]), tuple(shape))


def _by_direction(rows: Any, k: Any, xp: Any) -> Any:
    """(3, n) per axis -> (direction, 1, 1, n): the axis ``k[d]`` of each edge direction d."""
    return xp.take(rows, k, axis=0)[:, None, None, :]


def _box_edges(h_own: Any, h_other: Any, q: Any, centre: Any, tol: Any, xp: Any) -> tuple[Any, Any]:
    """Lengths (3, 2, 2, n) of one box's edges inside the other, laid out (direction, s1, s2, pair) (see
    ``_D_K1``), and (n,) degenerate flags.

    Pairs along the last axis: ``h_own``, ``h_other`` (3, n) half sizes; ``q[k, j]`` (3, 3, n) the other
    box's axis j along this box's axis k, ``centre`` (3, n) the other box's centre, both in this box's frame.
    """
    k1, k2, k3 = (xp.asarray(a) for a in (_D_K1, _D_K2, _D_K3))
    corner1 = _signs(1, 4, xp) * _by_direction(h_own, k1, xp)  # (3, 2, 1, n)
    corner2 = _signs(2, 4, xp) * _by_direction(h_own, k2, xp)  # (3, 1, 2, n)
    alphas, betas, halves = [], [], []
    for j in range(3):  # the other box's slabs
        axis = q[:, j, :]
        other_centre = axis[0, :] * centre[0, :] + axis[1, :] * centre[1, :] + axis[2, :] * centre[2, :]
        alphas.append(corner1 * _by_direction(axis, k1, xp) + corner2 * _by_direction(axis, k2, xp) - other_centre)
        betas.append(_by_direction(axis, k3, xp))  # one per direction: its four edges are parallel
        halves.append(h_other[j, :])
    reach = _by_direction(h_own, k3, xp)
    length, on_boundary = _slab_clip(alphas, betas, halves, tol, -reach, reach, xp)
    return length, _on_boundary(on_boundary, length, xp, pairs_last=True)


def general_volume(half1: Any, half2: Any, q: Any, t12: Any, t21: Any, tol: Any, xp: Any) -> tuple[Any, Any]:
    """Intersection volumes (n,) of n pairs, and (n,) which pairs are degenerate.

    Args:
        half1, half2: (n, 3) half sizes.
        q: (n, 3, 3), ``q[:, k, j]`` = (axis k of box 1) . (axis j of box 2).
        t12: (n, 3) box 2's centre in box 1's frame; t21 box 1's in box 2's.
        tol: (n,) snapping tolerance (see ``iou3d``).

    The pairs go to the last axis (a structure of arrays): what depends on an edge's or a line's
    direction only is computed once for its parallel siblings, every array is a set of long rows,
    and each value is computed by the same IEEE operations as pair by pair; the sums over a pair's
    12 or 36 terms are taken in NumPy's order for a row of that length (``_row_sum``).
    """
    h1, h2 = contiguous(xp.permute_dims(half1, (1, 0))), contiguous(xp.permute_dims(half2, (1, 0)))
    qt = contiguous(xp.permute_dims(q, (1, 2, 0)))  # (3, 3, n): q[k, j]
    t12t, t21t = contiguous(xp.permute_dims(t12, (1, 0))), contiguous(xp.permute_dims(t21, (1, 0)))
    # Plane offsets from box 1's centre: A's face (k, s) is s x_k <= h1_k;
    # B's face (k, s) is s u_k . x <= s u_k . t12 + h2_k, with u_k . t12 = -t21_k.
    edges_a, deg_a = _box_edges(h1, h2, qt, t12t, tol, xp)
    edges_b, deg_b = _box_edges(h2, h1, contiguous(xp.permute_dims(qt, (1, 0, 2))), t21t, tol, xp)
    k1, k2 = xp.asarray(_D_K1), xp.asarray(_D_K2)
    w_a = 2 * _by_direction(h1, k1, xp) * _by_direction(h1, k2, xp)
    c_b1 = _by_direction(h2, k1, xp) - _signs(1, 4, xp) * _by_direction(t21t, k1, xp)
    c_b2 = _by_direction(h2, k2, xp) - _signs(2, 4, xp) * _by_direction(t21t, k2, xp)
    n = half1.shape[0]
    total = (_row_sum(xp.reshape(edges_a * w_a, (12, n)))
             + _row_sum(xp.reshape(edges_b * 2 * c_b1 * c_b2, (12, n))))
    face_sum, face_degenerate = _face_lines(h1, h2, qt, t21t, tol, xp)
    return (total + face_sum) / 6, deg_a | deg_b | face_degenerate


def _face_lines(h1: Any, h2: Any, qt: Any, t21t: Any, tol: Any, xp: Any) -> tuple[Any, Any]:
    """The 36 lines of an A face (axis ka, sign sa) with a B face (axis kb, sign sb): the sum over them of
    L_fg (2 c_f c_g - cos_fg (c_f^2 + c_g^2)) / sin_fg, (n,), and (n,) degenerate flags.

    Pairs along the last axis (``general_volume``'s arrays); the lines are laid out (ka, sa, kb, sb):
    what depends on the 9 directions only (sin, its inverse, the axes' products) is computed once and
    broadcast over the signs.
    """
    o1, o2 = xp.asarray(_OTHER[:, 0]), xp.asarray(_OTHER[:, 1])
    sa, sb = _signs(1, 5, xp), _signs(3, 5, xp)

    def face(x: Any) -> Any:  # (3, 3, n) indexed (ka, kb) -> (ka, 1, kb, 1, n)
        return x[:, None, :, None, :]

    c_f = h1[:, None, None, None, :]  # A's plane offsets, by ka
    c_g = h2[None, None, :, None, :] - sb * t21t[None, None, :, None, :]  # B's, by (kb, sb)
    q1, q2 = xp.take(qt, o1, axis=0), xp.take(qt, o2, axis=0)  # q[o1(ka), kb], q[o2(ka), kb]
    cos = sa * sb * face(qt)
    g1, g2 = sb * face(q1), sb * face(q2)
    sin = face(xp.sqrt(q1 * q1 + q2 * q2))  # |n_f x n_g|: g * g = q * q exactly
    parallel = sin <= PARALLEL
    some_parallel = bool(xp.any(parallel))
    inv = 1 / xp.where(parallel, xp.ones_like(sin), sin) if some_parallel else 1 / sin
    # The line: x_ka = sa c_f; in the (o1, o2) plane, the point of g . x = c_g - cos c_f
    # nearest the axis; unit direction (n_f x n_g) / sin, whose ka component is 0.
    along = (c_g - cos * c_f) * inv * inv
    p_ka, p_o1, p_o2 = sa * c_f, along * g1, along * g2
    d_o1, d_o2 = -sa * g2 * inv, sa * g1 * inv
    alphas, betas = [p_o1, p_o2], [d_o1, d_o2]
    halves = [xp.take(h1, o1, axis=0)[:, None, None, None, :], xp.take(h1, o2, axis=0)[:, None, None, None, :]]
    for jb in (o1, o2):  # B's two other slabs (the axes other than kb)
        u_ka, u_o1, u_o2 = (face(xp.take(rows, jb, axis=1)) for rows in (qt, q1, q2))
        alphas.append(u_ka * p_ka + u_o1 * p_o1 + u_o2 * p_o2 + xp.take(t21t, jb, axis=0)[None, None, :, None, :])
        betas.append(u_o1 * d_o1 + u_o2 * d_o2)
        halves.append(xp.take(h2, jb, axis=0)[None, None, :, None, :])
    tol_all = tol[None, None, None, None, :]
    length, on_boundary = _slab_clip(alphas, betas, halves, tol_all, None, None, xp)
    n = h1.shape[1]
    if some_parallel:
        length = xp.where(parallel, xp.zeros_like(length), length)
    degenerate = _on_boundary(on_boundary, length, xp, pairs_last=True)
    if some_parallel:
        coincident = parallel & (xp.where(cos > 0, xp.abs(c_f - c_g), xp.abs(c_f + c_g)) <= tol_all)
        degenerate = degenerate | xp.any(xp.reshape(coincident, (36, n)), axis=0)
    w = (2 * c_f * c_g - cos * (c_f * c_f + c_g * c_g)) * inv
    return _row_sum(xp.reshape(length * w, (36, n))), degenerate


def _row_sum(rows: Any) -> Any:
    """Sum over the first axis (8 to 128 long), in the order of NumPy's sum of a contiguous row of that length
    (``pairwise_sum``: eight running sums, combined pairwise, then the rest one by one)."""
    m = rows.shape[0]
    acc = [rows[j, ...] for j in range(8)]
    i = 8
    while i < m - m % 8:
        acc = [acc[j] + rows[i + j, ...] for j in range(8)]
        i += 8
    total = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]))
    for k in range(i, m):
        total = total + rows[k, ...]
    return total


def planar_volume(half1: Any, half2: Any, q: Any, t12: Any, t21: Any, tol: Any, xp: Any) -> tuple[Any, Any]:
    """``general_volume`` for pairs whose third axes are parallel (q[:, 2, :2] = q[:, :2, 2] = 0)."""
    area_a, deg_a = _rectangle_edges(half1, half2, q, t12, tol, xp)
    area_b, deg_b = _rectangle_edges(half2, half1, xp.matrix_transpose(q), t21, tol, xp)
    rk, rs = xp.asarray(_R_K), xp.asarray(_R_S)
    c_a = xp.take(half1, rk, axis=1)
    c_b = xp.take(half2, rk, axis=1) - rs * xp.take(t21, rk, axis=1)
    area = (xp.sum(area_a * c_a, axis=1) + xp.sum(area_b * c_b, axis=1)) / 2
    top = xp.minimum(half1[:, 2], t12[:, 2] + half2[:, 2])
    bottom = xp.maximum(-half1[:, 2], t12[:, 2] - half2[:, 2])
    return area * non_negative(top - bottom), deg_a | deg_b


def _rectangle_edges(half_own: Any, half_other: Any, q: Any, centre: Any, tol: Any, xp: Any) -> tuple[Any, Any]:
    """Lengths (n, 4) of a rectangle's edges inside the other rectangle (first two axes)."""
    rk, rs = xp.asarray(_R_K), xp.asarray(_R_S)
    corner = rs * xp.take(half_own, rk, axis=1)  # (n, 4)
    alphas, betas, halves = [], [], []
    for j in range(2):
        axis = q[:, :2, j]
        other_centre = axis[:, 0] * centre[:, 0] + axis[:, 1] * centre[:, 1]
        alphas.append(corner * xp.take(axis, rk, axis=1) - other_centre[:, None])
        betas.append(xp.take(axis, 1 - rk, axis=1))
        halves.append(half_other[:, j : j + 1])
    reach = xp.take(half_own, 1 - rk, axis=1)
    length, on_boundary = _slab_clip(alphas, betas, halves, tol[:, None], -reach, reach, xp)
    return length, _on_boundary(on_boundary, length, xp)
