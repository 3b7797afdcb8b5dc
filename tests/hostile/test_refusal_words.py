"""Damaged files are refused in the submitter's words: the file, what was expected, never a library's text.

The readers' libraries word damage in their own terms ("negative seek position" for a zip shorter
than its directory, zipfile's "BadZipFile: File is not a zip file", zlib's "Error -3 while
decompressing data", Python's "Exceeds the limit (4300 digits) ... sys.set_int_max_str_digits()");
none of that may reach a submission page.
"""

from __future__ import annotations

import gzip
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from evaluation_workers.errors import PredictionFormatError
from evaluation_workers.tracks import get_track
from tests.hostile.files import npz_members, write_npz
from tests.hostile.openscan_files import MANIFEST as OPENSCAN
from tests.hostile.openscan_files import S0, scene_npz, valid_official, write_zip

SQA3D = {"track": "sqa3d", "question_ids": [11, 12], "count": 2}
MMSCAN = {"track": "mmscan-vg", "sample_ids": ["scene0000_00__0", "scene0000_00__1", "scene0000_00__2"]}
LIBRARY_WORDS = ("seek", "BadZipFile", "File is not a zip file", "Error -3", "while decompressing",
                 "Exceeds the limit", "set_int_max_str_digits", "ValueError", "zlib")
HUGE = "1" + "0" * 5000


def _bytes(name: str, data: bytes) -> Callable[[Path], Path]:
    def write(folder: Path) -> Path:
        path = folder / name
        path.write_bytes(data)
        return path
    return write


def _corrupt_deflate(path: Path) -> Path:
    """Overwrite the start of the first member's deflate stream (its local header stays valid)."""
    data = bytearray(path.read_bytes())
    name_len, extra_len = int.from_bytes(data[26:28], "little"), int.from_bytes(data[28:30], "little")
    start = 30 + name_len + extra_len
    data[start : start + 32] = b"\xff" * 32
    path.write_bytes(bytes(data))
    return path


def _half(path: Path) -> Path:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    return path


CASES: list[tuple[str, str, dict, Callable[[Path], Path], str]] = [
    ("openscan", "a zip shorter than its directory", OPENSCAN, _bytes("p.zip", b"hello"),
     r"^p\.zip: Expected a zip archive.*, but got no readable zip directory"),
    ("openscan", "half a zip", OPENSCAN, lambda d: _half(valid_official(d, deflate=True)),
     r"^p\.zip: Expected a zip archive.*, but got no readable zip directory"),
    ("openscan", "a scene file shorter than a zip directory", OPENSCAN,
     lambda d: write_zip(d / "p.zip", {f"material/{S0}.npz": b"hello"}),
     rf"^p\.zip: material/{S0}\.npz: Expected a zip archive, but got no readable zip directory"),
    ("openscan", "corrupt deflate data", OPENSCAN,
     lambda d: _corrupt_deflate(write_zip(d / "p.zip", {f"material/{S0}.npz": scene_npz()}, deflate=True)),
     rf"^p\.zip: material/{S0}\.npz: Expected valid deflate data, but got corrupt compressed data"),
    ("mmscan-vg", "an integer of 5,001 digits", MMSCAN,
     _bytes("p.json", f'[{{"sample_id": "scene0000_00__0", "pred_bboxes": [[{HUGE}, 0, 0, 1, 1, 1, 0, 0, 0]], '
                      f'"pred_scores": [0.5]}}]'.encode()),
     r"^p\.json: Expected integers of at most 4,300 digits, but got a longer one$"),
    ("mmscan-vg", "corrupt gzip", MMSCAN, _bytes("p.json.gz", b"\x1f\x8b\x08\x00" + b"\x00" * 200),
     r"^p\.json\.gz: Expected a valid gzip file, but got corrupt compressed data"),
    ("mmscan-vg", "gzip with a wrong length", MMSCAN, _bytes("p.json.gz", gzip.compress(b"[]")[:-4] + b"\0" * 4),
     r"^p\.json\.gz: Expected a valid gzip file, but got corrupt compressed data"),
    ("mmscan-vg", "half an npz", MMSCAN,
     lambda d: _half(write_npz(d / "p.npz", npz_members(MMSCAN["sample_ids"], [2, 0, 3]))),
     r"^p\.npz: Expected a valid \.npz \(zip\) file, but got no readable zip directory"),
    ("mmscan-vg", "corrupt deflate in an npz", MMSCAN,
     lambda d: _corrupt_deflate(write_npz(d / "p.npz", npz_members(MMSCAN["sample_ids"], [2, 0, 3]), compress=True)),
     r"^p\.npz: Expected a valid \.npz \(zip\) file, but got corrupt compressed data"),
    ("sqa3d", "an integer of 5,001 digits in a list", SQA3D,
     _bytes("p.json", f'[{{"question_id": {HUGE}, "answer": "x"}}]'.encode()),
     r"^p\.json: Expected integers of at most 4,300 digits, but got a longer one$"),
    ("sqa3d", "an integer of 5,001 digits on a line", SQA3D,
     _bytes("p.jsonl", f'{{"question_id": 11, "answer": "x"}}\n{{"question_id": {HUGE}, "answer": "y"}}\n'.encode()),
     r"^p\.jsonl: line 2: Expected integers of at most 4,300 digits, but got a longer one$"),
]


@pytest.mark.parametrize(("track", "case", "manifest", "write", "expected"), CASES, ids=[c[1] for c in CASES])
def test_it_names_the_file_and_what_was_expected(tmp_path: Path, track: str, case: str, manifest: dict,
                                                 write: Callable[[Path], Path], expected: str) -> None:
    path = write(tmp_path)
    with pytest.raises(PredictionFormatError) as refused:
        get_track(track).validate(path, manifest)
    message = refused.value.message
    assert not [w for w in LIBRARY_WORDS if w in message], message
    assert re.search(expected, message), message

