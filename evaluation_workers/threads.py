"""How many threads the scorer may use (``EVAL_THREADS``) and the overlap of reading with scoring.

NumPy, zlib and hashlib release the GIL on large buffers, so on a worker with
two or more cores the next scene can be inflated and decoded while this one
is scored, and the predictions file hashed meanwhile. Work is split so that
every value is computed by the same operations in the same order as with one
thread: results are bit-identical whatever the setting.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

T = TypeVar("T")
R = TypeVar("R")


def threads() -> int:
    """``EVAL_THREADS``; by default the CPUs this process may run on, shared among the
    worker's ``EVAL_CONCURRENCY`` scoring processes."""
    setting = os.environ.get("EVAL_THREADS", "").strip()
    if not setting:
        processes = os.environ.get("EVAL_CONCURRENCY", "").strip()
        share = int(processes) if processes.isdigit() and int(processes) > 0 else 1
        return max(1, _cpus() // share)
    try:
        return max(1, int(setting))
    except ValueError:
        raise ValueError(f"Expected EVAL_THREADS to be a number of threads, but got {setting!r}") from None


def _cpus() -> int:
    """The CPUs this process may run on (all of the machine's where the system cannot say: macOS)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def read_ahead(pool: ThreadPoolExecutor | None, read: Callable[[T], R], items: Iterable[T],
               depth: int = 1) -> Iterator[tuple[T, R]]:
    """``(item, read(item))`` in order, reading the next ``depth`` items in ``pool`` while the caller
    works on this one.

    With ``depth=1`` one read is in flight at a time, so ``read`` needs no
    locking; a larger depth needs a thread-safe ``read``. At most ``depth + 1``
    items' data are in memory. An error of ``read`` is raised when its item
    is reached, as without a pool. ``pool=None`` reads in the caller's thread.
    """
    if pool is None:
        for item in items:
            yield item, read(item)
        return
    pending: deque[tuple[T, Future[R]]] = deque()
    upcoming = iter(items)

    def fill() -> None:
        while len(pending) < depth:
            item = next(upcoming, _END)
            if item is _END:
                return
            pending.append((item, pool.submit(read, item)))

    fill()
    while pending:
        item, future = pending.popleft()
        value = future.result()
        fill()
        yield item, value


_END: Any = object()
