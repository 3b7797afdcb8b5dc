"""Zip archives read without trusting them: names, counts and every inflated byte checked.

``Archive`` lists a zip's members (a file on disk, mapped read-only by
``mapped.map_file``, or bytes in memory, such as a per-scene ``.npz`` inside
the official zip) and refuses, before any data is read: more members than the
layout can legitimately hold, names that leave the archive (``..``, absolute,
backslashes, drive letters) or are not UTF-8, symlinks, encryption and
compression methods other than stored and deflate.

``Archive.read`` returns one member's bytes: stored members as a slice
(zero-copy: a stored scene's masks are read where the page cache holds them),
deflated ones with a single capped inflate (``evaluation_workers.inflate``),
never past the caller's cap nor past the submission's ``Budget``.
``Archive.npy`` reads one ``.npy`` member: its header is inflated and checked
first (``limits.npy_header``), then exactly the announced payload.
"""

from __future__ import annotations

import math
import mmap
import stat
import struct
import tempfile
import threading
import zipfile
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from typing import IO, Any, cast

import numpy as np

from evaluation_workers.plugin import (
    CORRUPT_COMPRESSED,
    LOCAL_HEADER,
    NO_ZIP_DIRECTORY,
    UNSUPPORTED_ZIP,
    Budget,
    PredictionFormatError,
    ViewFile,
    give_back,
    inflate,
    map_file,
    npy_header,
)

# What opening or reading a malformed zip can raise inside zipfile/inflate/struct.
ZIP_ERRORS: tuple[type[Exception], ...] = (
    zipfile.BadZipFile,
    *inflate.ERRORS,
    struct.error,
    OSError,
    EOFError,
    ValueError,  # UnicodeDecodeError (a name flagged UTF-8 that is not) is one
    NotImplementedError,
    OverflowError,
    KeyError,
)
_HEADER_BYTES = 1 << 16
_CHUNK = 1 << 20  # an .npy header is at most ~10 kB (numpy's own limit)
# A deflated per-scene .npz up to this size is inflated in memory (a scene of 150,000 vertices x
# 100 uint8 masks is 15 MB); a larger one goes to a temporary file.
SPILL_IN_MEMORY = 64 << 20
# Entries per member and name are ~100 bytes of zipfile objects; the count is
# checked from the end-of-central-directory record before they are built.
_EOCD = struct.Struct("<4s4H2LH")


def member_count(data: IO[bytes], size: int) -> int | None:
    """The entry count the end-of-central-directory record states (None when absent or zip64)."""
    tail = min(size, 22 + 65535)
    data.seek(size - tail)
    block = data.read(tail)
    at = block.rfind(b"PK\x05\x06")
    if at < 0 or len(block) - at < 22:
        return None
    _, _, _, _, total, _, _, _ = _EOCD.unpack(block[at : at + 22])
    return None if total == 0xFFFF else int(total)


def check_name(name: str, file: str) -> PurePosixPath:
    """The member's path, refused when it could leave the archive or has no name at all."""
    path = PurePosixPath(name)
    if (
        not name
        or "\\" in name
        or name.startswith("/")
        or ".." in path.parts
        or (path.parts and ":" in path.parts[0])
        or "\x00" in name
    ):
        raise PredictionFormatError(f"{file}: Expected member paths inside the archive, but got {name!r}")
    return path


