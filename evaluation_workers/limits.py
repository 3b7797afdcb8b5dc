"""Budgets on every decoder: a hostile upload never costs more than a legitimate one.

A 1 MB file must never cost gigabytes. Three rules, enforced while reading
(never after the bytes are in memory):

- **Inflated bytes per submission.** Everything a submission's file expands to
  (gzip, zip members, ``.npy`` payloads) is drawn from one ``Budget``, sized
  from the track's largest legitimate file (``inflated_budget``, overridable
  with ``EVAL_MAX_INFLATED_BYTES_<TRACK>``). Inflating stops at the first byte
  past it.
- **Array headers before data.** ``npy_header`` checks an ``.npy`` header's
  shape (non-negative, no overflow, within the caller's element cap) and dtype
  (no Python objects) before a byte of payload is read or allocated.
- **JSON depth.** ``loads_json`` refuses nesting deeper than ``MAX_JSON_DEPTH``
  (the formats need at most 4 levels) with a message instead of a
  ``RecursionError``.
- **JSON entries.** ``entries_past`` counts a top-level list's items or
  object's keys one at a time, so a file with more entries than the split has
  units is refused before the rest becomes Python objects.

Each refusal is a ``PredictionFormatError`` that names the file and the rule.
"""

from __future__ import annotations

import json
import math
import os
import re
import sys
import threading
import tokenize
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any, cast

import numpy as np
import orjson

from evaluation_workers import inflate
from evaluation_workers.errors import CORRUPT_COMPRESSED, PredictionFormatError

_CHUNK = 1 << 20
# Any stream may inflate this much whatever its ratio (``check_ratio``).
RATIO_FLOOR = 16 << 20
# Compression ratio past which a stream is a bomb, not predictions.
MAX_RATIO = 100.0
# Deeper than any accepted format (a list of objects of lists of boxes is 4).
MAX_JSON_DEPTH = 32



def inflated_budget(track: str, default: int) -> int:
    """Bytes a submission of ``track`` may inflate to in all: ``EVAL_MAX_INFLATED_BYTES_<TRACK>``, else
    ``default`` (the track's ``max_inflated_bytes``, which its reader passes: the registry is above this module)."""
    name = "EVAL_MAX_INFLATED_BYTES_" + track.upper().replace("-", "_")
    value = os.environ.get(name)
    if value:
        try:
            return int(value)
        except ValueError:
            raise ValueError(f"Expected {name} to be a number of bytes, but got {value!r}") from None
    return default


class Budget:
    """The inflated bytes one submission may still produce.

    ``take(n)`` draws ``n`` bytes or raises, naming ``file`` and the limit.
    One budget is shared by every decoder that reads the submission.
    """

    def __init__(self, limit: int, file: str) -> None:
        self.limit = int(limit)
        self.file = file
        self.used = 0
        self._lock = threading.Lock()  # scenes may be read on two threads

    def take(self, n: int) -> None:
        with self._lock:
            self.used += int(n)
        if self.used > self.limit:
            raise PredictionFormatError(
                f"{self.file}: Expected at most {self.limit:,} bytes once decompressed (the largest "
                f"legitimate submission of this track), but it inflates to more")

    @property
    def left(self) -> int:
        return max(0, self.limit - self.used)


def unlimited(file: str = "") -> Budget:
    """A budget that never runs out, for trusted files (labels, tests)."""
    return Budget(1 << 62, file)


def is_gzip(path: Path) -> bool:
    with open(path, "rb") as f:
        return f.read(2) == b"\x1f\x8b"


def check_ratio(inflated: int, compressed: int, file: str, max_ratio: float | None) -> None:
    """Refuse output past ``RATIO_FLOOR`` bytes that outgrows ``max_ratio`` times its compressed input.

    A budget sized for the largest legitimate submission still lets a 1 MB bomb
    inflate to gigabytes; real prediction files (decimal numbers, float arrays)
    compress about 1.1-4 to 1, bombs about 1000 to 1.
    """
    if max_ratio is not None and inflated > RATIO_FLOOR and inflated > max_ratio * compressed:
        raise PredictionFormatError(
            f"{file}: Expected a compression ratio of at most {max_ratio:g} to 1 (real predictions "
            f"compress about 3 to 1), but {compressed:,} compressed bytes inflate to more than "
            f"{inflated:,}")


