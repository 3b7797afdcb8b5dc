"""The C allocator's settings for a scoring process (glibc only; elsewhere nothing changes).

The kernels allocate and free the same few megabytes of temporaries
thousands of times (a chunk of box pairs, a block of prompts), and the full
test split's (N,) arrays of 21 M predictions (168 MiB each) dozens of times.
glibc serves a request above its mmap threshold (128 KiB at first, 32 MiB at
most) with a fresh mapping and unmaps it on free, so every such array is
page-faulted in again; with two threads the faults also queue on the
process's memory map lock. Serving every request from the heap and keeping
freed memory for reuse removes most of that: scoring 50,000 MMScan prompts x
100 boxes spent 2.4-3.1 s of system time before, 0.9-1.2 s after; sorting the
full test split's predictions, 1.3-2.1 s before, 0.1-0.4 s after
(``tests/evaluation_workers/test_allocator.py`` shows the faults themselves).
The scorer's other threads (reading ahead, blocks of resamples) would each
get an arena of their own, whose heaps (64 MiB at most) glibc unmaps once
empty and cannot hold a larger request at all: one arena for the process
keeps theirs in the same heap (a 715 MiB OpenScan zip on two threads: 33,000
page faults -> 26,000; one thread makes 20,000).
``release`` hands the kept memory back once a task is done, so an idle worker
process stays small.
"""

from __future__ import annotations

import ctypes
import functools
from typing import Any

# mallopt parameters (malloc.h)
_M_TRIM_THRESHOLD = -1
_M_TOP_PAD = -2
_M_MMAP_THRESHOLD = -3
_M_MMAP_MAX = -4
_M_ARENA_MAX = -8

MMAP_THRESHOLD = 32 << 20  # glibc's largest (HEAP_MAX_SIZE / 2 on 64-bit), for threads' arenas
MMAP_MAX = 0  # no request is a mapping of its own: the main heap serves the largest (threads' arenas fall back to it)
TRIM_THRESHOLD = (1 << 31) - 1  # the most mallopt takes: freed memory stays for reuse until ``release``
TOP_PAD = 64 << 20
ARENA_MAX = 1  # threads allocate from the main heap too (see the module's text)


@functools.cache
def _libc() -> Any:
    """The C library the process runs on (its own symbols: no search, no ``ctypes.util``), when glibc."""
    try:
        libc = ctypes.CDLL(None)
        return libc if hasattr(libc, "mallopt") and hasattr(libc, "malloc_trim") else None
    except OSError:
        return None


def tune() -> bool:
    """Keep the scorer's temporaries in the heap; True when the allocator took the settings."""
    libc = _libc()
    if libc is None:
        return False
    return all(libc.mallopt(param, value) == 1 for param, value in (
        (_M_MMAP_THRESHOLD, MMAP_THRESHOLD), (_M_MMAP_MAX, MMAP_MAX), (_M_TRIM_THRESHOLD, TRIM_THRESHOLD),
        (_M_TOP_PAD, TOP_PAD), (_M_ARENA_MAX, ARENA_MAX)))


def release() -> None:
    """Return the memory the heap keeps to the system (after a task)."""
    libc = _libc()
    if libc is not None:
        libc.malloc_trim(0)
