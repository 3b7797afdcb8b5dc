"""The JSON form of MMScan predictions (plain or gzip-compressed).

A JSON list of ``{"sample_id", "pred_bboxes": [[9 numbers], ...], "pred_scores":
[numbers]}`` or an object ``{"<sample_id>": {"pred_bboxes", "pred_scores"}}``.
``pred_scores`` may also be (N, 1), as the devkit's README shows it; other
keys in an item (``scan_id``, ``text``, ...) are ignored and listed once in
the warnings. Items are counted from 1 in messages.

Limits, all checked while reading: the JSON text (plain, or once inflated) is
at most ``MAX_JSON_BYTES`` (the binary form is for larger submissions); gzip
draws from the submission's budget and may not inflate more than
``limits.MAX_RATIO`` to 1; nesting is at most ``limits.MAX_JSON_DEPTH``; at most
``limits.entry_cap`` items or keys for the labels' samples (counted before the file is parsed whole).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from evaluation_workers.plugin import (
    CORRUPT_COMPRESSED,
    MAX_RATIO,
    Budget,
    PredictionFormatError,
    entries_past,
    entry_cap,
    inflate,
    iter_gunzip,
    loads_json,
    where,
)
from evaluation_workers.tracks.mmscan_vg import json_arrays
from evaluation_workers.tracks.mmscan_vg.checks import (
    check_ids,
    check_values,
    clip,
    ignored_keys_warning,
    short,
)
from evaluation_workers.tracks.mmscan_vg.labels import BOX_ARITY, MAX_BOXES_PER_PROMPT, Predictions

MAX_JSON_BYTES = 512 * 2**20
_GZIP_MAGIC = b"\x1f\x8b"
_BOM = b"\xef\xbb\xbf"
_ITEM_KEYS = frozenset({"pred_bboxes", "pred_scores"})


def read_bytes(path: Path, budget: Budget) -> bytes | bytearray:
    """The file's bytes, gunzipped when it starts with the gzip magic, within the limits; no BOM."""
    name = budget.file
    size = path.stat().st_size
    if size == 0:
        raise PredictionFormatError(
            f"{name}: Expected a JSON list or object (optionally gzip), but got an empty file (0 bytes)")
    with open(path, "rb") as f:
        if f.read(2) != _GZIP_MAGIC:
            if size > MAX_JSON_BYTES:
                raise PredictionFormatError(
                    f"{name}: Expected at most {MAX_JSON_BYTES:,} bytes of JSON (use the binary .npz form "
                    f"for larger submissions, docs/mmscan-vg-format.md), but got {size:,}")
            f.seek(0)
            data: bytes | bytearray = f.read()
        else:
            f.seek(0)
            inflated = bytearray()
            try:
                for chunk in iter_gunzip(f, budget, MAX_RATIO):
                    inflated += chunk
                    if len(inflated) > MAX_JSON_BYTES:
                        raise PredictionFormatError(
                            f"{name}: Expected at most {MAX_JSON_BYTES:,} bytes of JSON once decompressed "
                            "(use the binary .npz form for larger submissions), but it inflates to more")
            except inflate.ERRORS:
                raise PredictionFormatError(f"{name}: Expected a valid gzip file, but got {CORRUPT_COMPRESSED}") from None
            data = inflated  # not copied into bytes: up to MAX_JSON_BYTES
    return data[len(_BOM):] if data.startswith(_BOM) else data


def _plain(path: Path) -> bool:
    """Whether the file is JSON text as it is (not gzip, no BOM) within ``MAX_JSON_BYTES``, not empty."""
    try:
        size = path.stat().st_size
        with open(path, "rb") as f:
            head = f.read(len(_BOM))
    except OSError:
        return False
    return 0 < size <= MAX_JSON_BYTES and not head.startswith(_GZIP_MAGIC) and not head.startswith(_BOM)


