"""How many threads the scorer may use (``EVAL_THREADS``) and the overlap of reading with scoring.

NumPy, zlib and hashlib release the GIL on large buffers, so on a worker with
two or more cores the next scene can be inflated and decoded while this one
is scored, and the predictions file hashed meanwhile. Work is split so that
every value is computed by the same operations in the same order as with one
thread: results are bit-identical whatever the setting.

A long job of one thread beside the scoring (the predictions' checksum)
holds a core while it runs (``side_job``): reading ahead then starts that
many fewer reads (``spare``). With every read and the checksum at once, the
threads took turns at the cores and the GIL by the thousand: on two cores, a
715 MiB stored OpenScan zip made 6,300 futex calls and twice the page faults
of one thread, and ran slower than one thread on an Intel Xeon virtual
machine (1.18 s, 0.66 s of it system time, against 0.77 s; issue 28); on an
AMD EPYC, a 5.7 GB one of eight aspects takes 3.7 s instead of 4.5 s.
"""

from __future__ import annotations

import os
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
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


_side_jobs = 0
_side_lock = threading.Lock()


@contextmanager
def side_job() -> Iterator[None]:
    """Mark one core as taken while the block runs: a long job of one thread beside the scoring."""
    global _side_jobs
    with _side_lock:
        _side_jobs += 1
    try:
        yield
    finally:
        with _side_lock:
            _side_jobs -= 1


def spare(depth: int) -> int:
    """Of ``depth`` reads ahead, how many may be in flight now: ``depth`` less the cores side jobs
    hold (never below 0: then the caller reads itself)."""
    return max(0, depth - _side_jobs)


def read_ahead(pool: ThreadPoolExecutor | None, read: Callable[[T], R], items: Iterable[T],
               depth: int = 1) -> Iterator[tuple[T, R]]:
    """``(item, read(item))`` in order, reading the next ``depth`` items in ``pool`` while the caller
    works on this one.

    Fewer are read ahead while side jobs hold cores (``spare``); with none to
    spare, the caller reads the next item itself, once the reads in flight
    are done. With ``depth=1`` one read is in flight at a time, so ``read``
    needs no locking; a larger depth needs a thread-safe ``read``. At most
    ``depth + 1`` items' data are in memory. An error of ``read`` is raised
    when its item is reached, as without a pool. ``pool=None`` reads in the
    caller's thread.
    """
    if pool is None:
        for item in items:
            yield item, read(item)
        return
    pending: deque[tuple[T, Future[R]]] = deque()
    upcoming = iter(items)

    def fill() -> None:
        while len(pending) < spare(depth):
            item = next(upcoming, _END)
            if item is _END:
                return
            pending.append((item, pool.submit(read, item)))

    while True:
        fill()
        if pending:
            item, future = pending.popleft()
            value = future.result()
        else:
            item = next(upcoming, _END)
            if item is _END:
                return
            value = read(item)
        fill()
        yield item, value


_END: Any = object()
