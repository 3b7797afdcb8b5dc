"""The one-pass limit of a predictions file: the least any scorer of it must do, in a fresh process.

    .venv/bin/python benchmarks/one_pass.py openscan-zip FILE   # an official OpenScan zip
    .venv/bin/python benchmarks/one_pass.py json FILE           # MMScan's JSON predictions

Measured like the scorer (``measure.measured``: a fresh process from a fresh parent), so the ratio
"ours / one pass" compares like with like: a Python interpreter, NumPy, and the file's sha256 on a
thread (hashlib on the mapped file, 16 MiB a call) beside reading it once:

- ``openscan-zip``: each member where the page cache holds it (a stored member: its bytes in the
  mapping; a deflated one: inflated by zlib-ng in one call) and the non-zeros of its ``pred_masks``
  counted; no copy, no check, no scoring;
- ``json``: one simdjson parse (every byte looked at once, no number made a Python object).

The C allocator keeps freed memory for reuse, as the scorer's (``evaluation_workers.allocator``):
without it every inflated member was page-faulted in afresh, and the limit of a deflated zip came out
at 0.54-0.62 s where the inflating and counting take 0.09 s (issue 28: the earlier "1.04x of one pass"
compared ours with those faults). Prints ``{"nonzero": N}`` (OpenScan) or ``{}``.
"""

from __future__ import annotations

import hashlib
import io
import json
import mmap
import sys
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from evaluation_workers import allocator  # ctypes only: no NumPy, no scorer
from evaluation_workers.mapped import ViewFile, member_view

allocator.tune()

import numpy as np


def _sha256(view: memoryview) -> str:
    digest = hashlib.sha256()
    for at in range(0, len(view), 1 << 24):
        digest.update(view[at : at + (1 << 24)])
    return digest.hexdigest()


def openscan_zip(path: Path) -> dict[str, int]:
    from zlib_ng import zlib_ng

    nonzero = 0
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mapped, \
            memoryview(mapped) as view, ThreadPoolExecutor(1) as pool:
        sha = pool.submit(_sha256, view)
        with zipfile.ZipFile(ViewFile(view)) as zf:  # the directory only
            infos = zf.infolist()
        for info in infos:
            data = member_view(view, info)
            npz = memoryview(zlib_ng.decompress(data, -15, info.file_size)) if info.compress_type else data
            with zipfile.ZipFile(ViewFile(npz)) as inner:  # its directory only
                masks = inner.getinfo("pred_masks.npy")
            body = member_view(npz, masks)
            header = io.BytesIO(body[:4096])
            read_header = {(1, 0): np.lib.format.read_array_header_1_0,
                           (2, 0): np.lib.format.read_array_header_2_0}[np.lib.format.read_magic(header)]
            shape, _, dtype = read_header(header)
            array = np.frombuffer(body, dtype=dtype, count=int(np.prod(shape)), offset=header.tell())
            nonzero += int(np.count_nonzero(array))
            del data, npz, body, array
        sha.result()
    return {"nonzero": nonzero}


def json_file(path: Path) -> dict[str, int]:
    import simdjson

    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mapped, \
            memoryview(mapped) as view, ThreadPoolExecutor(1) as pool:
        sha = pool.submit(_sha256, view)
        parser = simdjson.Parser()
        doc = parser.load(str(path))
        del doc, parser
        sha.result()
    return {}


if __name__ == "__main__":
    kind, file = sys.argv[1], Path(sys.argv[2])
    print(json.dumps({"openscan-zip": openscan_zip, "json": json_file}[kind](file)))
