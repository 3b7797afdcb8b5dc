"""Files read through a read-only mapping: no copy out of the page cache.

``map_file`` maps a regular, non-empty file (None for others: pipes, empty
files; callers read those), ``map_open`` an already open one. ``give_back`` drops a range's pages from the
process: they stay in the page cache, and a later read through a view still
alive maps them again, so resident memory does not grow with the file.

The file must not be truncated while it is mapped (a read past its new end is
a SIGBUS); the worker maps only its own copy of a submission.
"""

from __future__ import annotations

import mmap
import os
import stat
from pathlib import Path
from typing import BinaryIO


def map_file(path: Path, min_size: int = 1) -> mmap.mmap | None:
    """``path`` mapped read-only when it is a regular file of at least ``min_size`` bytes, else None."""
    try:
        with open(path, "rb") as f:
            return map_open(f, min_size)
    except OSError:
        return None


def map_open(f: BinaryIO, min_size: int = 1) -> mmap.mmap | None:
    """An open file mapped read-only when it is a regular file of at least ``min_size`` bytes, else
    None (then the caller reads it from ``f``: a pipe's data can be read only once)."""
    try:
        info = os.fstat(f.fileno())
        if not stat.S_ISREG(info.st_mode) or info.st_size < max(min_size, 1):
            return None
        return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    except (OSError, ValueError):  # a file system that cannot map it
        return None


def give_back(mapped: mmap.mmap, start: int, end: int) -> None:
    """Drop the whole pages of bytes ``start..end`` of the mapping from the process."""
    first = -(-start // mmap.PAGESIZE) * mmap.PAGESIZE  # the first whole page
    last = min(end, len(mapped))
    if last < len(mapped):  # the end of the last whole page (the mapping's own last page counts whole)
        last -= last % mmap.PAGESIZE
    if last > first:
        mapped.madvise(mmap.MADV_DONTNEED, first, last - first)
