"""Hostile MMScan VG prediction files: each is refused with a specific message, cheaply.

Every case runs ``validate`` (what the web process calls) in a fresh
interpreter and checks the message and the peak memory above the
interpreter's after imports. Files are written at test time.
"""

from __future__ import annotations

import gzip
import json
import re
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from tests.hostile.files import BOX, deep, dumps, gzip_bomb, npy_bytes, npz_members, write_npz
from tests.hostile.peak import run_isolated

MODULE = "evaluation_workers.tracks.mmscan_vg"
IDS = [f"scene0000_00__{i}" for i in range(8)] + ["scène_1", "场景_2"]
MANIFEST = {"track": "mmscan-vg", "sample_ids": IDS}
MAX_EXTRA_MIB = 64


def _item(sid: str = IDS[0], boxes: object = None, scores: object = None) -> dict[str, object]:
    boxes = [BOX] if boxes is None else boxes
    return {"sample_id": sid, "pred_bboxes": boxes,
            "pred_scores": [0.5] * len(boxes) if scores is None else scores}  # type: ignore[arg-type]


def _box_text(box: str) -> bytes:
    return f'[{{"sample_id": "{IDS[0]}", "pred_bboxes": [{box}], "pred_scores": [0.5]}}]'.encode()


def _npz(members: dict[str, bytes]) -> Callable[[Path], Path]:
    return lambda path: write_npz(path.with_suffix(".npz"), members)


def _npz_with(**changes: bytes) -> Callable[[Path], Path]:
    members = npz_members(IDS[:3], [2, 0, 3])
    members.update(changes)
    return _npz(members)


def _bytes(data: bytes) -> Callable[[Path], Path]:
    def write(path: Path) -> Path:
        path.write_bytes(data)
        return path
    return write


