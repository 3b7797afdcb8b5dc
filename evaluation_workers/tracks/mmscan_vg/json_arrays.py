"""The JSON form read straight into arrays, for files of the usual shape.

simdjson parses the text into its tape, and each prompt's boxes and scores are
copied from the tape as float64 (``Array.as_buffer``): no number ever becomes
a Python object, so 150,000 boxes take about 0.1 s instead of 0.4 s, and the
full test split's 512 MiB of JSON never becomes gigabytes of Python floats.
simdjson rounds every decimal to the nearest double, as Python's parser does,
so the arrays are the same bit for bit.

The usual shape, as the devkit's users write it: a list of ``{"sample_id":
"...", "pred_bboxes": [[9 numbers], ...], "pred_scores": [numbers]}``, scores
flat or (N, 1), other keys of an item holding a string, a number, a boolean or
null, no key twice in an item. (The object form keyed by sample id goes to the
general reader: simdjson looks a key up by walking the object.) ``read`` returns None for anything else, and
for anything it cannot parse: the general reader (``json_form``) then reads
the file and words what is wrong; so does it every file where pysimdjson is not installed (the
core's ``fast`` extra), with the same arrays and the same refusals, only slower. This module never decides that a file is
bad, so both readers accept, refuse and word exactly the same files.

No element nested deeper than the shape allows: ``as_buffer`` flattens nested
lists, so the file's brackets are counted and must be exactly those of the
lists seen (a ``[`` in a string or in another key's value sends the file to
the general reader too).
"""

from __future__ import annotations

import mmap
import re
from collections.abc import Callable, Iterable, Sized
from dataclasses import dataclass, field
from pathlib import Path
from typing import cast

import numpy as np

try:  # the core's `fast` extra (the service pins it): without it, every file goes to the general reader
    import simdjson

    AVAILABLE = True
except ImportError:
    AVAILABLE = False

from evaluation_workers.plugin import map_file
from evaluation_workers.tracks.mmscan_vg.labels import BOX_ARITY, MAX_BOXES_PER_PROMPT

_ALLOWED = frozenset({"sample_id", "pred_bboxes", "pred_scores"})
_DOUBLE = 8
_LIST = re.compile(rb"[ \t\n\r]*\[")


@dataclass
class Flat:
    """The content of a file of the usual shape, in item order."""

    ids: list[str]
    counts: np.ndarray  # (P,) int64 boxes per item
    boxes: np.ndarray  # (B, 9) float64
    scores: np.ndarray  # (B,) float64
    unknown: set[str] = field(default_factory=set)  # keys of items other than _ALLOWED
    with_unknown: int = 0  # items holding such keys


def read(data: bytes | bytearray, max_items: int | None = None) -> Flat | None:
    """The file's content when it has the usual shape, else None (see the module docstring).

    ``max_items``: a list of more items is left to the general reader, which refuses it by its count
    before reading the items one by one.
    """
    if not AVAILABLE:
        return None
    return _read(lambda parser: parser.parse(data), data, max_items)


def read_file(path: Path, max_items: int | None = None) -> Flat | None:
    """``read`` of a plain JSON file (not gzip, no BOM: the caller checks) without a copy of it in
    Python: simdjson reads the file into its own padded buffer and the brackets are counted on a
    read-only mapping (31 MiB: 30-40 ms less in a fresh process than reading it into bytes first)."""
    if not AVAILABLE:
        return None
    mapped = map_file(path)
    if mapped is None or not _LIST.match(mapped):  # an object: simdjson's tape of it would be thrown away
        return None
    return _read(lambda parser: parser.load(str(path)), mapped, max_items)


def _read(parse: Callable[[simdjson.Parser], object], text: bytes | bytearray | mmap.mmap,
          max_items: int | None) -> Flat | None:
    """``parse`` a fresh parser's document (the file's ``text``) and flatten it; None where either fails."""
    try:
        doc = parse(simdjson.Parser())
    except (ValueError, RuntimeError, OSError):  # simdjson's parse and read errors (UnicodeDecodeError too)
        return None
    if not isinstance(doc, simdjson.Array) or (max_items is not None and len(doc) > max_items):
        return None
    try:
        return _flatten(doc, text)
    except (TypeError, KeyError):  # a value of another type than the shape's (as_buffer, len)
        return None


def _flatten(doc: simdjson.Array, data: bytes | bytearray | mmap.mmap) -> Flat | None:
    counts = np.zeros(len(doc), dtype=np.int64)
    ids: list[str] = []
    box_parts: list[bytes] = []  # buffers of doubles
    score_parts: list[bytes] = []
    unknown: set[str] = set()
    with_unknown = 0
    brackets = 1  # the file's [ as this shape has them
    for i, item in enumerate(doc):  # iterated: simdjson finds the i-th element by walking to it
        if not isinstance(item, simdjson.Object):
            return None
        keys = set(item.keys())
        if len(keys) != len(item):  # the general reader keeps the last value of a repeated key
            return None
        sid = item.get("sample_id")
        boxes, scores = item.get("pred_bboxes"), item.get("pred_scores")
        if not (isinstance(sid, str) and isinstance(boxes, simdjson.Array) and isinstance(scores, simdjson.Array)):
            return None
        n = len(boxes)
        if n > MAX_BOXES_PER_PROMPT or len(scores) != n:
            return None
        if n and _lengths(boxes) != {BOX_ARITY}:  # a number instead of a row: TypeError
            return None
        column = n > 0 and isinstance(scores[0], simdjson.Array)
        if column and _lengths(scores) != {1}:
            return None
        box_buffer = boxes.as_buffer(of_type="d")  # TypeError unless every element is a number
        score_buffer = scores.as_buffer(of_type="d")
        if memoryview(box_buffer).nbytes != n * BOX_ARITY * _DOUBLE or memoryview(score_buffer).nbytes != n * _DOUBLE:
            return None
        if len(keys) > len(_ALLOWED) or not keys <= _ALLOWED:
            unknown |= keys - _ALLOWED
            with_unknown += 1
        ids.append(sid)
        counts[i] = n
        box_parts.append(box_buffer)
        score_parts.append(score_buffer)
        brackets += 2 + n + (n if column else 0)
    # Every row holds exactly its elements (no list flattened into it), and every other value is a scalar.
    text = np.frombuffer(data, dtype=np.uint8)  # counted by NumPy: twice as fast as bytes.count
    if int(np.count_nonzero(text == ord("["))) != brackets or int(np.count_nonzero(text == ord("{"))) != len(ids):
        return None
    return Flat(
        ids=ids,
        counts=counts,
        boxes=np.frombuffer(b"".join(box_parts), dtype=np.float64).reshape(-1, BOX_ARITY),
        scores=np.frombuffer(b"".join(score_parts), dtype=np.float64),
        unknown=unknown,
        with_unknown=with_unknown,
    )


def _lengths(rows: simdjson.Array) -> set[int]:
    """The lengths of an array's elements (TypeError where one has none: a number)."""
    return set(map(len, cast(Iterable[Sized], rows)))