def iter_gunzip(f: IO[bytes], budget: Budget, max_ratio: float | None = None) -> Iterator[bytes]:
    """Inflate a gzip stream (several members allowed) in chunks, drawing each from ``budget``.

    With ``max_ratio``, output past ``RATIO_FLOOR`` bytes may be at most
    ``max_ratio`` times the compressed bytes consumed so far (``check_ratio``).
    Raises ``PredictionFormatError`` on a truncated or corrupt stream.
    """
    decompressor = inflate.decompressobj(16 + inflate.MAX_WBITS)
    pending = b""
    consumed = inflated = 0
    while True:
        if not pending:
            pending = f.read(_CHUNK)
            if not pending:
                break
        # max_length bounds what one call may allocate, whatever the ratio.
        out = decompressor.decompress(pending, _CHUNK)
        consumed += len(pending) - len(decompressor.unconsumed_tail)
        pending = decompressor.unconsumed_tail
        if out:
            inflated += len(out)
            check_ratio(inflated, consumed, budget.file, max_ratio)
            budget.take(len(out))
            yield out
        if decompressor.eof:
            consumed -= len(decompressor.unused_data)  # counted again as the next member's input
            rest = decompressor.unused_data + pending
            pending = b""
            if not rest.strip(b"\x00"):
                rest = f.read(_CHUNK)
                if not rest:
                    return
            decompressor = inflate.decompressobj(16 + inflate.MAX_WBITS)
            pending = rest
    if not decompressor.eof:
        raise PredictionFormatError(f"{budget.file}: Expected a complete gzip stream, but it is truncated")


def read_maybe_gzip(path: Path, budget: Budget) -> bytes:
    """The file's bytes, gunzipped when it starts with the gzip magic; inflation drawn from ``budget``."""
    path = Path(path)
    with open(path, "rb") as f:
        if f.read(2) != b"\x1f\x8b":
            f.seek(0)
            return f.read()
        f.seek(0)
        try:
            return b"".join(iter_gunzip(f, budget))
        except inflate.ERRORS:
            raise PredictionFormatError(f"{budget.file}: Expected a valid gzip file, but got {CORRUPT_COMPRESSED}") from None


def read_exact(f: IO[bytes], n: int, budget: Budget, what: str) -> bytes:
    """Read exactly ``n`` bytes (drawn from ``budget`` first), or raise for a truncated member."""
    budget.take(n)
    data = f.read(n)
    if len(data) != n:
        raise PredictionFormatError(f"{what}: Expected {n:,} bytes, but got {len(data):,} (truncated)")
    return data


# The header numpy writes for a plain dtype ("{'descr': '<f8', 'fortran_order': False, 'shape': (3, 4), }",
# spaces, newline): read with a regex, as numpy would read it; any other header goes to numpy's parser.
_PLAIN_HEADER = re.compile(
    r"\{'descr': '([<>|=]?[a-zA-Z]\d*)', 'fortran_order': (True|False), 'shape': \(((?:\d+, )*\d+,?|)\), \} *\n")
_MAX_HEADER = 10_000  # numpy's own limit on a header's length


