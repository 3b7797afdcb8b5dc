"""The binary form of MMScan predictions: one ``.npz`` for the full test split.

Members (no pickled objects; stored or deflated, i.e. ``np.savez`` or
``np.savez_compressed``), P prompts, B boxes in all:

- ``sample_id`` (P,) unicode, each a sample id of the labels, once;
- ``offsets`` (P+1,) integers, non-decreasing from 0 to B: prompt i owns rows
  ``offsets[i]:offsets[i+1]`` (no rows: no predictions);
- ``pred_bboxes`` (B, 9) float32 or float64; ``pred_scores`` (B,) float32 or float64.

Nothing is built per box: headers are checked before any payload is read
(``limits.npy_header``), stored members are memory-mapped, deflated ones
inflated into one array each (drawn from the submission's budget, at most
``limits.MAX_RATIO`` to 1; zlib-ng, ``inflate``, and their CRC-32 checked),
and values are checked in vectorised blocks.
"""

from __future__ import annotations

import math
import struct
import zipfile
import zlib
from pathlib import Path
from typing import IO, Any, Literal

import numpy as np

from evaluation_workers.plugin import (
    CORRUPT_COMPRESSED,
    MAX_RATIO,
    NO_ZIP_DIRECTORY,
    RATIO_FLOOR,
    UNSUPPORTED_ZIP,
    Budget,
    PredictionFormatError,
    inflate,
    npy_header,
    where,
)
from evaluation_workers.tracks.mmscan_vg.checks import check_ids, check_values, clip
from evaluation_workers.tracks.mmscan_vg.labels import BOX_ARITY, MAX_BOXES_PER_PROMPT, Predictions

KEYS = ("sample_id", "offsets", "pred_bboxes", "pred_scores")
MAX_SAMPLE_ID_CHARS = 256
_MAX_MEMBERS = 64
_LOCAL_HEADER = struct.Struct("<4sHHHHHIIIHH")
_CHUNK = 1 << 20
_OUT_CHUNK = 8 << 20


def is_npz(path: Path) -> bool:
    """Whether the file starts like a zip (what ``np.savez`` writes)."""
    with open(path, "rb") as f:
        return f.read(4) in (b"PK\x03\x04", b"PK\x05\x06")


class _Member:
    """One ``.npy`` member: its header, checked, and a way to get its payload."""

    def __init__(self, path: Path, zf: zipfile.ZipFile, info: zipfile.ZipInfo, what: str, max_elements: int):
        self.path, self.zf, self.info, self.what = path, zf, info, what
        if info.flag_bits & 0x1:
            raise PredictionFormatError(f"{what}: Expected an unencrypted member, but it is encrypted")
        if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
            raise PredictionFormatError(
                f"{what}: Expected a stored or deflated member (np.savez or np.savez_compressed), "
                f"but got compression method {info.compress_type}")
        with self._open() as f:
            self.shape, self.fortran, self.dtype = npy_header(f, what, max_elements)
            self.header_bytes = f.tell() - self._start()
        self.nbytes = math.prod(self.shape) * self.dtype.itemsize
        if self.header_bytes + self.nbytes != info.file_size:
            raise PredictionFormatError(
                f"{what}: Expected {self.header_bytes + self.nbytes:,} bytes for its header and shape "
                f"{self.shape}, but the member holds {info.file_size:,}")

    def _start(self) -> int:
        """Where the header read by ``_open`` starts: 0 in a deflated member's fresh stream."""
        return self._data_offset() if self.info.compress_type == zipfile.ZIP_STORED else 0

    def _data_offset(self) -> int:
        """Where the member's stored or compressed bytes begin in the file, past its local header."""
        with open(self.path, "rb") as f:
            f.seek(self.info.header_offset)
            fields = _LOCAL_HEADER.unpack(f.read(_LOCAL_HEADER.size))
        if fields[0] != b"PK\x03\x04":
            raise PredictionFormatError(f"{self.what}: Expected a zip local header, but the file is corrupt")
        return int(self.info.header_offset + _LOCAL_HEADER.size + fields[9] + fields[10])

    def _open(self) -> IO[bytes]:
        if self.info.compress_type == zipfile.ZIP_STORED:
            f = open(self.path, "rb")
            f.seek(self._start())
            return f
        return self.zf.open(self.info)

    def array(self, budget: Budget) -> np.ndarray:
        """The payload: memory-mapped when stored, inflated into one array when deflated."""
        budget.take(self.nbytes)
        order: Literal["C", "F"] = "F" if self.fortran else "C"
        if self.nbytes == 0:
            empty: np.ndarray = np.zeros(self.shape, dtype=self.dtype, order=order)
            return empty
        if self.info.compress_type == zipfile.ZIP_STORED:
            mapped: np.ndarray = np.memmap(self.path, dtype=self.dtype, mode="r",
                                           offset=self._start() + self.header_bytes, shape=self.shape,
                                           order=order)
            return mapped
        if self.nbytes > max(RATIO_FLOOR, MAX_RATIO * self.info.compress_size):
            raise PredictionFormatError(
                f"{self.what}: Expected a compression ratio of at most {MAX_RATIO:g} to 1 (real predictions "
                f"compress about 1.1 to 1), but {self.info.compress_size:,} compressed bytes announce "
                f"{self.nbytes:,}")
        out = np.empty(self.nbytes, dtype=np.uint8)
        _inflate_into(self.path, self._data_offset(), self.info, self.header_bytes, memoryview(out.data), self.what)
        return out.view(self.dtype).reshape(self.shape, order=order)