def decode(data: bytes | bytearray, name: str) -> str:
    """The bytes as text, refusing what is not UTF-8."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise PredictionFormatError(
            f"{name}: Expected UTF-8 JSON text, but got the byte 0x{exc.object[exc.start]:02x} "
            f"at offset {exc.start}") from None


def parse(text: str, name: str) -> Any:
    """The JSON value, depth-limited; an object is parsed again to refuse repeated keys."""
    try:
        parsed = loads_json(text, name)
        if isinstance(parsed, dict):
            # Only the object form can repeat a sample id; check it on a second,
            # slower parse (a duplicate-key hook slows the common list form by 30%).
            loads_json(text, name, object_pairs_hook=_no_duplicate_keys)
    except json.JSONDecodeError as exc:
        raise PredictionFormatError(
            f"{name}: Expected a JSON file (optionally gzip), but it does not parse: a syntax error at "
            f"line {exc.lineno}, column {exc.colno}: {exc.msg}") from None
    except _DuplicateKey as exc:
        raise PredictionFormatError(
            where(name, f"sample {clip(str(exc))}", "Expected each sample_id once, but it appears twice")
        ) from None
    return parsed


class _DuplicateKey(ValueError):
    pass


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _DuplicateKey(key)
            seen.add(key)
    return out


def load(path: Path, known: dict[str, int], budget: Budget) -> Predictions:
    """Read and check a JSON predictions file against the label sample ids.

    Args:
        path: the predictions file.
        known: sample id -> label index.
        budget: the submission's inflated-bytes budget (names the file).

    Raises:
        PredictionFormatError: naming the file, the item or sample, and the field.
    """
    name = budget.file
    path = Path(path)
    plain = _plain(path)
    cap = entry_cap(len(known))  # one entry per sample is valid (unknown and repeated ids are refused)
    flat = json_arrays.read_file(path, cap) if plain else None
    data = b"" if flat is not None else read_bytes(path, budget)
    if flat is None and not plain:  # gzip or a BOM: the bytes read (a plain file was tried above)
        flat = json_arrays.read(data, cap)
    if flat is not None:
        order = check_ids(flat.ids, known, name, lambda i: f"item {i + 1}")
        return _predictions(order, flat.ids, flat.counts, flat.boxes, flat.scores, known, name,
                            ignored_keys_warning(name, flat.with_unknown, flat.unknown))
    text = decode(data, name)
    del data
    # A file with more entries than samples is refused by their count, before it becomes Python objects.
    past = entries_past(text, cap) if text.count(",") >= cap else None
    if past is not None:
        raise PredictionFormatError(where(name, f"Expected at most {len(known):,} samples (one per sample_id of "
                                                f"the labels), but got more than {cap:,} {past}"))
    raw = parse(text, name)
    # Booleans pass numpy's float conversion (true -> 1.0); look for them only
    # when the text has the words at all.
    may_have_bools = "true" in text or "false" in text
    del text
    return read_values(raw, may_have_bools, known, name)


def read_values(raw: Any, may_have_bools: bool, known: dict[str, int], name: str) -> Predictions:
    """Any parsed JSON value: every rule checked, and the first broken one worded.

    ``may_have_bools``: whether the text holds ``true`` or ``false`` (booleans are then looked for).
    """
    ids: list[Any]
    items: list[Any]
    if isinstance(raw, dict):
        ids, items = list(raw), list(raw.values())
        allowed = _ITEM_KEYS

        def location(i: int) -> str:
            return f"sample {clip(str(ids[i]))}"
    elif isinstance(raw, list):
        items = raw
        ids = []
        for i, item in enumerate(items, 1):
            if not isinstance(item, dict):
                raise PredictionFormatError(
                    where(name, f"item {i}", f"Expected an object, but got {_kind(item)}"))
            if "sample_id" not in item:
                raise PredictionFormatError(
                    where(name, f"item {i}", "Expected a key `sample_id`, but it is missing"))
            ids.append(item["sample_id"])
        allowed = _ITEM_KEYS | {"sample_id"}

        def location(i: int) -> str:
            return f"item {i + 1}"
    else:
        raise PredictionFormatError(where(name, f"Expected a JSON list or object, but got {_kind(raw)}"))

    order = check_ids(ids, known, name, location)
    counts = np.zeros(len(items), dtype=np.int64)
    flat_boxes: list[Any] = []
    flat_scores: list[Any] = []
    unknown: set[str] = set()
    with_unknown = 0
    for i, (sid, item) in enumerate(zip(ids, items)):
        at = f"sample {clip(sid)}"
        if not isinstance(item, dict):
            raise PredictionFormatError(where(name, at, f"Expected an object, but got {_kind(item)}"))
        if len(item) != len(allowed) or not allowed.issuperset(item):
            extra = item.keys() - allowed
            if extra:
                unknown |= extra
                with_unknown += 1
        boxes, scores = item.get("pred_bboxes"), item.get("pred_scores")
        if not isinstance(boxes, list):
            raise PredictionFormatError(
                where(name, at, "pred_bboxes", f"Expected a list of boxes, but got {_kind(boxes)}"))
        if not isinstance(scores, list):
            raise PredictionFormatError(
                where(name, at, "pred_scores", f"Expected a list of numbers, but got {_kind(scores)}"))
        if scores and isinstance(scores[0], list):
            scores = _column(scores, name, at)
        if len(boxes) != len(scores):
            raise PredictionFormatError(
                where(name, at, f"Expected `pred_scores` to have one score per box, but got "
                                f"{_many(len(scores), 'score')} for {_many(len(boxes), 'box')}"))
        if len(boxes) > MAX_BOXES_PER_PROMPT:
            raise PredictionFormatError(
                where(name, at, "pred_bboxes",
                      f"Expected at most {MAX_BOXES_PER_PROMPT} boxes per prompt, but got {len(boxes)}"))
        counts[i] = len(boxes)
        flat_boxes.extend(boxes)
        flat_scores.extend(scores)

    ends = np.cumsum(counts)

    def sample_of(entry: int) -> str:
        return str(ids[entry])

    box_array = _numbers(flat_boxes, (len(flat_boxes), BOX_ARITY), ends, sample_of, name, "pred_bboxes",
                         may_have_bools)
    score_array = _numbers(flat_scores, (len(flat_scores),), ends, sample_of, name, "pred_scores",
                           may_have_bools)
    return _predictions(order, ids, counts, box_array, score_array, known, name,
                        ignored_keys_warning(name, with_unknown, unknown))


def _predictions(order: list[int], ids: list[Any], counts: np.ndarray, boxes: np.ndarray, scores: np.ndarray,
                 known: dict[str, int], name: str, warnings: list[str]) -> Predictions:
    """Checks the values (finite, sizes > 0) and gathers the file's content; ``counts`` boxes per item."""
    ends = np.cumsum(counts)
    check_values(boxes, scores, ends, lambda entry: str(ids[entry]), name)
    seen = set(ids)
    return Predictions(
        sample=np.repeat(np.asarray(order, dtype=np.int64), counts),
        boxes=boxes,
        scores=scores,
        missing=[sid for sid in known if sid not in seen],
        entries=len(ids),
        warnings=warnings,
    )