class Archive:
    """A zip's checked directory and budgeted member reads.

    Args:
        source: a path (mapped when it is a regular file), the bytes of a zip held in memory, or an
            open file (closed by ``close``).
        file: how messages name the archive ("predictions.zip: material/scene0000_00.npz").
        budget: the submission's inflated-bytes budget.
        max_members: the most entries a legitimate archive of this layout has.
        expected: what a file that is no zip is told it should have been.
    """

    def __init__(self, source: Path | bytes | memoryview | IO[bytes], file: str, budget: Budget,
                 max_members: int, expected: str = "a zip archive") -> None:
        self.file = file
        self.budget = budget
        self._buffer: memoryview | None = None
        self._handle: IO[bytes] | None = None
        self._lock = threading.Lock()
        self._extents: dict[str, tuple[int, int]] = {}  # member -> its bytes in the archive, once read
        try:
            if isinstance(source, Path):
                mapped = map_file(source)
                if mapped is not None:
                    source = memoryview(mapped)
                else:
                    source = self._handle = open(source, "rb")  # noqa: SIM115  # closed by close()
            if isinstance(source, (bytes, memoryview)):
                self._buffer = memoryview(source)
                stream: IO[bytes] = cast(IO[bytes], ViewFile(self._buffer))
                size = len(self._buffer)
            else:
                self._handle = stream = source
                size = stream.seek(0, 2)
            count = member_count(stream, size)
            if count is not None and count > max_members:
                raise PredictionFormatError(
                    f"{file}: Expected at most {max_members:,} members, but its directory lists {count:,}")
            stream.seek(0)
            self.size = size
            zf = zipfile.ZipFile(stream)
            infos = zf.infolist()
        except PredictionFormatError:
            self.close()
            raise
        except ZIP_ERRORS as exc:
            self.close()
            raise PredictionFormatError(f"{file}: Expected {expected}, but got {_describe(exc)}") from None
        if len(infos) > max_members:
            self.close()
            raise PredictionFormatError(
                f"{file}: Expected at most {max_members:,} members, but got {len(infos):,}")
        self.infos: dict[str, zipfile.ZipInfo] = {}
        for info in infos:
            check_name(info.filename, file)
            if stat.S_ISLNK(info.external_attr >> 16):
                raise PredictionFormatError(
                    f"{file}: Expected regular files, but member {info.filename!r} is a symbolic link")
            if info.filename in self.infos:
                raise PredictionFormatError(f"{file}: Expected unique member names, but got {info.filename!r} twice")
            self.infos[info.filename] = info

    def close(self) -> None:
        if self._handle is not None:
            self._handle.close()
            self._handle = None
        # A mapping is unmapped when the last array read from it goes (arrays of stored members
        # are views of it).
        self._buffer = None

    def release(self, name: str) -> None:
        """Give back the pages of a mapped archive's member once it has been read
        (``mapped.give_back``); views of it still alive map them again when read."""
        mapped = self._buffer.obj if self._buffer is not None else None
        extent = self._extents.get(name)
        if isinstance(mapped, mmap.mmap) and extent is not None:
            give_back(mapped, *extent)

    def files(self) -> list[str]:
        """Member names, without directories."""
        return [n for n, i in self.infos.items() if not i.is_dir()]

    def _raw(self, offset: int, n: int) -> bytes | memoryview:
        if offset < 0 or n < 0 or offset + n > self.size:
            raise PredictionFormatError(
                f"{self.file}: Expected member data inside the archive's {self.size:,} bytes, but the "
                f"directory points to bytes {offset:,}..{offset + n:,} (truncated or lying directory)")
        if self._buffer is not None:
            return self._buffer[offset : offset + n]
        assert self._handle is not None
        with self._lock:  # one file position, any number of reading threads
            self._handle.seek(offset)
            return self._handle.read(n)

    def _data(self, info: zipfile.ZipInfo, what: str, cap: int) -> bytes | memoryview:
        """A member's stored (possibly compressed) bytes, after checking its local header and size.

        Deflate never grows data by more than ~0.1 %, so a member whose stored
        size exceeds ``cap`` (the most it may inflate to) by more is refused unread.
        """
        if info.compress_size > cap + cap // 256 + 1024:
            raise PredictionFormatError(
                f"{what}: Expected at most {cap:,} bytes, but the member stores {info.compress_size:,}")
        if info.flag_bits & 0x1:
            raise PredictionFormatError(f"{what}: Expected an unencrypted member, but it is encrypted")
        if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
            raise PredictionFormatError(
                f"{what}: Expected a stored or deflated member, but got compression method {info.compress_type}")
        head = bytes(self._raw(info.header_offset, LOCAL_HEADER.size))
        fields = LOCAL_HEADER.unpack(head)
        if fields[0] != b"PK\x03\x04":
            raise PredictionFormatError(
                f"{what}: Expected a local file header where the directory points, but got other bytes "
                f"(lying directory)")
        name_len, extra_len = fields[9], fields[10]
        name = bytes(self._raw(info.header_offset + LOCAL_HEADER.size, name_len))
        if name.decode("utf-8", "replace") != info.filename and name.decode("cp437") != info.filename:
            raise PredictionFormatError(
                f"{what}: Expected the local header to name {info.filename!r}, but it names {name!r} "
                f"(lying directory)")
        start = info.header_offset + LOCAL_HEADER.size + name_len + extra_len
        self._extents[info.filename] = (info.header_offset, start + info.compress_size)
        return self._raw(start, info.compress_size)

    def open(self, name: str, what: str, cap: int) -> MemberStream:
        info = self.infos[name]
        data = self._data(info, what, cap)
        return MemberStream(data, info.compress_type == zipfile.ZIP_DEFLATED, what, self.budget)

    def read(self, name: str, cap: int, what: str) -> bytes | memoryview:
        """The member's bytes, refused past ``cap`` inflated bytes (or the budget)."""
        stream = self.open(name, what, cap)
        data = stream.read_up_to(cap + 1)
        if len(data) > cap:
            raise PredictionFormatError(
                f"{what}: Expected at most {cap:,} bytes once decompressed for this scene, but it inflates to more")
        return data

    def spill(self, name: str, cap: int, what: str) -> bytes | memoryview | IO[bytes]:
        """The member as bytes when stored or when it inflates to at most ``SPILL_IN_MEMORY``, else
        inflated a chunk at a time into a temporary file.

        For members that are archives themselves (the per-scene ``.npz``): a deflate
        bomb costs disk up to ``cap`` (and the budget), and memory up to ``SPILL_IN_MEMORY`` per read.
        """
        stream = self.open(name, what, cap)
        if stream.deflated is False:
            return stream.read_up_to(cap + 1)  # a slice of the mapped or read archive: no copy
        chunks: list[bytes | memoryview] = []
        spool: IO[bytes] | None = None
        total = 0
        # The size the directory states, in one inflate call when it stays in memory: an honest
        # member is then one buffer, not chunks copied again into one (a tenth of a deflated
        # zip's CPU). A lying size only changes how the bytes are split: the checks are the same.
        # A larger member goes a chunk at a time, as it may go on to disk.
        stated = self.infos[name].file_size
        step = stated if 0 < stated <= min(cap, SPILL_IN_MEMORY) else _CHUNK
        while True:
            chunk = stream.read_up_to(step)
            step = _CHUNK
            if not chunk:
                break
            total += len(chunk)
            if total > cap:
                if spool is not None:
                    spool.close()
                raise PredictionFormatError(
                    f"{what}: Expected at most {cap:,} bytes once decompressed for this scene, but it inflates to more")
            if spool is None and total > SPILL_IN_MEMORY:  # past the memory share: on to disk
                spool = tempfile.TemporaryFile()
                for kept in chunks:
                    spool.write(kept)
                chunks = []
            if spool is None:
                chunks.append(chunk)
            else:
                spool.write(chunk)
        if spool is None:
            return chunks[0] if len(chunks) == 1 else b"".join(chunks)
        spool.seek(0)
        return spool

    def npy(self, name: str, what: str, max_elements: int,
            check: Callable[[tuple[int, ...], np.dtype[Any]], None] | None = None,
            max_itemsize: int = 8,
            chunk_check: Callable[[int, np.ndarray], None] | None = None) -> np.ndarray:
        """One ``.npy`` member: header checked (``max_elements``, then ``check``) before the payload.

        ``max_itemsize`` bounds the bytes per element (8 for numbers; strings pass more).
        ``chunk_check(offset, values)``, for 1-d arrays, sees the payload a chunk at a time
        as it is inflated and may refuse it before the rest is inflated.
        """
        stream = self.open(name, what, max_elements * max_itemsize + _HEADER_BYTES)
        # the caller's shape rules speak more plainly than an element count, so they go first
        shape, fortran, dtype = npy_header(cast(IO[bytes], stream), what, 1 << 128)
        if check is not None:
            check(shape, dtype)
        if math.prod(shape) > max_elements:
            raise PredictionFormatError(
                f"{what}: Expected at most {max_elements:,} elements, but its header announces "
                f"{math.prod(shape):,} {shape}")
        if dtype.itemsize > max_itemsize:
            raise PredictionFormatError(
                f"{what}: Expected at most {max_itemsize} bytes per element, but got dtype {dtype}")
        nbytes = math.prod(shape) * dtype.itemsize
        if chunk_check is not None and len(shape) == 1:
            return _chunked(stream, shape[0], dtype, what, chunk_check)
        data = stream.read_up_to(nbytes)
        if len(data) != nbytes:
            raise PredictionFormatError(f"{what}: Expected {nbytes:,} bytes of data, but got {len(data):,} (truncated)")
        return np.frombuffer(data, dtype=dtype).reshape(shape, order="F" if fortran else "C")


