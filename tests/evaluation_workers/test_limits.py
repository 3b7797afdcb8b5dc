"""The decoder budgets: gzip inflation, npy headers, JSON depth."""

from __future__ import annotations

import gzip
import io
import json

import numpy as np
import pytest

from evaluation_workers.errors import PredictionFormatError
from evaluation_workers.limits import Budget, loads_json, npy_header, read_maybe_gzip, read_npy


def test_it_inflates_gzip_within_the_budget(tmp_path):
    path = tmp_path / "a.json.gz"
    path.write_bytes(gzip.compress(b"[1, 2, 3]" * 1000) + gzip.compress(b" "))
    assert read_maybe_gzip(path, Budget(10_000, "a.json.gz")) == b"[1, 2, 3]" * 1000 + b" "


def test_it_stops_inflating_at_the_first_byte_past_the_budget(tmp_path):
    path = tmp_path / "bomb.json.gz"
    path.write_bytes(gzip.compress(b"\0" * 50_000_000))
    budget = Budget(5_000_000, "bomb.json.gz")
    with pytest.raises(PredictionFormatError, match="bomb.json.gz: Expected at most 5,000,000 bytes"):
        read_maybe_gzip(path, budget)
    assert budget.used <= 5_000_000 + (1 << 20)


def test_it_names_a_truncated_gzip_stream(tmp_path):
    path = tmp_path / "cut.json.gz"
    path.write_bytes(gzip.compress(np.random.default_rng(0).bytes(100_000))[:2000])
    with pytest.raises(PredictionFormatError, match="truncated"):
        read_maybe_gzip(path, Budget(1 << 20, "cut.json.gz"))


def _npy_with_shape(shape: str, dtype: str = "<f8") -> io.BytesIO:
    header = f"{{'descr': '{dtype}', 'fortran_order': False, 'shape': {shape}, }}"
    header += " " * (63 - len(header) % 64) + "\n"
    return io.BytesIO(b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header.encode() + b"\0" * 64)


@pytest.mark.parametrize("shape, message", [
    ("(-1,)", "non-negative"),
    ("(4294967296, 4294967296)", "at most 1,000 elements"),
    ("(10, 200)", "at most 1,000 elements"),
])
def test_it_refuses_npy_headers_before_reading_data(shape, message):
    with pytest.raises(PredictionFormatError, match=message):
        npy_header(_npy_with_shape(shape), "x.npz: pred_masks", 1000)