def npy_header(f: IO[bytes], what: str, max_elements: int) -> tuple[tuple[int, ...], bool, np.dtype[Any]]:
    """Read and check an ``.npy`` header; returns (shape, fortran_order, dtype).

    Refused before any payload is read: an unknown version, a Python-object
    dtype (pickle), a shape with a negative or non-integer dimension, and more
    than ``max_elements`` elements (computed in Python integers: no overflow).
    numpy's parser (``ast`` and ``tokenize``, 0.2 ms a header) reads what the
    plain-header pattern does not.
    """
    fmt = np.lib.format
    try:
        version = fmt.read_magic(f)  # type: ignore[no-untyped-call]
        if version not in ((1, 0), (2, 0)):
            raise ValueError(f"unsupported .npy version {version}")
        width = 2 if version == (1, 0) else 4
        size_field = f.read(width)
        length = int.from_bytes(size_field, "little")
        plain = None
        if len(size_field) == width and length <= _MAX_HEADER:
            header = f.read(length)
            plain = _PLAIN_HEADER.fullmatch(header.decode("latin1"))
            f = cast(IO[bytes], _Prefixed(size_field + header, f))
        else:
            f = cast(IO[bytes], _Prefixed(size_field, f))
        if plain is not None:
            descr, order, dims = plain.groups()
            shape: Any = tuple(int(d) for d in dims.replace(",", " ").split())
            fortran: Any = order == "True"
            dtype = np.dtype(descr)
        elif version == (1, 0):
            shape, fortran, dtype = fmt.read_array_header_1_0(f)  # type: ignore[no-untyped-call]
        else:
            shape, fortran, dtype = fmt.read_array_header_2_0(f)  # type: ignore[no-untyped-call]
    # numpy parses a mangled header with ast and tokenize: SyntaxError and
    # TokenError (found by the property tests), TypeError for odd descr values.
    except (ValueError, OSError, EOFError, SyntaxError, TypeError, tokenize.TokenError) as exc:
        raise PredictionFormatError(f"{what}: Expected a valid .npy array, but got {str(exc)[:200]}") from None
    if dtype.hasobject:
        raise PredictionFormatError(
            f"{what}: Expected numbers, but got Python objects (pickled arrays are not accepted)")
    if not isinstance(shape, tuple) or not all(isinstance(d, int) and d >= 0 for d in shape):
        raise PredictionFormatError(f"{what}: Expected a shape of non-negative integers, but got {shape}")
    elements = math.prod(shape)
    if elements > max_elements:
        raise PredictionFormatError(
            f"{what}: Expected at most {max_elements:,} elements, but its header announces "
            f"{elements:,} {shape}")
    return shape, bool(fortran), dtype


class _Prefixed:
    """A stream that reads ``prefix`` first, then ``rest`` (what numpy's header parser is given back)."""

    def __init__(self, prefix: bytes, rest: IO[bytes]) -> None:
        self._prefix, self._rest = prefix, rest

    def read(self, n: int = -1) -> bytes:
        head = self._prefix if n < 0 else self._prefix[:n]
        self._prefix = self._prefix[len(head):]
        if n < 0 or len(head) < n:
            head += self._rest.read(n - len(head) if n >= 0 else -1)
        return head


def read_npy(f: IO[bytes], what: str, max_elements: int, budget: Budget) -> np.ndarray:
    """A whole ``.npy`` stream as an array, header checked first and payload drawn from ``budget``."""
    shape, fortran, dtype = npy_header(f, what, max_elements)
    data = read_exact(f, math.prod(shape) * dtype.itemsize, budget, what)
    return np.frombuffer(data, dtype=dtype).reshape(shape, order="F" if fortran else "C")


def json_depth_error(file: str) -> PredictionFormatError:
    return PredictionFormatError(
        f"{file}: Expected JSON nested at most {MAX_JSON_DEPTH} levels deep, but it is nested deeper")


_NOT_STRUCTURE = bytes(b for b in range(256) if b not in b'[]{}"\\')


def _depth_exceeds(data: bytes | str, limit: int) -> bool:
    """Whether brackets outside strings nest deeper than ``limit`` (one pass, no parse).

    Only the positions of brackets and quotes are kept (a few per value), never
    an array per byte beyond one boolean scan: a 500 MiB file costs megabytes.
    """
    raw = data.encode() if isinstance(data, str) else data
    if b"\\" not in raw:
        # Without escapes only brackets and quotes decide; dropping every other byte (one C pass)
        # leaves a file of numbers a hundred times smaller, with the same brackets inside strings.
        raw = raw.translate(None, _NOT_STRUCTURE)
    if raw.count(b"[") + raw.count(b"{") <= limit:
        return False
    arr = np.frombuffer(raw, dtype=np.uint8)
    brackets = np.flatnonzero((arr == ord("[")) | (arr == ord("{")) | (arr == ord("]")) | (arr == ord("}")))
    quotes = np.flatnonzero(arr == ord('"'))
    if quotes.size:
        if raw.count(b"\\"):
            # A quote is escaped when an odd run of backslashes precedes it.
            run = np.zeros(len(quotes), dtype=np.int64)
            for k in range(1, 64):  # runs longer than 63 backslashes before a quote: treat as escaped
                prev = quotes - k
                hit = (prev >= 0) & (arr[np.maximum(prev, 0)] == ord("\\")) & (run == k - 1)
                if not hit.any():
                    break
                run[hit] = k
            quotes = quotes[run % 2 == 0]
        # A bracket is inside a string when an odd number of (unescaped) quotes precede it.
        brackets = brackets[np.searchsorted(quotes, brackets) % 2 == 0]
    opening = (arr[brackets] == ord("[")) | (arr[brackets] == ord("{"))
    depth = np.cumsum(np.where(opening, 1, -1), dtype=np.int64)
    return bool(depth.max(initial=0) > limit)