def _inflate_into(path: Path, offset: int, info: zipfile.ZipInfo, skip: int, out: memoryview, what: str) -> None:
    """Inflate a deflated member (its compressed bytes from ``offset``) with zlib-ng, drop its first
    ``skip`` bytes (the .npy header) and fill ``out`` with the rest, exactly.

    zlib-ng inflates float boxes 1.4x as fast as zipfile's zlib (the full test split's 755 MiB of
    boxes: 2.7 s -> 1.9 s) and computes the CRC-32 5x as fast (0.2 s -> 0.03 s). The stream may not end
    early, run past ``out`` or fail the CRC-32 the zip directory records; at most ``_CHUNK`` compressed
    and ``_OUT_CHUNK`` inflated bytes are held besides ``out``.
    """
    stream = inflate.decompressobj(-inflate.MAX_WBITS)
    total = skip + len(out)
    produced = done = crc = 0
    left = info.compress_size
    pending: bytes = b""
    with open(path, "rb") as f:
        f.seek(offset)
        while not stream.eof:
            if not pending and left:
                pending = f.read(min(_CHUNK, left))
                left = left - len(pending) if pending else 0
            try:
                chunk = stream.decompress(pending, min(_OUT_CHUNK, total - produced + 1))
            except inflate.ERRORS:
                raise PredictionFormatError(f"{what}: Expected valid deflate data, but got {CORRUPT_COMPRESSED}") from None
            pending = stream.unconsumed_tail
            if not chunk and not pending and not left:
                break  # no input left and nothing more comes out: the stream stops short of its end
            produced += len(chunk)
            if produced > total:
                raise PredictionFormatError(
                    f"{what}: Expected {total:,} bytes once inflated (as its header and the zip directory say), "
                    "but it inflates to more")
            crc = inflate.crc32(chunk, crc)
            view = memoryview(chunk)
            if skip:
                cut = min(skip, len(view))
                skip, view = skip - cut, view[cut:]
            out[done : done + len(view)] = view
            done += len(view)
    if produced < total or not stream.eof:
        raise PredictionFormatError(
            f"{what}: Expected {total:,} bytes once inflated, but the deflate stream ends after {produced:,} "
            "(truncated or corrupt)")
    if crc != info.CRC:
        raise PredictionFormatError(
            f"{what}: Expected the CRC-32 the zip directory records, but the inflated bytes give another "
            "(the file is corrupt)")


def load(path: Path, known: dict[str, int], budget: Budget) -> Predictions:
    """Read and check a binary predictions file against the label sample ids.

    Raises:
        PredictionFormatError: naming the file, the array and the rule.
    """
    path = Path(path)
    name = budget.file
    _check_member_count(path, name)
    try:
        with zipfile.ZipFile(path) as zf:
            return _load(path, zf, known, budget, name)
    # NotImplementedError: a zip version or feature zipfile does not read ("zip file version 6.4").
    except (zipfile.BadZipFile, zlib.error, EOFError, OSError, struct.error, ValueError, OverflowError,
            NotImplementedError) as exc:
        damage = (UNSUPPORTED_ZIP if isinstance(exc, NotImplementedError)
                  else CORRUPT_COMPRESSED if isinstance(exc, inflate.ERRORS) else NO_ZIP_DIRECTORY)
        raise PredictionFormatError(f"{name}: Expected a valid .npz (zip) file, but got {damage}") from None


def _check_member_count(path: Path, name: str) -> None:
    """Refuse a zip directory of many entries before zipfile builds an object for each."""
    with open(path, "rb") as f:
        f.seek(0, 2)
        size = f.tell()
        f.seek(max(0, size - 65_557))
        tail = f.read()
    at = tail.rfind(b"PK\x05\x06")
    if at >= 0 and len(tail) >= at + 12:
        entries = int.from_bytes(tail[at + 10 : at + 12], "little")
        if _MAX_MEMBERS < entries < 0xFFFF:
            raise PredictionFormatError(
                f"{name}: Expected the {len(KEYS)} arrays {', '.join(KEYS)}, but the .npz has {entries:,} members")


