"""Bootstrap confidence intervals that resample scenes, vectorised.

Questions, prompts and masks come in scenes, and a method's accuracy varies
from scene to scene, so the resampling unit is the scene (METRICS.md,
"Uncertainty"): a resample draws the split's S scenes with replacement and
takes every unit (question, prompt, scene file) of each drawn scene, a scene
drawn k times counting k times. It is handed to a track's statistic as unit
*weights*: a (b, n) array whose row is how often each unit's scene was drawn,
so a statistic recomputes the exact metric of the resampled data as weighted
sums (``metrics.weighted``), for b resamples at once, without a loop over
items. Where a track's units are its scenes (OpenScan) the weights are the
draw counts themselves.

Reproducibility: resamples come in fixed blocks of ``BLOCK`` rows; block j
draws ``default_rng([seed, j]).integers(0, S, (rows, S), dtype=uint32)``
(uint32: a third faster to draw than int64, and S never nears 2**32), S the
scenes in sorted order of their ids (``scene_index``). The draws are made on
the host with NumPy, so CPU and GPU workers, and any chunking of the work,
see the same resamples. Two submissions on the same split see the same
resamples too (the seed is fixed), which is what a paired comparison needs.
The counts of a split depend only on (S, resamples, seed), so a worker keeps
the last few small ones (``_kept``): the second submission on a split skips
the drawing.

Intervals (``confidence``) are 95 % intervals of the resampled values, by the
method ``METHOD`` that the coverage simulation (``benchmarks/coverage.py``)
showed to hold on the tracks' shapes; resamples where a value is undefined (a
group absent from the resample) are left out of that value's interval. A
split, or a group, with fewer than ``min_scenes_setting()`` scenes gets none.
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

from evaluation_workers._xp import lean_import, to_device, to_numpy
from evaluation_workers.metrics import confidence
from evaluation_workers.threads import read_ahead, threads

DEFAULT_RESAMPLES = 1000  # the cost is measured by benchmarks/bootstrap.py (issue 13: under 20 % of scoring)
SEED = 20240613
BLOCK = 100  # resamples per random-number block; part of the definition of a resample
LEVEL = confidence.LEVEL
# How intervals are formed from the resamples: chosen by measured coverage (benchmarks/coverage.py).
METHOD = "percentile"
# Fewer scenes than this in a split or group: no interval (EVAL_BOOTSTRAP_MIN_SCENES).
DEFAULT_MIN_SCENES = 20
# Elements (resamples x entries) a statistic may hold at once; blocks are cut to fit.
MAX_ELEMENTS = 1 << 24
# Threads whose statistics may run at once, for MAX_ELEMENTS (a constant, not EVAL_THREADS: see
# ``rows_per_call``).
MEMORY_THREADS = 4
# Counts kept per process for the next submission on the same split (bytes, uint8 each).
CACHE_BYTES = 1 << 25

Statistic = Callable[[Any], Mapping[str, Any]]
"""(b, n) float64 counts in ``xp`` -> {key: (b,) values, NaN where undefined}."""


def _int_setting(name: str, default: int, least: int | None = None) -> int:
    """The integer in the environment variable ``name`` (``default`` when unset or empty, as a copied
    deploy/.env.example leaves it), at least ``least``."""
    raw = os.environ.get(name) or str(default)
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"Expected {name} to be an integer, but got {raw!r}") from None
    if least is not None and value < least:
        raise ValueError(f"Expected {name} >= {least}, but got {value}")
    return value


def resamples_setting() -> int:
    """``EVAL_BOOTSTRAP_RESAMPLES`` (1,000 by default; 0 turns intervals off)."""
    return _int_setting("EVAL_BOOTSTRAP_RESAMPLES", DEFAULT_RESAMPLES, least=0)


# Resamples x entries above which a CPU worker defers the intervals to a follow-up task
# (MMScan's full test split: 209,717 prompts, tens of millions of pooled boxes).
DEFAULT_INLINE_MAX = 2_000_000_000


def inline_max_setting() -> int:
    """``EVAL_BOOTSTRAP_INLINE_MAX``: the most resampled entries scored inline on a CPU worker."""
    return _int_setting("EVAL_BOOTSTRAP_INLINE_MAX", DEFAULT_INLINE_MAX)


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


def scenes_of(outcomes: Mapping[str, Any]) -> np.ndarray | None:
    """Each unit's scene (an index of ``scene_index``) in a track's per-unit outcomes, kept as
    ``outcomes["scene"]``: a ``Track.scenes_of``. None in outcomes kept before scenes were."""
    scenes = outcomes.get("scene")
    return None if scenes is None else np.asarray(scenes, dtype=np.int64)


def groups_of(index: np.ndarray, groups: Sequence[str]) -> dict[str, np.ndarray]:
    """The units of each breakdown group, from each unit's index into ``groups`` (for ``Track.groups_of``)."""
    return {group: index == g for g, group in enumerate(groups)}


