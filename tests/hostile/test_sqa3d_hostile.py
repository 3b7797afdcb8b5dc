"""Hostile SQA3D prediction files: a specific message each, at a bounded memory cost."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.hostile.files import deep
from tests.hostile.peak import run_isolated

MODULE = "evaluation_workers.tracks.sqa3d"
MANIFEST = {"track": "sqa3d", "question_ids": [11, 12, 13, 14, 15, 16], "count": 6}
MAX_EXTRA_MIB = 64

REJECTED: list[tuple[str, bytes, str]] = [
    ("0 bytes", b"", r"p.json: Expected a JSON list, a JSON object or JSON Lines, but got an empty file"),
    ("non-UTF-8", b'[{"question_id": 11, "answer": "\xc3\x28"}]', r"Expected UTF-8 text, but got the byte 0xc3"),
    ("deep arrays", deep("[", "]"), r"p.json: Expected JSON nested at most 32 levels deep"),
    ("deep objects", b'{"a":' * 10_000 + b"1" + b"}" * 10_000, r"nested at most 32 levels"),
    ("deep line of JSON Lines", b'{"question_id": 11, "answer": "x"}\n' + deep("[", "]"),
     r"p.json: Expected JSON nested at most 32 levels"),
    ("huge float id", b'[{"question_id": 1e999, "answer": "x"}]', r"`question_id` to be an integer, but got Infinity"),
    ("huge integer id", b'[{"question_id": 1' + b"0" * 4000 + b', "answer": "x"}]',
     r"1 unknown: an integer of 4001 digits"),
    ("5000 digits", b'[{"question_id": 1' + b"0" * 5000 + b', "answer": "x"}]',
     r"p.json: Expected integers of at most 4,300 digits, but got a longer one$"),
    ("NaN id", b'[{"question_id": NaN, "answer": "x"}]', r"item 1: Expected `question_id` to be an integer, but got NaN"),
    ("NaN answer", b'{"11": NaN}', r'key "11": Expected `answer` to be a string, but got NaN'),
    ("duplicate id", b'[{"question_id": 11, "answer": "x"}, {"question_id": 11, "answer": "y"}]',
     r"item 2: Expected each question once, but question 11 was already answered at item 1"),
    ("unknown id", b'[{"question_id": 99, "answer": "x"}]', r"1 unknown: 99"),
    ("answer of a list", b'[{"question_id": 11, "answer": ["x"]}]', r"`answer` to be a string, but got a list"),
    ("id of a string", b'[{"question_id": "11", "answer": "x"}]', r'to be an integer, but got "11"'),
    ("id of a boolean", b'[{"question_id": true, "answer": "x"}]', r"to be an integer, but got true"),
    ("not JSON", b"\x1f\x8b\x08\x00garbage", r"Expected UTF-8 text|syntax error"),
]


@pytest.mark.parametrize(("case", "content", "message"), REJECTED, ids=[c[0] for c in REJECTED])
def test_it_refuses_hostile_files_cheaply(tmp_path: Path, case: str, content: bytes, message: str) -> None:
    path = tmp_path / "p.json"
    path.write_bytes(content)
    result = run_isolated(MODULE, "validate", str(path), MANIFEST)
    assert result.outcome == "rejected", result.message
    assert re.search(message, result.message), result.message
    assert result.extra_mib < MAX_EXTRA_MIB, (case, result.extra_mib)


def test_it_accepts_a_bom_and_extra_keys(tmp_path: Path) -> None:
    path = tmp_path / "p.json"
    path.write_bytes(b'\xef\xbb\xbf[{"question_id": 11, "answer": "x", "scene_id": "scene0000_00"}]')
    result = run_isolated(MODULE, "validate", str(path), MANIFEST)
    assert result.outcome == "ok", result.message