def _load(path: Path, zf: zipfile.ZipFile, known: dict[str, int], budget: Budget, name: str) -> Predictions:
    infos = {info.filename: info for info in zf.infolist()}
    if len(infos) > _MAX_MEMBERS:
        raise PredictionFormatError(
            f"{name}: Expected the {len(KEYS)} arrays {', '.join(KEYS)}, but the .npz has {len(infos):,} members")
    for key in KEYS:
        if key + ".npy" not in infos:
            raise PredictionFormatError(
                f"{name}: Expected the arrays {', '.join(KEYS)}, but `{key}` is missing "
                f"(found: {', '.join(sorted(clip(n, 40) for n in infos)) or 'none'})")

    def member(key: str, max_elements: int) -> _Member:
        return _Member(path, zf, infos[key + ".npy"], f"{name}: {key}", max_elements)

    ids_member = member("sample_id", len(known))
    if len(ids_member.shape) != 1 or ids_member.dtype.kind != "U":
        raise PredictionFormatError(
            where(name, "sample_id", f"Expected a (P,) unicode array, but got {_describe(ids_member)}"))
    if ids_member.dtype.itemsize // 4 > MAX_SAMPLE_ID_CHARS:
        raise PredictionFormatError(
            where(name, "sample_id", f"Expected ids of at most {MAX_SAMPLE_ID_CHARS} characters, "
                                     f"but got dtype {ids_member.dtype.str}"))
    n_prompts = ids_member.shape[0]
    offsets_member = member("offsets", n_prompts + 1)
    if offsets_member.shape != (n_prompts + 1,) or offsets_member.dtype.kind != "i":
        raise PredictionFormatError(
            where(name, "offsets", f"Expected a (P+1,) = ({n_prompts + 1},) integer array, "
                                   f"but got {_describe(offsets_member)}"))
    max_boxes = n_prompts * MAX_BOXES_PER_PROMPT
    boxes_member = member("pred_bboxes", max_boxes * BOX_ARITY)
    scores_member = member("pred_scores", max_boxes)
    n_boxes = boxes_member.shape[0] if boxes_member.shape else 0
    for what, m, shape in (("pred_bboxes", boxes_member, (n_boxes, BOX_ARITY)),
                           ("pred_scores", scores_member, (n_boxes,))):
        if m.shape != shape or m.dtype.kind != "f" or m.dtype.itemsize not in (4, 8):
            raise PredictionFormatError(
                where(name, what, f"Expected a {_shape(shape)} float32 or float64 array, "
                                  f"but got {_describe(m)}"))

    sample_ids = ids_member.array(budget).tolist()
    order = check_ids(sample_ids, known, name, lambda i: f"sample_id[{i}]")
    offsets = np.asarray(offsets_member.array(budget), dtype=np.int64)
    _check_offsets(offsets, n_boxes, sample_ids, name)
    boxes = boxes_member.array(budget)
    scores = np.asarray(scores_member.array(budget), dtype=np.float64)
    ends = offsets[1:]

    def sample_of(entry: int) -> str:
        return str(sample_ids[entry])

    check_values(boxes, scores, ends, sample_of, name)
    seen = set(sample_ids)
    extra = sorted(clip(n, 40) for n in infos if n[:-4] not in KEYS or not n.endswith(".npy"))
    warnings = [f"{name}: ignored unknown arrays: {', '.join(extra[:10])}"] if extra else []
    return Predictions(
        sample=np.repeat(np.asarray(order, dtype=np.int64), np.diff(offsets)),
        boxes=boxes,
        scores=scores,
        missing=[sid for sid in known if sid not in seen],
        entries=n_prompts,
        warnings=warnings,
    )


def _check_offsets(offsets: np.ndarray, n_boxes: int, sample_ids: list[str], name: str) -> None:
    if offsets[0] != 0:
        raise PredictionFormatError(where(name, "offsets", f"Expected offsets[0] = 0, but got {int(offsets[0])}"))
    counts = np.diff(offsets)
    if (counts < 0).any():
        i = int(np.argmax(counts < 0))
        raise PredictionFormatError(
            where(name, "offsets", f"Expected non-decreasing offsets, but offsets[{i}] = {int(offsets[i])} "
                                   f"> offsets[{i + 1}] = {int(offsets[i + 1])}"))
    if offsets[-1] != n_boxes:
        raise PredictionFormatError(
            where(name, "offsets", f"Expected offsets[-1] = B = {n_boxes:,} (the rows of pred_bboxes), "
                                   f"but got {int(offsets[-1]):,}"))
    if (counts > MAX_BOXES_PER_PROMPT).any():
        i = int(np.argmax(counts > MAX_BOXES_PER_PROMPT))
        raise PredictionFormatError(
            where(name, f"sample {clip(sample_ids[i])}", "pred_bboxes",
                  f"Expected at most {MAX_BOXES_PER_PROMPT} boxes per prompt, but got {int(counts[i])}"))


def _describe(m: _Member) -> str:
    return f"shape {_shape(m.shape)} of {m.dtype.name}"


def _shape(shape: tuple[Any, ...]) -> str:
    return "(" + ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "") + ")"