def scene_index(scene_of_unit: Sequence[Any] | np.ndarray) -> tuple[list[str], np.ndarray]:
    """The split's scenes, sorted, and each unit's scene as an index into them: (S,) ids, (n,) int64.

    Sorted, so that every submission on a split numbers its scenes alike (and sees the same resamples).
    """
    names, index = np.unique(np.asarray(scene_of_unit, dtype=str), return_inverse=True)
    return [str(n) for n in names], index.astype(np.int64).reshape(-1)


def _scene_count(n_units: int, scenes: np.ndarray | None) -> int:
    return n_units if scenes is None else int(scenes.max(initial=-1)) + 1


def run_blocks(
    statistic: Statistic, n_units: int, n_blocks: int, block: Callable[[int], np.ndarray], xp: Any, width: int,
    subset: np.ndarray | None, scenes: np.ndarray | None, on_block: Callable[[int, np.ndarray], None] | None = None,
) -> dict[str, np.ndarray]:
    """``statistic`` on every row of blocks of scene counts: {key: (rows,) float64}, in block order.

    ``block(j)`` is block j's (rows, m) scene counts, m the scenes drawn (``subset``'s, or every
    scene); they are put in their scenes' columns (the others weigh 0), then handed to the statistic
    as unit weights (each unit weighs what its scene does). ``on_block(j, counts)`` sees each block's
    counts as drawn (``replicates`` keeps them).
    """
    from threadpoolctl import threadpool_limits

    from evaluation_workers._xp import backend

    xp = xp or backend()
    # On NumPy the blocks of resamples run on EVAL_THREADS threads (the gathers, sums and
    # products release the GIL), collected in order.
    workers = threads() if not is_cupy_namespace(xp) else 1
    rows_at_once = rows_per_call(n_units, width, gpu=is_cupy_namespace(xp))
    n_scenes = _scene_count(n_units, scenes)

    def run(j: int) -> dict[str, list[np.ndarray]]:
        counts = block(j)
        if on_block is not None:
            on_block(j, counts)
        if subset is not None:  # the subset's draws, put in its scenes' columns (the others weigh 0)
            full = np.zeros((counts.shape[0], n_scenes), dtype=np.float64)
            full[:, subset] = counts
            counts = full
        if scenes is not None:  # each unit weighs what its scene does
            counts = np.take(counts, scenes, axis=1)
        out: dict[str, list[np.ndarray]] = {}
        for r0 in range(0, counts.shape[0], rows_at_once):
            values = statistic(to_device(counts[r0 : r0 + rows_at_once], xp))
            for name, v in values.items():
                out.setdefault(name, []).append(np.asarray(to_numpy(v), dtype=np.float64))
        return out

    parts: dict[str, list[np.ndarray]] = {}
    # The products here are thin ((b, n) x (n, k), k a few dozen): BLAS threads only wait on
    # each other, and on a busy machine they made SQA3D's bootstrap ten times slower.
    with threadpool_limits(limits=1, user_api="blas"), (
            ThreadPoolExecutor(workers) if workers > 1 else nullcontext()) as pool:
        for _, found in read_ahead(pool, run, range(n_blocks), depth=workers):
            for name, v in found.items():
                parts.setdefault(name, []).extend(v)
    return {key: np.concatenate(v) for key, v in parts.items()}