def _column(scores: list[Any], name: str, at: str) -> list[Any]:
    """(N, 1) scores as (N,), refusing any other nesting."""
    flat = []
    for value in scores:
        if not isinstance(value, list) or len(value) != 1:
            raise PredictionFormatError(
                where(name, at, "pred_scores",
                      f"Expected scores of shape (N,) or (N, 1), but got the element {short(value)}"))
        flat.append(value[0])
    return flat


def _numbers(
    flat: list[Any],
    shape: tuple[int, ...],
    ends: np.ndarray,
    sample_of: Any,
    name: str,
    field: str,
    may_have_bools: bool,
) -> np.ndarray:
    """``flat`` as a float64 array of ``shape``; on failure, name the first bad value.

    numpy alone would accept too much: strings that look like numbers become
    a string array (refused by dtype), booleans become 0.0/1.0 (searched for
    when the text mentions them).
    """
    try:
        array = np.asarray(flat)
    except (ValueError, TypeError, OverflowError):
        array = None
    if array is not None and array.size == 0:
        return np.zeros(shape, dtype=np.float64)
    if array is not None and array.shape == shape and array.dtype.kind in "fiu" and not (
        may_have_bools and _has_bool(flat)
    ):
        return array.astype(np.float64, copy=False)
    for row, value in enumerate(flat):
        at = f"sample {clip(sample_of(int(np.searchsorted(ends, row, side='right'))))}"
        if len(shape) == 2:
            if not isinstance(value, list) or len(value) != shape[1]:
                raise PredictionFormatError(
                    where(name, at, field,
                          f"Expected each box to be a list of {shape[1]} numbers, but got {short(value)}"))
            values = value
        else:
            values = [value]
        for item in values:
            if isinstance(item, bool) or not isinstance(item, (int, float)):
                raise PredictionFormatError(where(name, at, field, f"Expected numbers, but got {short(item)}"))
            if isinstance(item, int) and not _fits_float(item):
                raise PredictionFormatError(
                    where(name, at, field,
                          f"Expected numbers within float64 range, but got an integer of {item.bit_length()} bits"))
    # Every value is a plain number (e.g. integers beyond int64): convert them one by one.
    return np.array(flat, dtype=np.float64).reshape(shape)


def _fits_float(value: int) -> bool:
    try:
        float(value)
    except OverflowError:
        return False
    return True


def _has_bool(flat: list[Any]) -> bool:
    for value in flat:
        if type(value) is bool or (isinstance(value, list) and any(type(v) is bool for v in value)):
            return True
    return False


def _many(n: int, noun: str) -> str:
    """``1 box``, ``14 boxes``, ``0 scores``."""
    return f"{n:,} {noun}" if n == 1 else f"{n:,} {noun}{'es' if noun.endswith('x') else 's'}"


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean"}.get(
        type(value), type(value).__name__)