_SPACE = re.compile(r"[ \t\n\r]*")
_SCAN = json.JSONDecoder().scan_once  # type: ignore[attr-defined]  # the C scanner json.loads uses


def entry_cap(units: int) -> int:
    """The most entries a file is read with when its split has ``units`` questions or samples.

    Twice as many plus 1,000: a file somewhat off (another split's ids, some repeated) is still read
    and its ids named as before; past the cap the count alone refuses it (``entries_past``).
    """
    return 2 * units + 1_000


def entries_past(text: str, limit: int, stop_key: str | None = None) -> str | None:
    """``"keys"`` or ``"items"`` when the JSON text's top-level object or list has more than ``limit``.

    The entries are decoded one at a time and dropped, and the count stops at ``limit + 1``: the
    cost is that of the largest entry, never of the file (a 2.5-million-key object took 1.1 GB
    and 23 s as a whole, issue 26). None when the text is not such a container up to that point
    (a scalar, a syntax error, nesting too deep) or an object has the key ``stop_key``: the full
    parser then reads it and words what is wrong.
    """
    i = _SPACE.match(text).end()  # type: ignore[union-attr]
    if not text.startswith(("[", "{"), i):
        return None
    is_object = text[i] == "{"
    i = _SPACE.match(text, i + 1).end()  # type: ignore[union-attr]
    count = 0
    try:
        while True:
            if is_object:
                key, i = _SCAN(text, i)
                if not isinstance(key, str) or key == stop_key:
                    return None
                i = _SPACE.match(text, i).end()  # type: ignore[union-attr]
                if not text.startswith(":", i):
                    return None
                i = _SPACE.match(text, i + 1).end()  # type: ignore[union-attr]
            _, i = _SCAN(text, i)
            count += 1
            if count > limit:
                return "keys" if is_object else "items"
            i = _SPACE.match(text, i).end()  # type: ignore[union-attr]
            if not text.startswith(",", i):
                return None
            i = _SPACE.match(text, i + 1).end()  # type: ignore[union-attr]
    except (StopIteration, ValueError, RecursionError):  # not JSON there, an over-long integer, too deep
        return None


def loads_json(data: bytes | str, file: str, object_pairs_hook: Callable[..., Any] | None = None) -> Any:
    """``json.loads`` that refuses nesting deeper than ``MAX_JSON_DEPTH`` (never a RecursionError).

    An integer longer than Python converts (``sys.get_int_max_str_digits``) is refused
    in words; other parse errors propagate as ``json.JSONDecodeError`` for the caller to word.
    """
    if _depth_exceeds(data, MAX_JSON_DEPTH):
        raise json_depth_error(file)
    if object_pairs_hook is None:
        try:
            return orjson.loads(data)  # 4-5x faster; same values for every JSON it accepts
        except orjson.JSONDecodeError:
            pass  # the standard parser words the error (and reads NaN, as the official loaders do)
    try:
        return json.loads(data, object_pairs_hook=object_pairs_hook)
    except RecursionError:
        raise json_depth_error(file) from None
    except ValueError as exc:
        if type(exc) is not ValueError:  # JSONDecodeError, a hook's own errors: the caller words them
            raise
        # The one plain ValueError of the parser: an integer longer than int() converts, whose own
        # text ("Exceeds the limit (4300 digits) ... sys.set_int_max_str_digits()") is Python's.
        raise PredictionFormatError(f"{file}: Expected integers of at most {sys.get_int_max_str_digits():,} "
                                    "digits, but got a longer one") from None