def replicates(
    statistic: Statistic, n_units: int, resamples: int, seed: int = SEED, xp: Any = None,
    width: int = 1, subset: np.ndarray | None = None, scenes: np.ndarray | None = None,
) -> dict[str, np.ndarray]:
    """Every value of ``statistic`` on every resample of scenes: {key: (resamples,) float64}.

    ``scenes`` (n,) int64: the scene of each unit (``scene_index``); None when
    the units are the scenes. A resample draws the m scenes with replacement
    and each unit weighs as often as its scene was drawn. ``subset`` (m,) scene
    indices: resample those m scenes only (a partition's), the others weigh 0;
    the draws are those of m scenes, so they match resampling the subset's
    scenes scored on their own. ``width`` is how many entries per resample the
    statistic holds at once (its (b, width) temporaries); blocks are cut into
    calls of ``rows_per_call`` resamples.
    """
    drawn = _scene_count(n_units, scenes) if subset is None else int(subset.shape[0])
    split = (drawn, resamples, seed)
    kept = _kept.get(split)
    keep = kept is None and drawn * resamples <= CACHE_BYTES
    small: list[np.ndarray | None] = [None] * blocks_of(resamples)

    def block(j: int) -> np.ndarray:
        return kept[j].astype(np.float64) if kept is not None else block_counts(drawn, resamples, seed, j)

    def note(j: int, counts: np.ndarray) -> None:
        if keep and int(counts.max(initial=0)) <= 255:
            small[j] = counts.astype(np.uint8)

    values = run_blocks(statistic, n_units, blocks_of(resamples), block, xp, width, subset, scenes, note)
    if keep:
        _keep(split, small)
    return values


def jackknife(
    statistic: Statistic, n_units: int, xp: Any = None, width: int = 1, subset: np.ndarray | None = None,
    scenes: np.ndarray | None = None,
) -> dict[str, np.ndarray]:
    """Every value of ``statistic`` with one scene left out, for each of the m scenes (``subset``'s, or
    every scene): {key: (m,) float64}. What BCa's acceleration is estimated from."""
    drawn = _scene_count(n_units, scenes) if subset is None else int(subset.shape[0])

    def block(j: int) -> np.ndarray:
        rows = np.arange(j * BLOCK, min(drawn, (j + 1) * BLOCK))
        counts = np.ones((rows.shape[0], drawn), dtype=np.float64)
        counts[np.arange(rows.shape[0]), rows] = 0.0
        return counts

    return run_blocks(statistic, n_units, blocks_of(drawn), block, xp, width, subset, scenes)


def observed(statistic: Statistic, n_units: int, xp: Any = None, subset: np.ndarray | None = None,
             scenes: np.ndarray | None = None) -> dict[str, float]:
    """Every value of ``statistic`` on the scenes as they are (``subset``'s only): {key: float, NaN if undefined}."""
    from evaluation_workers._xp import backend

    weights = np.ones((1, _scene_count(n_units, scenes)))
    if subset is not None:
        weights = np.zeros_like(weights)
        weights[0, subset] = 1.0
    if scenes is not None:
        weights = np.take(weights, scenes, axis=1)
    found = statistic(to_device(weights, xp or backend()))
    return {key: float(np.asarray(to_numpy(v), dtype=np.float64)[0]) for key, v in found.items()}


def min_scenes_setting(default: int = DEFAULT_MIN_SCENES) -> int:
    """``EVAL_BOOTSTRAP_MIN_SCENES``: a split or group with fewer scenes gets no interval (by default
    ``default``, the track's: where its simulated coverage reaches 90 %, benchmarks/coverage.py)."""
    return _int_setting("EVAL_BOOTSTRAP_MIN_SCENES", default, least=1)