def _damaged_npz(damage: str) -> Callable[[Path], Path]:
    """A compressed npz (np.savez_compressed's form) whose ``pred_bboxes`` member is damaged: its recorded
    CRC-32 changed ("crc"), or bytes in the middle of its deflate stream overwritten ("data")."""
    def write(path: Path) -> Path:
        path = write_npz(path.with_suffix(".npz"), npz_members(IDS[:3], [400, 300, 300]), compress=True)
        data = bytearray(path.read_bytes())
        name = b"pred_bboxes.npy"
        local = data.find(b"PK\x03\x04")
        while data[local + 30 : local + 30 + len(name)] != name:
            local = data.find(b"PK\x03\x04", local + 4)
        central = data.find(b"PK\x01\x02")
        while data[central + 46 : central + 46 + len(name)] != name:
            central = data.find(b"PK\x01\x02", central + 4)
        if damage == "crc":
            for at in (local + 14, central + 16):
                data[at : at + 4] = bytes(b ^ 0x5A for b in data[at : at + 4])
        else:
            size = int.from_bytes(data[local + 18 : local + 22], "little")
            start = local + 30 + int.from_bytes(data[local + 26 : local + 28], "little") + int.from_bytes(
                data[local + 28 : local + 30], "little")
            data[start + size // 2 : start + size // 2 + 16] = b"\xff" * 16
        path.write_bytes(bytes(data))
        return path
    return write


def _offsets(values: list[int], dtype: str = "<i8") -> bytes:
    return npy_bytes(np.array(values, dtype=dtype))


REJECTED: list[tuple[str, Callable[[Path], Path], str]] = [
    ("gzip bomb", lambda p: gzip_bomb(p.with_suffix(".json.gz")), r"compression ratio of at most 100 to 1"),
    ("truncated gzip", _bytes(gzip.compress(dumps([_item()]) * 2000)[:300]), r"truncated"),
    ("corrupt gzip", _bytes(b"\x1f\x8b\x08\x00" + b"\xff" * 200), r"Expected a valid gzip file, but got corrupt compressed data"),
    ("deep arrays", _bytes(deep("[", "]")), r"nested at most 32 levels"),
    ("deep objects", _bytes(b'{"a":' * 10_000 + b"1" + b"}" * 10_000), r"nested at most 32 levels"),
    ("NaN literal", _bytes(_box_text("[0, 0, NaN, 1, 1, 1, 0, 0, 0]")), r"pred_bboxes: Expected finite numbers"),
    ("Infinity score", _bytes(dumps([_item()]).replace(b"0.5]", b"Infinity]")), r"pred_scores: Expected finite"),
    ("box of 8", _bytes(_box_text("[0, 0, 0, 1, 1, 1, 0, 0]")), r"list of 9 numbers, but got \[0, 0"),
    ("box of 10", _bytes(_box_text("[0, 0, 0, 1, 1, 1, 0, 0, 0, 0]")), r"list of 9 numbers"),
    ("string number", _bytes(_box_text('[0, 0, 0, "1.5", 1, 1, 0, 0, 0]')), r'Expected numbers, but got "1.5"'),
    ("boolean", _bytes(_box_text("[0, 0, 0, true, 1, 1, 0, 0, 0]")), r"Expected numbers, but got true"),
    ("nested list", _bytes(_box_text("[0, 0, 0, [1], 1, 1, 0, 0, 0]")), r"Expected numbers, but got \[1\]"),
    ("huge integer", _bytes(_box_text("[0, 0, 0, 1" + "0" * 400 + ", 1, 1, 0, 0, 0]")), r"float64 range"),
    ("5000 digits", _bytes(_box_text("[0, 0, 0, 1" + "0" * 5000 + ", 1, 1, 0, 0, 0]")),
     r"Expected integers of at most 4,300 digits, but got a longer one$"),
    ("zero size", _bytes(_box_text("[0, 0, 0, 1, 0, 1, 0, 0, 0]")), r"sizes \(items 4-6 of a box\) > 0"),
    ("duplicate id", _bytes(dumps([_item(), _item()])), r"sample scene0000_00__0: .*appears twice"),
    ("duplicate key", _bytes(b'{"%s": {}, "%s": {}}' % (IDS[0].encode(), IDS[0].encode())), r"appears twice"),
    ("unknown id", _bytes(dumps([_item("scene9999_00__0")])), r"sample scene9999_00__0: .*unknown"),
    ("missing sample_id", _bytes(dumps([_item(), {"pred_bboxes": [], "pred_scores": []}])),
     r"item 2: Expected a key `sample_id`, but it is missing"),
    ("sample_id not a string", _bytes(dumps([{"sample_id": 7, "pred_bboxes": [], "pred_scores": []}])),
     r"item 1: Expected `sample_id` to be a string, but got 7"),
    ("0 bytes", _bytes(b""), r"empty file \(0 bytes\)"),
    ("non-UTF-8", _bytes(b'[{"sample_id": "\xff"}]'), r"Expected UTF-8 JSON text, but got the byte 0xff"),
    ("too many boxes", _bytes(dumps([_item(boxes=[[0, 0, 0, 1, 1, 1, 0, 0, 0]] * 60_000)])),
     r"Expected at most 1000 boxes per prompt, but got 60000"),
    ("scores (N, 2)", _bytes(dumps([_item(scores=[[0.5, 0.4]])])), r"shape \(N,\) or \(N, 1\)"),
    ("pickled npz", _npz_with(sample_id=npy_bytes(np.array(IDS[:3], dtype=object))),
     r"sample_id: Expected numbers, but got Python objects \(pickled arrays are not accepted\)"),
    ("npy shape (-1,)", _npz_with(offsets=npy_bytes(header="{'descr': '<i8', 'fortran_order': False, "
                                                            "'shape': (-1,), }")), r"offsets: .*non-negative"),
    ("npy overflowing shape", _npz_with(pred_bboxes=npy_bytes(header="{'descr': '<f8', 'fortran_order': False, "
                                                                    "'shape': (4611686018427387904, 9), }")),
     r"pred_bboxes: Expected at most 27,000 elements"),
    ("more prompts than labels", _npz(npz_members([f"x{i}" for i in range(11)], [1] * 11)),
     r"sample_id: Expected at most 10 elements"),
    ("offsets not from 0", _npz_with(offsets=_offsets([1, 3, 3, 5])), r"Expected offsets\[0\] = 0, but got 1"),
    ("offsets decreasing", _npz_with(offsets=_offsets([0, 3, 2, 5])),
     r"non-decreasing offsets, but offsets\[1\] = 3 > offsets\[2\] = 2"),
    ("offsets not ending at B", _npz_with(offsets=_offsets([0, 2, 2, 4])), r"offsets\[-1\] = B = 5"),
    ("offsets of floats", _npz_with(offsets=npy_bytes(np.array([0.0, 2, 2, 5]))),
     r"offsets: Expected a \(P\+1,\) = \(4,\) integer array, but got shape \(4,\) of float64"),
    ("boxes of 8 numbers", _npz_with(pred_bboxes=npy_bytes(np.ones((5, 8)))),
     r"pred_bboxes: Expected a \(5, 9\) float32 or float64 array, but got shape \(5, 8\)"),
    ("integer boxes", _npz_with(pred_bboxes=npy_bytes(np.ones((5, 9), dtype=np.int64))), r"but got shape .* int64"),
    ("scores (B, 1)", _npz_with(pred_scores=npy_bytes(np.ones((5, 1)))), r"pred_scores: Expected a \(5,\) float"),
    ("NaN box in npz", _npz_with(pred_bboxes=npy_bytes(np.array([BOX] * 4 + [[np.nan] * 9]))),
     r"sample scene0000_00__2: pred_bboxes: Expected finite numbers"),
    ("unicode duplicates", _npz(npz_members(["scène_1", "场景_2", "scène_1"], [1, 1, 1])),
     r"sample scène_1: Expected each sample_id once, but it appears twice"),
    ("bytes sample_id", _npz_with(sample_id=npy_bytes(np.array([b"a", b"b", b"c"]))), r"\(P,\) unicode array"),
    ("member missing", _npz({k: v for k, v in npz_members(IDS[:1], [1]).items() if k != "offsets"}),
     r"`offsets` is missing"),
    ("truncated npz", lambda p: _bytes(write_npz(p.with_suffix(".npz"), npz_members(IDS[:3], [2, 0, 3]))
                                       .read_bytes()[:700])(p.with_suffix(".npz")),
     r"Expected a valid .npz \(zip\) file, but got no readable zip directory"),
    ("per-prompt cap in npz", _npz(npz_members(IDS[:2], [1001, 1])), r"at most 1000 boxes per prompt, but got 1001"),
    ("compressed npz, CRC-32 altered", _damaged_npz("crc"), r"corrupt"),
    ("compressed npz, deflate data overwritten", _damaged_npz("data"), r"corrupt"),
]


@pytest.mark.parametrize(("case", "write", "message"), REJECTED, ids=[c[0] for c in REJECTED])
def test_it_refuses_hostile_files_cheaply(tmp_path: Path, case: str, write: Callable[[Path], Path],
                                          message: str) -> None:
    path = write(tmp_path / "predictions.json")
    assert path.stat().st_size < 3 * 2**20
    result = run_isolated(MODULE, "validate", str(path), MANIFEST)
    assert result.outcome == "rejected", result.message
    assert result.message.startswith(path.name + ": ")
    assert re.search(message, result.message), result.message
    assert result.extra_mib < MAX_EXTRA_MIB, (case, result.extra_mib)


ACCEPTED: list[tuple[str, Callable[[Path], Path]]] = [
    ("concatenated gzip members", _bytes(gzip.compress(b'[{"sample_id": "scene0000_00__0", ')
                                         + gzip.compress(b'"pred_bboxes": [], "pred_scores": []}]'))),
    ("BOM", _bytes(b"\xef\xbb\xbf" + dumps([_item()]))),
    ("devkit shape, extra keys", _bytes(dumps([dict(_item(scores=[[0.5]]), scan_id="scene0000_00", text="x")]))),
    ("stored npz", _npz(npz_members(IDS, [1] * 10))),
    ("compressed npz, float32", lambda p: write_npz(p.with_suffix(".npz"), npz_members(IDS, [2] * 10, "<f4"),
                                                    compress=True)),
]


@pytest.mark.parametrize(("case", "write"), ACCEPTED, ids=[c[0] for c in ACCEPTED])
def test_it_accepts_legitimate_oddities(tmp_path: Path, case: str, write: Callable[[Path], Path]) -> None:
    path = write(tmp_path / "predictions.json")
    result = run_isolated(MODULE, "validate", str(path), MANIFEST)
    assert result.outcome == "ok", result.message
    assert result.extra_mib < MAX_EXTRA_MIB


def test_it_reports_the_ignored_keys_once(tmp_path: Path) -> None:
    from evaluation_workers.tracks import mmscan_vg

    items = [dict(_item(sid), scan_id="scene0000_00", text="the chair") for sid in IDS]
    path = tmp_path / "p.json"
    path.write_text(json.dumps(items))
    assert mmscan_vg.validate(path, MANIFEST)["warnings"] == [
        "p.json: ignored unknown keys in 10 items: scan_id, text"]
