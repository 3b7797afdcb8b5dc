"""Running sums and maxima along a ranking, for many resamples at once, as element-wise steps.

A bootstrap statistic needs, for each of b resamples, a running sum (true
positives so far) and a running maximum from the right (the precision
envelope) along a ranking of n positions. NumPy's ``accumulate`` along a
ranking is a chain of dependent steps, each waiting for the last: 3.5-7 ns an
element, and the GIL held on fewer than 500 rows (``_xp.GIL_FREE_ROW``).

Here the b resamples lie side by side (the last axis) and the ranking is cut
into B blocks of K consecutive positions: position i = j K + k (block j,
offset k) is stored at row k B + j of a (K B, b) array. All blocks' offset k
then form one contiguous (B, b) slab, and a running op is K - 1 element-wise
steps between neighbouring slabs (every block and every resample in each,
SIMD, GIL released), then each block's carry from the blocks before it. The
values are those of the plain running op: sums of whole numbers (draw counts)
and maxima do not depend on the order in which they are taken.

Positions past n (the last block's padding) hold what ``gather`` is told to
put there (``pad``); a caller resets them (``set_padding``) where it computes
other values from them, so that they never reach a running maximum.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from array_api_compat import is_cupy_namespace, is_numpy_namespace

from evaluation_workers._xp import array_namespace, cummax_reverse, numpy_namespace

__all__ = ["BLOCK", "Interleaved"]

BLOCK = 32
"""Positions per block (K). The steps are K - 1 calls over slabs of n / K rows: 32 kept the calls few and
the slabs long for MMScan's rankings (thousands of positions), 0.5-1 ns an element for a running sum."""


class Interleaved:
    """The layout of a ranking of ``n`` positions (see the module docstring)."""

    def __init__(self, n: int, block: int = BLOCK) -> None:
        self.n = n
        self.k = max(1, min(block, n))
        self.blocks = -(-n // self.k)
        self.rows = self.k * self.blocks
        position = np.arange(self.rows)
        # The position held by each row (n and later: the padding, the last block's last rows).
        self.position = (position % self.blocks) * self.k + position // self.blocks
        self.last_row = int(self.row_of(np.asarray([n - 1]))[0]) if n else 0

    def row_of(self, position: np.ndarray) -> np.ndarray:
        """The rows holding ``position`` (int64)."""
        position = np.asarray(position, dtype=np.int64)
        rows: np.ndarray = (position % self.k) * self.blocks + position // self.k
        return rows

    def source_rows(self, index: np.ndarray) -> np.ndarray:
        """For ``gather``: ``index`` (n,) a source row per position -> a source row per row of the
        layout (0 at the padding, which ``gather`` then fills)."""
        rows = np.zeros(self.rows, dtype=np.int64)
        real = self.position < self.n
        rows[real] = np.asarray(index, dtype=np.int64)[self.position[real]]
        return rows

    def gather(self, source: Any, source_rows: Any, pad: float = 0) -> Any:
        """(rows, b): ``source[index[position]]`` at each row; ``source`` (m, b), ``source_rows`` from
        ``source_rows`` (on the device). Padding rows hold ``pad``."""
        xp = array_namespace(source)
        return self.set_padding(xp.take(source, source_rows, axis=0), pad)

    def set_padding(self, x: Any, value: float) -> Any:
        """x (rows, b) with ``value`` at the padding rows (in place on NumPy and CuPy). They are the
        last block's offsets ``n - (B - 1) K`` and later."""
        if self.rows == self.n:
            return x
        first = self.n - (self.blocks - 1) * self.k

        def fill(array: Any, xp: Any) -> None:
            array.reshape(self.k, self.blocks, array.shape[1])[first:, -1, :] = value

        return _native(x, fill)

    def running_sum(self, x: Any) -> Any:
        """x (rows, b) -> its running sum along the positions, in x's dtype (whole numbers: the caller
        checks that the sums fit). In place on NumPy and CuPy."""
        return _native(x, self._running_sum)

    def running_max_reverse(self, x: Any) -> Any:
        """x (rows, b) -> its running maximum from the last position back. In place on NumPy and CuPy."""
        return _native(x, self._running_max_reverse)

    def to_positions(self, x: Any) -> Any:
        """(rows, b) -> (b, n): each resample's values in position order (a copy)."""
        xp = array_namespace(x)
        b = x.shape[1]
        by_block = xp.permute_dims(xp.reshape(x, (self.k, self.blocks, b)), (2, 1, 0))  # (b, B, K)
        return xp.reshape(by_block, (b, self.rows))[:, : self.n]

    def _running_sum(self, x: Any, xp: Any) -> None:
        slabs = x.reshape(self.k, self.blocks, x.shape[1])
        for k in range(1, self.k):
            xp.add(slabs[k], slabs[k - 1], out=slabs[k])
        if self.blocks > 1:  # block j adds the totals of blocks 0..j-1
            carry = xp.cumsum(slabs[self.k - 1, :-1], axis=0, dtype=x.dtype)
            xp.add(slabs[:, 1:], carry[None], out=slabs[:, 1:])

    def _running_max_reverse(self, x: Any, xp: Any) -> None:
        slabs = x.reshape(self.k, self.blocks, x.shape[1])
        for k in range(self.k - 2, -1, -1):
            xp.maximum(slabs[k], slabs[k + 1], out=slabs[k])
        if self.blocks > 1:  # block j takes the maxima of blocks j+1..B-1
            after = cummax_reverse(slabs[0, 1:].T).T  # (B - 1, b), small
            xp.maximum(slabs[:, :-1], after[None], out=slabs[:, :-1])


def _native(x: Any, step: Any) -> Any:
    """Run ``step(array, xp)`` in place with NumPy's or CuPy's own ufuncs (``out=``, views); other
    namespaces (array_api_strict, in tests) go through a NumPy copy."""
    xp = array_namespace(x)
    if is_numpy_namespace(xp) or is_cupy_namespace(xp):
        step(x, xp)
        return x
    host = np.array(x, copy=True)
    step(host, numpy_namespace())
    return xp.asarray(host)
