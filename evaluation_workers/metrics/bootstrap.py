"""Bootstrap confidence intervals over a track's natural unit, vectorised.

A resample draws n units with replacement from the n units of a split
(questions, prompts, scenes). It is handed to a track's statistic as *counts*:
a (b, n) array whose row is how often each unit was drawn, so a statistic
recomputes the exact metric of the resampled data as weighted sums (a unit
drawn twice weighs 2), for b resamples at once, without a loop over items.

Reproducibility: resamples come in fixed blocks of ``BLOCK`` rows; block j
draws ``default_rng([seed, j]).integers(0, n, (rows, n), dtype=uint32)``
(uint32: a third faster to draw than int64, and n never nears 2**32). The counts are
drawn on the host with NumPy, so CPU and GPU workers, and any chunking of the
work, see the same resamples. Two submissions on the same split see the same
resamples too (the seed is fixed), which is what a paired comparison needs.

The counts of a split depend only on (n, resamples, seed), so a worker keeps
the last few small ones (``_kept``): the second submission on a split
skips the drawing.

Ranked metrics (AP) need running sums of the resampled weights along a
ranking, but only at a few positions (the true positives and the points just
above them): ``RunningSums`` gives those, cutting the ranking into segments
instead of summing along all of it.

Intervals are percentile intervals at ``LEVEL`` (``numpy.percentile``'s
linear interpolation); resamples where a value is undefined (a group absent
from the resample) are left out of that value's interval.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, nullcontext
from contextvars import ContextVar
from dataclasses import dataclass
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
    to_device,
    to_numpy,
)
from evaluation_workers.metrics.interleaved import Interleaved
from evaluation_workers.threads import read_ahead, threads

DEFAULT_RESAMPLES = 1000  # the cost is measured by benchmarks/bootstrap.py (issue 13: under 20 % of scoring)
SEED = 20240613
BLOCK = 100  # resamples per random-number block; part of the definition of a resample
LEVEL = 0.95
# Elements (resamples x entries) a statistic may hold at once; blocks are cut to fit.
MAX_ELEMENTS = 1 << 24
# Threads whose statistics may run at once, for MAX_ELEMENTS (a constant, not EVAL_THREADS: see
# ``rows_per_call``).
MEMORY_THREADS = 4
# Counts kept per process for the next submission on the same split (bytes, uint8 each).
CACHE_BYTES = 1 << 25

Statistic = Callable[[Any], Mapping[str, Any]]
"""(b, n) float64 counts in ``xp`` -> {key: (b,) values, NaN where undefined}."""


def resamples_setting() -> int:
    """``EVAL_BOOTSTRAP_RESAMPLES`` (1,000 by default; 0 turns intervals off)."""
    raw = os.environ.get("EVAL_BOOTSTRAP_RESAMPLES", str(DEFAULT_RESAMPLES))
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"Expected EVAL_BOOTSTRAP_RESAMPLES to be an integer, but got {raw!r}") from None
    if value < 0:
        raise ValueError(f"Expected EVAL_BOOTSTRAP_RESAMPLES >= 0, but got {value}")
    return value


# Resamples x entries above which a CPU worker defers the intervals to a follow-up task
# (MMScan's full test split: 209,717 prompts, tens of millions of pooled boxes).
DEFAULT_INLINE_MAX = 2_000_000_000


def inline_max_setting() -> int:
    """``EVAL_BOOTSTRAP_INLINE_MAX``: the most resampled entries scored inline on a CPU worker."""
    raw = os.environ.get("EVAL_BOOTSTRAP_INLINE_MAX", str(DEFAULT_INLINE_MAX))
    try:
        return int(raw)
    except ValueError:
        raise ValueError(f"Expected EVAL_BOOTSTRAP_INLINE_MAX to be an integer, but got {raw!r}") from None


def deferred(entries: int, resamples: int | None = None) -> bool:
    """Whether intervals over ``entries`` resampled entries wait for a follow-up task (CPU workers only:
    a GPU does them in seconds)."""
    from evaluation_workers._xp import device_name

    resamples = resamples_setting() if resamples is None else resamples
    return resamples > 0 and device_name() == "cpu" and resamples * entries > inline_max_setting()


def warm_up() -> None:
    """Import what ``RunningSums`` needs on the CPU (scipy.sparse) when resampling is on; a track
    calls it on a helper thread once the files are read, so that the import overlaps the scoring's
    NumPy work (which releases the GIL; a parser holding it would leave the import waiting)."""
    from evaluation_workers._xp import device_name

    if resamples_setting() > 0 and device_name() == "cpu":
        lean_import("scipy.sparse")


def block_indices(n_units: int, resamples: int, seed: int, j: int) -> np.ndarray:
    """Block j of the resamples as an index array: (rows, n) uint32, rows <= BLOCK."""
    rows = min(BLOCK, resamples - j * BLOCK)
    return np.random.default_rng([seed, j]).integers(0, n_units, size=(rows, n_units), dtype=np.uint32)


def draw_indices(n_units: int, resamples: int, seed: int = SEED) -> Iterator[np.ndarray]:
    """The resamples as index arrays, block by block: (rows, n) uint32, rows <= BLOCK."""
    for j in range(blocks_of(resamples)):
        yield block_indices(n_units, resamples, seed, j)


def blocks_of(resamples: int) -> int:
    """How many blocks of at most ``BLOCK`` resamples make ``resamples``."""
    return -(-resamples // BLOCK)


def counts_of(indices: np.ndarray, n_units: int) -> np.ndarray:
    """(rows, n) index arrays -> (rows, n) float64 draw counts (one bincount)."""
    rows = indices.shape[0]
    flat = indices + (np.arange(rows, dtype=np.int64) * n_units)[:, None]
    return np.bincount(flat.ravel(), minlength=rows * n_units).reshape(rows, n_units).astype(np.float64)


def block_counts(n_units: int, resamples: int, seed: int, j: int) -> np.ndarray:
    """Block j's (rows, n) float64 draw counts: drawn on the thread that scores the block, so that
    the blocks are drawn side by side (NumPy's generator releases the GIL)."""
    return counts_of(block_indices(n_units, resamples, seed, j), n_units)


# (n_units, resamples, seed) -> the blocks' counts as uint8, the last few splits (CACHE_BYTES each at most):
# the second submission on a split skips the drawing.
_kept: dict[tuple[int, int, int], tuple[np.ndarray, ...]] = {}
_KEPT_SPLITS = 4


def _keep(key: tuple[int, int, int], blocks: list[np.ndarray | None]) -> None:
    """Keep a split's counts (uint8: a unit drawn 255 times is beyond belief; if one ever is, a
    block is None and that split is simply not kept)."""
    if any(block is None for block in blocks):
        return
    while len(_kept) >= _KEPT_SPLITS:
        _kept.pop(next(iter(_kept)))
    _kept[key] = tuple(block for block in blocks if block is not None)


def rows_per_call(n_units: int, width: int, gpu: bool = False) -> int:
    """How many resamples a statistic is given at once: a divisor of ``BLOCK``, whatever the threads.

    The same for any ``EVAL_THREADS``: a BLAS product's last bits can depend on how many rows it
    is given (OpenBLAS treats an odd tail of rows apart), so every resample must be computed in
    a call of the same shape, at the same place. At most what keeps the (rows, width) temporaries
    of ``MEMORY_THREADS`` CPU threads (of one call on a GPU) under ``MAX_ELEMENTS``.
    """
    bound = MAX_ELEMENTS // (1 if gpu else MEMORY_THREADS) // max(width, n_units, 1)
    return max(d for d in range(1, BLOCK + 1) if BLOCK % d == 0 and d <= max(bound, 1))


def replicates(
    statistic: Statistic, n_units: int, resamples: int, seed: int = SEED, xp: Any = None,
    width: int = 1, subset: np.ndarray | None = None,
) -> dict[str, np.ndarray]:
    """Every value of ``statistic`` on every resample: {key: (resamples,) float64}.

    ``width`` is how many entries per resample the statistic holds at once (its
    (b, width) temporaries); blocks are cut into calls of ``rows_per_call``
    resamples. ``subset`` (m,) unit indices: resample those m units only (a
    partition's), the others weigh 0; the draws are those of m units, so they
    match resampling the subset's units scored on their own.
    """
    from threadpoolctl import threadpool_limits

    from evaluation_workers._xp import backend

    xp = xp or backend()
    # On NumPy the blocks of resamples run on EVAL_THREADS threads (the gathers, sums and
    # products release the GIL), collected in order.
    workers = threads() if not is_cupy_namespace(xp) else 1
    rows_at_once = rows_per_call(n_units, width, gpu=is_cupy_namespace(xp))
    drawn = n_units if subset is None else int(subset.shape[0])
    split = (drawn, resamples, seed)
    kept = _kept.get(split)
    keep = kept is None and drawn * resamples <= CACHE_BYTES

    def run(j: int) -> tuple[dict[str, list[np.ndarray]], np.ndarray | None]:
        counts = kept[j].astype(np.float64) if kept is not None else block_counts(drawn, resamples, seed, j)
        small = counts.astype(np.uint8) if keep and int(counts.max(initial=0)) <= 255 else None
        if subset is not None:  # the subset's draws, put in its units' columns (the others weigh 0)
            full = np.zeros((counts.shape[0], n_units), dtype=np.float64)
            full[:, subset] = counts
            counts = full
        out: dict[str, list[np.ndarray]] = {}
        for r0 in range(0, counts.shape[0], rows_at_once):
            values = statistic(to_device(counts[r0 : r0 + rows_at_once], xp))
            for name, v in values.items():
                out.setdefault(name, []).append(np.asarray(to_numpy(v), dtype=np.float64))
        return out, small

    parts: dict[str, list[np.ndarray]] = {}
    small_blocks: list[np.ndarray | None] = []
    # The products here are thin ((b, n) x (n, k), k a few dozen): BLAS threads only wait on
    # each other, and on a busy machine they made SQA3D's bootstrap ten times slower.
    with threadpool_limits(limits=1, user_api="blas"), (
            ThreadPoolExecutor(workers) if workers > 1 else nullcontext()) as pool:
        for _, (block, small) in read_ahead(pool, run, range(blocks_of(resamples)), depth=workers):
            for name, v in block.items():
                parts.setdefault(name, []).extend(v)
            small_blocks.append(small)
    if keep:
        _keep(split, small_blocks)
    return {key: np.concatenate(v) for key, v in parts.items()}


def percentile_interval(values: np.ndarray, level: float = LEVEL) -> list[float] | None:
    """[lo, hi] of the defined values; None when no resample defines the value."""
    finite = values[np.isfinite(values)]
    if not finite.size:
        return None
    tail = 100.0 * (1.0 - level) / 2.0
    lo, hi = np.percentile(finite, [tail, 100.0 - tail])
    return [float(lo), float(hi)]


def intervals(
    statistic: Statistic, n_units: int, unit: str, resamples: int | None = None, seed: int = SEED,
    xp: Any = None, width: int = 1, unit_ids: Sequence[Any] | None = None, subset: np.ndarray | None = None,
) -> tuple[dict[str, list[float] | None], dict[str, Any]] | None:
    """Percentile intervals of every value of ``statistic``, and the record of how they were drawn.

    ``unit_ids`` (n,) names the units in the statistic's order; a track that
    gives them can be scored on a partition of its units (inside
    ``collecting``, resampling on or off; ``evaluation_workers.partitions``). ``subset``:
    resample only those unit indices (``replicates``).

    Returns None when resampling is off (``resamples`` 0, or no unit to draw).
    """
    collected = _collected.get()
    if unit_ids is not None and collected is not None:
        collected.append(Units(statistic=statistic, ids=[str(u) for u in unit_ids], unit=unit, xp=xp, width=width))
    resamples = resamples_setting() if resamples is None else resamples
    drawn = n_units if subset is None else int(subset.shape[0])
    if resamples <= 0 or drawn <= 0:
        return None
    values = replicates(statistic, n_units, resamples, seed, xp, width, subset)
    record = {"resamples": resamples, "seed": seed, "unit": unit, "units": drawn, "level": LEVEL,
              "method": "percentile", "block": BLOCK}
    return {key: percentile_interval(v) for key, v in values.items()}, record


@dataclass(frozen=True)
class Units:
    """A track's statistic and the ids of its units, in the statistic's order (what ``intervals`` was given)."""

    statistic: Statistic
    ids: list[str]
    unit: str
    xp: Any = None
    width: int = 1


_collected: ContextVar[list[Units] | None] = ContextVar("bootstrap_units", default=None)


@contextmanager
def collecting() -> Iterator[list[Units]]:
    """Collect the ``Units`` of every ``intervals`` call made inside the block (by a track's ``score``):
    the worker scores partitions from them (``evaluation_workers.partitions``)."""
    collected: list[Units] = []
    token = _collected.set(collected)
    try:
        yield collected
    finally:
        _collected.reset(token)


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
        if n_units * self.n_ends <= min(MAX_ELEMENTS, 16 * used.shape[0]):
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
            rows = max(1, MAX_ELEMENTS // self.used.shape[0])
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
