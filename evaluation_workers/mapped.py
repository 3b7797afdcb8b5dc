"""Files read through a read-only mapping: no copy out of the page cache.

``map_file`` maps a regular, non-empty file (None for others: pipes, empty
files; callers read those), ``map_open`` an already open one. ``give_back`` drops a range's pages from the
process: they stay in the page cache, and a later read through a view still
alive maps them again, so resident memory does not grow with the file.

The file must not be truncated while it is mapped (a read past its new end is
a SIGBUS); the worker maps only its own copy of a submission.

``ViewFile`` reads a buffer (a mapping, a member's bytes) as a seekable file,
for zipfile's directory, without a copy; ``member_view`` is a zip member's
bytes where they lie in such a buffer.
"""

from __future__ import annotations

import errno
import io
import mmap
import os
import stat
import struct
import zipfile
from pathlib import Path
from typing import Any, BinaryIO

LOCAL_HEADER = struct.Struct("<4s5H3L2H")  # a zip member's local header (30 bytes); its name and extra field follow


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


class ViewFile(io.RawIOBase):
    """A read-only, seekable file over a buffer, without copying it (``io.BytesIO`` copies
    anything but ``bytes``); zipfile reads only the directory through it."""

    def __init__(self, view: memoryview) -> None:
        super().__init__()
        self._view = view
        self._pos = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: len(self._view)}[whence]
        if base + offset < 0:  # as a file on disk answers (zipfile reads it as "no directory here")
            raise OSError(errno.EINVAL, "Invalid argument")
        self._pos = base + offset
        return self._pos

    def tell(self) -> int:
        return self._pos

    def readinto(self, buffer: Any) -> int:
        chunk = self._view[self._pos : self._pos + len(buffer)]
        n = len(chunk)
        memoryview(buffer).cast("B")[:n] = chunk
        self._pos += n
        return n


def member_view(view: memoryview, info: zipfile.ZipInfo) -> memoryview:
    """Member ``info``'s stored bytes (compressed, if it is) as they lie in the archive ``view``;
    ``ValueError`` when no local header is where the directory says."""
    magic, *_, name_len, extra_len = LOCAL_HEADER.unpack_from(view, info.header_offset)
    if magic != b"PK\x03\x04":
        raise ValueError(f"{info.filename}: no local header at {info.header_offset}")
    start = info.header_offset + LOCAL_HEADER.size + name_len + extra_len
    return view[start : start + info.compress_size]
