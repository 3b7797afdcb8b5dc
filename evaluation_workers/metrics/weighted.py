"""Weighted sums a bootstrap statistic takes of one block of resamples, without a loop over items.

A statistic (``bootstrap.Statistic``) is handed (b, n) unit weights: how
often each unit's scene was drawn in each of b resamples. Means and ratios
are products with those weights (``weighted_ratio``, ``nanmean_last``).
Ranked metrics (AP) need running sums of the weights along a ranking, but
only at a few positions (the true positives and the points just above them):
``RunningSums`` gives those, cutting the ranking into segments instead of
summing along all of it; ``entries_up_to`` is the matrix that turns them into
one product where the units are few.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from array_api_compat import is_cupy_namespace

from evaluation_workers._xp import (
    accumulate_rows,
    array_namespace,
    contiguous,
    cumsum64,
    lean_import,
    segment_sums,
)
from evaluation_workers.metrics import bootstrap
from evaluation_workers.metrics.interleaved import Interleaved


def as_int32(counts: Any, bound: int) -> Any | None:
    """``counts`` as int32 when they are whole, non-negative and any sum of ``bound`` of them fits
    in int32 (draw counts always are): running sums of them in int32 are exact and several times
    faster than in float64 (an add of integers is not a chain of float latencies). None otherwise."""
    xp = array_namespace(counts)
    top = _whole_top(counts)
    if top is None or top * max(bound, 1) >= 2**31:
        return None
    return xp.astype(counts, xp.int32)


def _whole_top(counts: Any) -> int | None:
    """The largest of ``counts`` when they are all whole and non-negative (draws), else None; an
    integer array (``as_int32``'s) needs no check of wholeness."""
    xp = array_namespace(counts)
    if not (counts.shape[0] and counts.shape[1]):
        return 0
    if not xp.isdtype(counts.dtype, "integral") and not bool(xp.all(counts == xp.floor(counts))):
        return None
    return int(xp.max(counts)) if float(xp.min(counts)) >= 0 else None


def weighted_ratio(xp: Any, num: Any, den: Any) -> Any:
    """num / den, NaN where den is 0 (a group that the resample does not draw)."""
    safe = xp.where(den > 0, den, xp.ones_like(den))
    return xp.where(den > 0, num / safe, xp.full_like(num, math.nan))


def nanmean_last(xp: Any, x: Any) -> Any:
    """Mean over the last axis of the non-NaN values; NaN where there are none."""
    defined = ~xp.isnan(x)
    total = xp.sum(xp.where(defined, x, xp.zeros_like(x)), axis=-1)
    count = xp.astype(xp.sum(xp.astype(defined, xp.int64), axis=-1), xp.float64)
    return weighted_ratio(xp, total, count)


def entries_up_to(unit: np.ndarray, ends: np.ndarray, n_units: int) -> np.ndarray:
    """(n_units, J) float64: how many entries of each unit lie at or before each of ``ends`` in ``unit``.

    ``counts @ entries_up_to(...)`` is ``RunningSums``' sums: a statistic that
    needs the same sums for every block of resamples computes this once.
    """
    if ends.shape[0] == 0:
        return np.zeros((n_units, 0))
    used = unit[: int(ends[-1]) + 1]
    starts = np.concatenate([[0], ends[:-1] + 1]).astype(np.int64)
    segment = np.repeat(np.arange(ends.shape[0]), np.diff(np.append(starts, used.shape[0])))
    per_segment = np.bincount(used * ends.shape[0] + segment, minlength=n_units * ends.shape[0])
    return np.cumsum(per_segment.reshape(n_units, ends.shape[0]), axis=1).astype(np.float64)


class RunningSums:
    """Resampled weights summed along a ranking at some of its positions, prepared once for every
    block of resamples: ``RunningSums(unit, ends, n)(counts)`` is (b, J) float64 with
    ``out[:, j] = sum(counts[:, unit[e]] for e <= ends[j])`` (an entry drawn k times counted k times),
    ``unit`` (R,) the unit of each entry in ranking order, ``ends`` (J,) strictly increasing positions.

    With few units (OpenScan's scenes) a block's sums are one matrix product
    with the (n, J) matrix of how many entries of each unit lie up to each
    position. Otherwise (MMScan's prompts) each segment between two positions
    is summed: on the CPU as the product of the sparse (J, n) matrix of each
    unit's entries per segment with the transposed counts, in integers as
    narrow as every segment's sum allows (draw counts are small integers; a
    sparse product in int16 is 15 times faster than gathering the rows and
    reducing them with NumPy); on a GPU by gathering the (b, R) weights and
    summing the segments, in few large kernels.
    """

    def __init__(self, unit: np.ndarray, ends: np.ndarray, n_units: int) -> None:
        self.n_units, self.n_ends = n_units, int(ends.shape[0])
        self.dense: np.ndarray | None = None
        if not self.n_ends:
            return
        used = unit[: int(ends[-1]) + 1]
        starts = np.concatenate([[0], ends[:-1] + 1]).astype(np.int64)
        if n_units * self.n_ends <= min(bootstrap.MAX_ELEMENTS, 16 * used.shape[0]):
            self.dense = entries_up_to(unit, ends, n_units)
            return
        self.used, self.starts = used, starts
        self.longest = int(np.max(ends + 1 - starts))
        self._sparse: dict[tuple[type[np.generic], int], Any] = {}  # (dtype, layout rows or 0)

    def __call__(self, counts: Any) -> Any:
        xp = array_namespace(counts)
        b = counts.shape[0]
        if not self.n_ends:
            return xp.zeros((b, 0), dtype=xp.float64)
        if self.dense is not None:
            return counts @ xp.asarray(self.dense)
        if is_cupy_namespace(xp):  # a GPU wants few large kernels
            rows = max(1, bootstrap.MAX_ELEMENTS // self.used.shape[0])
            used_d, starts_d = xp.asarray(self.used), xp.asarray(self.starts)
            parts = [segment_sums(xp.take(counts[r0 : min(r0 + rows, b), :], used_d, axis=1), starts_d, xp)
                     for r0 in range(0, b, rows)]
            return cumsum64(xp.concat(parts, axis=0) if len(parts) > 1 else parts[0], axis=1)
        return xp.asarray(self._host(np.asarray(counts)))

    def interleaved(self, weights: Any, layout: Interleaved) -> Any:
        """The same sums as float64 in ``layout`` (of the J positions), given the (n, b) weights
        (units by resamples): ``out[layout.row_of(j)] = sums[:, j]``, padding rows 0.

        On the CPU the sparse product yields the layout's rows directly (its rows permuted to
        them), so the running sum is ``layout.running_sum``'s element-wise steps, not a chain."""
        xp = array_namespace(weights)
        if not self.n_ends:
            return xp.zeros((layout.rows, weights.shape[1]), dtype=xp.float64)
        if self.dense is not None or is_cupy_namespace(xp):
            by_row = contiguous(xp.permute_dims(self(xp.permute_dims(weights, (1, 0))), (1, 0)))  # (J, b)
            rows = xp.asarray(layout.source_rows(np.arange(self.n_ends)))
            return layout.gather(xp.astype(by_row, xp.float64), rows)
        sums, running = self._segment_sums(np.asarray(weights), layout)
        return xp.asarray(layout.running_sum(sums.astype(running, copy=False)).astype(np.float64, copy=False))

    def _host(self, counts: np.ndarray) -> np.ndarray:
        sums, running = self._segment_sums(np.ascontiguousarray(counts.T), None)  # (J, b)
        out: np.ndarray = accumulate_rows(np.ascontiguousarray(sums.T, dtype=running), "add")
        return out.astype(np.float64, copy=False)

    def _segment_sums(self, weights: np.ndarray, layout: Interleaved | None) -> tuple[np.ndarray, type[np.generic]]:
        """Each segment's sum of the (n, b) weights, one sparse product (rows: the segments, or ``layout``'s),
        and the dtype their running sums need.

        The product is taken in the narrowest integer that holds every segment's sum; the running sums in
        int32 when every one of them fits (4-5x faster than float64), else int64. Integer sums below 2**53
        are exact, and equal to summing the float64 counts. Weights that are not whole: float64 throughout.
        """
        top = _whole_top(weights)
        dtype: type[np.generic] = np.float64
        for candidate in (np.int16, np.int32):
            if top is not None and top * self.longest <= np.iinfo(candidate).max:
                dtype = candidate
                break
        key = (dtype, 0 if layout is None else layout.rows)
        matrix = self._sparse.get(key)
        if matrix is None:
            matrix = self._sparse[key] = self._segments(dtype, layout)
        sums = matrix @ weights.astype(dtype, copy=False)
        if top is None or dtype is np.float64:
            return sums, np.float64
        return sums, (np.int32 if top * self.used.shape[0] < 2**31 else np.int64)  # the most a running sum reaches

    def _segments(self, dtype: type[np.generic], layout: Interleaved | None = None) -> Any:
        """The sparse (J, n) matrix: how many entries of each unit lie in each segment; with a
        ``layout``, (layout.rows, n) with segment j in row ``layout.row_of(j)``."""
        csr_matrix = lean_import("scipy.sparse").csr_matrix

        lengths = np.diff(np.append(self.starts, self.used.shape[0]))
        segment = np.repeat(np.arange(self.n_ends), lengths)
        rows = self.n_ends
        if layout is not None:
            segment, rows = layout.row_of(segment), layout.rows
        matrix = csr_matrix((np.ones(self.used.shape[0], dtype=dtype), (segment, self.used)),
                            shape=(rows, self.n_units))
        matrix.sum_duplicates()
        return matrix
