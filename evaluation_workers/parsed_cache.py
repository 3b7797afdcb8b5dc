"""Parsed labels kept as arrays, so that a labels version is parsed once, not on every run.

Text labels (OpenScan's per-vertex files, MMScan's JSON) take seconds to parse
and milliseconds to load as ``.npz``. A parsed copy is looked up in two places:

1. the labels folder's own ``.cache/`` (``prepare_labels`` writes it for the
   service's labels; it travels with them to every worker), valid while the
   size and mtime it records for each labels file still match;
2. the user cache, ``EVAL_CACHE_DIR`` (default ``~/.cache/lb-eval``), for
   labels the scorer may not write beside (a researcher's validation split
   scored from the command line): ``<kind>/<sha256>.npz``, keyed by the
   labels' checksum and found through ``<kind>/by-files/<fingerprint>`` (the
   sha256 of the labels' path, sizes and mtimes), so an unchanged folder is
   neither parsed nor hashed again and a copy elsewhere is hashed, not parsed.

Every write goes to a temporary name and ``os.replace``: concurrent scorers
never read half a cache (at worst two of them parse the same labels once). A
cache that cannot be read is ignored and rebuilt; one that cannot be written
(a read-only home) costs only the parse.

A cache is read through a mapping (``_mapped``): its arrays are read-only
views of the page cache, shared by every scoring process of the host, not a
private copy each process faults in (115 MiB for OpenScan's 50 x 150,000
vertices x 8 aspects: 0.25 s with ``np.load``, most of it the fresh pages;
the real val split's is 750 MiB). Each member's CRC is checked, as
``np.load`` does: a damaged cache is ignored and rebuilt. Caches are only
ever replaced (``os.replace``), never truncated, so a mapping never loses
its pages.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import math
import os
import struct
import zipfile
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from evaluation_workers.mapped import ViewFile, map_file, member_view
from evaluation_workers.results import sha256_tree

Arrays = dict[str, np.ndarray]


def file_stats(paths: list[Path], root: Path) -> list[list[Any]]:
    """``[relative path, size, mtime_ns]`` of each labels file: what a cache is valid for."""
    return [[p.relative_to(root).as_posix(), p.stat().st_size, p.stat().st_mtime_ns] for p in paths]


def user_cache_dir(kind: str) -> Path:
    base = os.environ.get("EVAL_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "lb-eval")
    return Path(base) / kind


def write(path: Path, arrays: Arrays, sha: str, stats: list[list[Any]], version: int) -> None:
    """A parsed copy at ``path`` (atomically), recording the checksum and the files it was parsed from."""
    meta = {"version": version, "labels_sha256": sha, "files": stats}
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.stem}.{os.getpid()}.tmp.npz")
    np.savez(tmp, meta=np.array(json.dumps(meta)), **arrays)  # type: ignore[arg-type]  # stored: loads at disk speed
    os.replace(tmp, path)


def read(path: Path, version: int, stats: list[list[Any]] | None = None,
         sha: str | None = None) -> tuple[Arrays, str] | None:
    """The arrays and checksum of a parsed copy; None when absent, damaged, of another version,
    or recorded for other files (``stats``) or other labels (``sha``)."""
    if not path.is_file():
        return None
    try:
        arrays = _mapped(path)
        if arrays is None:  # not as ``write`` stores it (a compressed .npz): read as NumPy does
            with np.load(path, allow_pickle=False) as data:
                arrays = {k: data[k] for k in data.files}
        meta = json.loads(str(arrays.pop("meta")))
        if meta.get("version") != version:
            return None
        if (sha is not None and meta.get("labels_sha256") != sha) or (
                stats is not None and meta.get("files") != stats):
            return None
    except (OSError, ValueError, KeyError, zipfile.BadZipFile, struct.error):
        return None
    return arrays, str(meta["labels_sha256"])


_NPY_HEADER_MAX = 1 << 16


def _mapped(path: Path) -> Arrays | None:
    """The arrays of a stored ``.npz`` as read-only views of its mapping, each member's CRC checked
    (``ValueError`` when one differs); None when the file is no stored ``.npz`` of plain arrays."""
    mapped = map_file(path)
    if mapped is None:
        return None
    view = memoryview(mapped)
    with zipfile.ZipFile(ViewFile(view)) as zf:
        infos = zf.infolist()
    arrays: Arrays = {}
    for info in infos:
        if info.compress_type != zipfile.ZIP_STORED or not info.filename.endswith(".npy"):
            return None
        member = member_view(view, info)
        if len(member) != info.file_size or zlib.crc32(member) != info.CRC:
            raise ValueError(f"{path}: {info.filename} is damaged")
        head = io.BytesIO(member[:_NPY_HEADER_MAX])
        version = np.lib.format.read_magic(head)  # type: ignore[no-untyped-call]
        read_header = np.lib.format.read_array_header_1_0 if version == (1, 0) else \
            np.lib.format.read_array_header_2_0
        shape, fortran, dtype = read_header(head)  # type: ignore[no-untyped-call]
        if dtype.hasobject:
            return None
        count = math.prod(shape)
        flat = np.frombuffer(member, dtype=dtype, count=count, offset=head.tell()) if count else \
            np.empty(0, dtype=dtype)
        arrays[info.filename[: -len(".npy")]] = flat.reshape(shape, order="F" if fortran else "C")
    return arrays


def cached(labels: Path, kind: str, version: int, stats: list[list[Any]], own: Path | None,
           parse: Callable[[], Arrays]) -> tuple[Arrays, str]:
    """The parsed labels at ``labels`` and their checksum, parsing only when no cache holds them.

    Args:
        labels: the labels folder or file (hashed with ``results.sha256_tree``).
        kind: the user cache's sub-folder ("openscan-labels").
        version: the parsed layout's version; a cache of another is ignored.
        stats: ``file_stats`` of the labels files.
        own: the folder's own cache file, looked at first (never written here).
        parse: parses the labels into arrays.
    """
    if own is not None:
        found = read(own, version, stats=stats)
        if found is not None:
            return found
    root = user_cache_dir(kind)
    fingerprint = hashlib.sha256(json.dumps([str(Path(labels).resolve()), stats]).encode()).hexdigest()
    pointer = root / "by-files" / fingerprint
    if pointer.is_file():
        with contextlib.suppress(OSError):
            known = pointer.read_text().strip()
            found = read(root / f"{known}.npz", version, sha=known)
            if found is not None:
                return found
    sha = sha256_tree(labels)
    found = read(root / f"{sha}.npz", version, sha=sha)
    arrays = found[0] if found is not None else parse()
    with contextlib.suppress(OSError):
        if found is None:
            write(root / f"{sha}.npz", arrays, sha, stats, version)
        pointer.parent.mkdir(parents=True, exist_ok=True)
        tmp = pointer.with_name(f"{fingerprint}.{os.getpid()}.tmp")
        tmp.write_text(sha)
        os.replace(tmp, pointer)
    return arrays, sha