def intervals(
    statistic: Statistic, n_units: int, unit: str, resamples: int | None = None, seed: int = SEED,
    xp: Any = None, width: int = 1, unit_ids: Sequence[Any] | None = None, subset: np.ndarray | None = None,
    scenes: np.ndarray | None = None, scene_names: Sequence[str] | None = None,
    groups: Mapping[str, np.ndarray] | None = None, method: str = METHOD, min_scenes: int = DEFAULT_MIN_SCENES,
) -> tuple[dict[str, list[float] | None], dict[str, Any]] | None:
    """95 % intervals of every value of ``statistic`` by resampling scenes, and the record of how.

    ``scenes`` (n,) int64: each unit's scene, an index into ``scene_names`` (the split's scene ids,
    sorted: ``scene_index``); None when the units are the scenes. ``unit_ids`` (n,) names the units
    in the statistic's order; a track that gives them (and ``scene_names``) can be scored on a
    partition of its scenes (inside ``collecting``, resampling on or off; ``evaluation_workers.partitions``).
    ``subset``: resample only those scene indices (of
    ``scene_index``'s order). ``groups``: {group: (n,) bool} the units of each breakdown group, whose
    values ("<group>/<metric>") get no interval when the group spans fewer than
    ``min_scenes_setting(min_scenes)`` scenes (``min_scenes``: the track's default); a split (or
    subset) with fewer scenes gets none at all. What was
    withheld, and why, is in the record's ``withheld`` (``results.interval_notes`` words it).

    Returns None when resampling is off (``resamples`` 0, or no unit to draw).
    """
    collected = _collected.get()
    if unit_ids is not None and collected is not None:
        collected.append(Units(statistic=statistic, ids=[str(u) for u in unit_ids], unit=unit, xp=xp, width=width,
                               scenes=scenes, scene_names=None if scene_names is None else list(scene_names),
                               groups=groups, min_scenes=min_scenes))
    resamples = resamples_setting() if resamples is None else resamples
    n_scenes = _scene_count(n_units, scenes)
    drawn = n_scenes if subset is None else int(subset.shape[0])
    if resamples <= 0 or drawn <= 0:
        return None
    least = min_scenes_setting(min_scenes)
    record: dict[str, Any] = {"resamples": resamples, "seed": seed, "unit": "scene", "units": drawn,
                              "scored_unit": unit, "level": LEVEL, "method": method, "block": BLOCK,
                              "min_scenes": least}
    point = observed(statistic, n_units, xp, subset, scenes)
    if drawn < least:
        record["withheld"] = {"": drawn}
        return {key: None for key in point}, record
    values = replicates(statistic, n_units, resamples, seed, xp, width, subset, scenes)
    jack = jackknife(statistic, n_units, xp, width, subset, scenes) if method == "bca" else {}
    found = {key: confidence.interval(method, v, point.get(key, math.nan), jack.get(key))
             for key, v in values.items()}
    small = _small_groups(groups or {}, scenes, subset, least)
    for key in found:
        if key.split("/", 1)[0] in small and "/" in key:
            found[key] = None
    if small:
        record["withheld"] = small
    return found, record


def _small_groups(groups: Mapping[str, np.ndarray], scenes: np.ndarray | None, subset: np.ndarray | None,
                  least: int) -> dict[str, int]:
    """{group: its scenes} of the groups that span fewer than ``least`` of the resampled scenes."""
    small = {}
    for group, members in groups.items():
        of_group = np.flatnonzero(members) if scenes is None else np.unique(scenes[np.asarray(members, bool)])
        if subset is not None:
            of_group = np.intersect1d(of_group, subset)
        if of_group.shape[0] < least:
            small[group] = int(of_group.shape[0])
    return small


@dataclass(frozen=True)
class Units:
    """A track's statistic and the ids of its units and of their scenes, in the statistic's order
    (what ``intervals`` was given)."""

    statistic: Statistic
    ids: list[str]
    unit: str
    xp: Any = None
    width: int = 1
    scenes: np.ndarray | None = None  # (n,) each unit's scene, into ``scene_names``; None: the units are the scenes
    scene_names: list[str] | None = None
    groups: Mapping[str, np.ndarray] | None = None  # the units of each breakdown group
    min_scenes: int = DEFAULT_MIN_SCENES  # the track's default minimum of scenes for an interval


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