def test_it_refuses_pickled_npy():
    buf = io.BytesIO()
    np.save(buf, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    buf.seek(0)
    with pytest.raises(PredictionFormatError, match="pickled arrays are not accepted"):
        npy_header(buf, "x.npz: pred_scores", 1000)


def test_it_reads_a_valid_npy_and_charges_its_payload():
    buf = io.BytesIO()
    np.save(buf, np.arange(12, dtype=np.int32).reshape(3, 4))
    buf.seek(0)
    budget = Budget(1000, "x")
    arr = read_npy(buf, "x", 100, budget)
    assert arr.tolist() == np.arange(12).reshape(3, 4).tolist() and budget.used == 48


def _numpy_reads(data: bytes) -> tuple[tuple[int, ...], bool, np.dtype]:
    """The header as numpy's own parser reads it."""
    f = io.BytesIO(data)
    version = np.lib.format.read_magic(f)
    read = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
    return read(f)


ARRAYS = [np.zeros((150, 100), np.uint8), np.zeros(5), np.zeros(()), np.zeros((3, 4), order="F"),
          np.array(["ab", "c"]), np.zeros((2, 0, 3), ">i2"), np.ones(7, np.bool_), np.zeros(3, "<U10"),
          np.zeros(2, dtype=[("a", "<i4")]), np.zeros(3, "<M8[ns]"), np.zeros(4, np.complex64)]


@pytest.mark.parametrize("array", ARRAYS, ids=[str(a.dtype) + str(a.shape) for a in ARRAYS])
@pytest.mark.parametrize("version", [(1, 0), (2, 0)])
def test_npy_headers_read_as_numpy_reads_them_and_leave_the_stream_at_the_payload(array, version) -> None:
    """Plain headers go through a pattern, others (structured, datetime) through numpy's parser."""
    buf = io.BytesIO()
    np.lib.format.write_array(buf, array, version=version)
    data = buf.getvalue()
    stream = io.BytesIO(data + b"tail")
    shape, fortran, dtype = npy_header(stream, "x.npz: a", 1 << 20)
    assert (shape, fortran, dtype) == _numpy_reads(data)
    assert stream.read() == data[len(data) - array.nbytes:] + b"tail"


@pytest.mark.parametrize("header", [
    "{'descr': '<f8', 'fortran_order': False, 'shape': (3,), 'extra': 1, }",  # numpy refuses the keys
    "{'descr': '<f8', 'fortran_order': False, 'shape': (3,),}",  # no space before the brace: numpy reads it
    "{'shape': (3,), 'fortran_order': False, 'descr': '<f8', }",  # another key order: numpy reads it
    "{'descr': '<q9', 'fortran_order': False, 'shape': (3,), }",  # an unknown type
    "{'descr': '<f8', 'fortran_order': 1, 'shape': (3,), }",
])
def test_headers_off_the_plain_pattern_get_numpys_verdict(header: str) -> None:
    header += " " * (63 - len(header) % 64) + "\n"
    data = b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header.encode() + b"\0" * 24
    try:
        want = _numpy_reads(data)
    except (ValueError, TypeError):
        with pytest.raises(PredictionFormatError, match="Expected a valid .npy array"):
            npy_header(io.BytesIO(data), "x.npz: a", 1000)
        return
    assert npy_header(io.BytesIO(data), "x.npz: a", 1000) == want


def test_a_truncated_npy_payload_is_named():
    with pytest.raises(PredictionFormatError, match="truncated"):
        read_npy(_npy_with_shape("(100,)"), "x.npz: pred_scores", 1000, Budget(10_000, "x"))


@pytest.mark.parametrize("text", ['[[[["a[", "\\"]]]]"]]]]', '{"a": [1, {"b": "[[[[[[[["}]}'])
def test_json_depth_ignores_brackets_inside_strings(text):
    assert loads_json(text, "f.json") == json.loads(text)


def test_deep_json_is_refused_with_a_message_not_a_recursion_error():
    with pytest.raises(PredictionFormatError, match="f.json: Expected JSON nested at most 32 levels"):
        loads_json("[" * 10_000 + "]" * 10_000, "f.json")
    assert loads_json("[" * 32 + "]" * 32, "f.json") is not None


@pytest.mark.parametrize("escapes", [True, False], ids=["with escapes", "without (the structure-only pass)"])
def test_the_nesting_scan_agrees_with_the_parsed_depth_of_json_full_of_brackets_in_strings(escapes: bool) -> None:
    import json
    import random

    from evaluation_workers.limits import _depth_exceeds

    rng = random.Random(7)
    leaves = ["[", "]{", '"\\"]', "\\\\[", "a}", 1, 2.5, None] if escapes else ["[", "]{", "a}", "{[x", 1, 2.5, None]
    keys = ["[k", "}", "x\\"] if escapes else ["[k", "}", "x]"]

    def value(depth: int):  # type: ignore[no-untyped-def]
        if depth == 0 or rng.random() < 0.3:
            return rng.choice(leaves)
        if rng.random() < 0.5:
            return [value(depth - 1) for _ in range(rng.randint(0, 3))]
        return {rng.choice(keys): value(depth - 1) for _ in range(rng.randint(0, 3))}

    def nesting(v) -> int:  # type: ignore[no-untyped-def]
        if isinstance(v, list):
            return 1 + max((nesting(x) for x in v), default=0)
        if isinstance(v, dict):
            return 1 + max((nesting(x) for x in v.values()), default=0)
        return 0

    for _ in range(3000):
        doc = value(rng.randint(0, 9))
        text = json.dumps(doc)
        assert escapes or "\\" not in text
        for limit in (1, 3, 6):
            assert _depth_exceeds(text, limit) == (nesting(doc) > limit), (text, limit)
