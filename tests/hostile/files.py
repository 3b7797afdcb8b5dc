"""Small hostile files, written at test time (none over ~3 MB on disk)."""

from __future__ import annotations

import gzip
import io
import json
import zipfile
from pathlib import Path

import numpy as np

BOX = [0.0, 0.0, 0.5, 1.0, 1.0, 1.0, 0.0, 0.0, 0.0]


def gzip_bomb(path: Path, inflated: int = 2 * 2**30) -> Path:
    """A gzip file of concatenated members of spaces: ~2 MB that inflate to ``inflated`` bytes."""
    member = gzip.compress(b" " * (64 * 2**20), compresslevel=9)
    with open(path, "wb") as f:
        f.write(gzip.compress(b"["))
        for _ in range(inflated // (64 * 2**20)):
            f.write(member)
    return path


def npy_bytes(array: np.ndarray | None = None, header: str | None = None, payload: bytes = b"") -> bytes:
    """An .npy file: a real array, or a hand-written header dict followed by ``payload``."""
    if header is None:
        buf = io.BytesIO()
        np.save(buf, array, allow_pickle=True)
        return buf.getvalue()
    text = header + " " * (63 - (len(header) + 10) % 64) + "\n"
    return b"\x93NUMPY\x01\x00" + len(text).to_bytes(2, "little") + text.encode() + payload


def write_npz(path: Path, members: dict[str, bytes], compress: bool = False) -> Path:
    method = zipfile.ZIP_DEFLATED if compress else zipfile.ZIP_STORED
    with zipfile.ZipFile(path, "w", method) as zf:
        for key, data in members.items():
            zf.writestr(key + ".npy", data)
    return path


def npz_members(ids: list[str], counts: list[int], dtype: str = "<f8") -> dict[str, bytes]:
    """A valid binary submission's members: ``counts[i]`` copies of BOX for ``ids[i]``."""
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    boxes = np.tile(np.array(BOX), (int(offsets[-1]), 1)).astype(dtype)
    return {
        "sample_id": npy_bytes(np.array(ids)),
        "offsets": npy_bytes(offsets),
        "pred_bboxes": npy_bytes(boxes),
        "pred_scores": npy_bytes(np.linspace(1, 0, int(offsets[-1])).astype(dtype)),
    }


def deep(opening: str, closing: str, depth: int = 10_000) -> bytes:
    return (opening * depth + closing * depth).encode()


def dumps(value: object) -> bytes:
    return json.dumps(value).encode()
