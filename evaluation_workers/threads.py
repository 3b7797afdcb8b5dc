"""How many threads the scorer may use (``EVAL_THREADS``) and the overlap of reading with scoring.

NumPy, zlib and hashlib release the GIL on large buffers, so on a worker with
two or more cores the next scene can be inflated and decoded while this one
is scored, and the predictions file hashed meanwhile. Work is split so that
every value is computed by the same operations in the same order as with one
thread: results are bit-identical whatever the setting.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")


def threads() -> int:
    """``EVAL_THREADS``; by default the CPUs this process may run on, shared among the
    worker's ``EVAL_CONCURRENCY`` scoring processes."""
    setting = os.environ.get("EVAL_THREADS", "").strip()
    if not setting:
        processes = os.environ.get("EVAL_CONCURRENCY", "").strip()
        share = int(processes) if processes.isdigit() and int(processes) > 0 else 1
        return max(1, len(os.sched_getaffinity(0)) // share)
    try:
        return max(1, int(setting))
    except ValueError:
        raise ValueError(f"Expected EVAL_THREADS to be a number of threads, but got {setting!r}") from None


def read_ahead(pool: ThreadPoolExecutor | None, read: Callable[[T], R], items: Sequence[T]) -> Iterator[tuple[T, R]]:
    """``(item, read(item))`` in order, reading the next item in ``pool`` while the caller works on this one.

    One read is in flight at a time, so ``read`` needs no locking and at most
    two items' data are in memory. An error of ``read`` is raised when its item
    is reached, as without a pool. ``pool=None`` reads in the caller's thread.
    """
    if pool is None:
        for item in items:
            yield item, read(item)
        return
    pending: Future[R] | None = pool.submit(read, items[0]) if items else None
    for i, item in enumerate(items):
        assert pending is not None
        value = pending.result()
        pending = pool.submit(read, items[i + 1]) if i + 1 < len(items) else None
        yield item, value