def _chunked(stream: MemberStream, n: int, dtype: np.dtype[Any], what: str,
             chunk_check: Callable[[int, np.ndarray], None]) -> np.ndarray:
    """A 1-d payload inflated a chunk at a time, each chunk checked before the next is inflated.

    The result is allocated up front but its pages are only touched as valid
    chunks arrive, so a bomb of invalid values costs one chunk of memory.
    """
    out = np.empty(n, dtype=dtype)
    step = max(1, _CHUNK // max(dtype.itemsize, 1))
    for start in range(0, n, step):
        count = min(step, n - start)
        data = stream.read_up_to(count * dtype.itemsize)
        if len(data) != count * dtype.itemsize:
            raise PredictionFormatError(
                f"{what}: Expected {n * dtype.itemsize:,} bytes of data, but got fewer (truncated)")
        chunk = np.frombuffer(data, dtype=dtype)
        chunk_check(start, chunk)
        out[start : start + count] = chunk
    return out


class MemberStream:
    """A file-like over one member's bytes; reads inflate (capped) and draw from the budget."""

    def __init__(self, data: bytes | memoryview, deflated: bool, what: str, budget: Budget) -> None:
        self._data = memoryview(data)  # slices of a stored member, and inflate's input, without copies
        self._pos = 0
        self._inflate = inflate.decompressobj(-inflate.MAX_WBITS) if deflated else None
        self.deflated = deflated
        self.what = what
        self.budget = budget

    def read_up_to(self, n: int) -> bytes | memoryview:
        """At most ``n`` bytes: one inflate call for a deflated member, a slice for a stored one."""
        if n < 0:
            raise ValueError("n must be non-negative")
        if n > self.budget.left:
            n = self.budget.left + 1  # the budget refuses once this much is produced
        if self._inflate is None:
            out: bytes | memoryview = self._data[self._pos : self._pos + n]
            self._pos += len(out)
        else:
            try:
                out = self._inflate.decompress(self._data[self._pos :], n) if n else b""
            except inflate.ERRORS:
                raise PredictionFormatError(f"{self.what}: Expected valid deflate data, but got {CORRUPT_COMPRESSED}"
                                            ) from None
            tail = self._inflate.unconsumed_tail
            self._pos = len(self._data) - len(tail)
        self.budget.take(len(out))
        return out

    def read(self, n: int = -1) -> bytes:
        """For numpy's header parser: small reads only."""
        return bytes(self.read_up_to(_HEADER_BYTES if n is None or n < 0 else min(n, _HEADER_BYTES)))


def _describe(exc: BaseException) -> str:
    """What was wrong with a zip that zipfile could not open, in the submitter's words (never zipfile's)."""
    if isinstance(exc, UnicodeDecodeError):
        return "a member name that is not valid UTF-8 although the archive flags it so"
    if isinstance(exc, NotImplementedError):
        return UNSUPPORTED_ZIP
    if isinstance(exc, inflate.ERRORS):
        return CORRUPT_COMPRESSED
    return NO_ZIP_DIRECTORY
