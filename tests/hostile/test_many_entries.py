"""Issue 26: a file with more entries than the split has units is refused before it is read whole.

The 2.5-million-key object (32-37 MiB) used to cost 23 s and 1.1 GB in the process that validated
it. Every valid file has at most one entry per question (SQA3D) or sample (MMScan VG): unknown
and repeated ids are refused. So the count is checked first, one entry at a time, and a file with
far more (``limits.entry_cap``: twice as many plus 1,000) is refused with the count in words
before any Python object is built for the rest; one somewhat off keeps the message naming its ids.

Each case runs in a fresh interpreter; memory is its peak above the interpreter's after imports.
The bound the site states for a validation at upload (``VALIDATE_AT_UPLOAD_MAX_MEMORY``) is 256 MiB.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from evaluation_workers.tracks import mmscan_vg, sqa3d
from tests.hostile.peak import run_isolated

BOUND_MIB = 256
ENTRIES = 2_500_000
SQA3D_MANIFEST = {"track": "sqa3d", "question_ids": list(range(10**6, 10**6 + 3519)), "count": 3519}
MMSCAN_MANIFEST = {"track": "mmscan-vg", "sample_ids": [f"scene0000_00__{i}" for i in range(5000)]}


def _object_file(path: Path, entry: str) -> Path:
    """``{"0": <value>, "1": <value>, ...}`` with ENTRIES keys, written in blocks."""
    with open(path, "w") as f:
        f.write("{")
        for start in range(0, ENTRIES, 100_000):
            f.write(",".join(entry.format(i) for i in range(start, min(start + 100_000, ENTRIES))))
            f.write("," if start + 100_000 < ENTRIES else "}")
    return path


def test_a_2_5_million_key_sqa3d_object_is_refused_early_in_bounded_memory(tmp_path: Path) -> None:
    path = _object_file(tmp_path / "p.json", '"{}":"yes"')
    assert path.stat().st_size > 32 * 2**20
    result = run_isolated("evaluation_workers.tracks.sqa3d", "validate", str(path), SQA3D_MANIFEST, timeout=300)
    assert result.outcome == "rejected", result.message
    assert result.message == ("p.json: Expected at most 3,519 answers (one per question of this split), "
                              "but got more than 8,038 keys"), result.message
    assert result.extra_mib < BOUND_MIB, result.extra_mib


def test_a_2_5_million_key_mmscan_object_is_refused_early_in_bounded_memory(tmp_path: Path) -> None:
    path = _object_file(tmp_path / "p.json", '"s{}":{{}}')
    assert path.stat().st_size > 32 * 2**20
    result = run_isolated("evaluation_workers.tracks.mmscan_vg", "validate", str(path), MMSCAN_MANIFEST,
                          timeout=300)
    assert result.outcome == "rejected", result.message
    assert result.message == ("p.json: Expected at most 5,000 samples (one per sample_id of the labels), "
                              "but got more than 11,000 keys"), result.message
    assert result.extra_mib < BOUND_MIB, result.extra_mib


SMALL_SQA3D = {"track": "sqa3d", "question_ids": [11, 12, 13], "count": 3}
PAST = range(11, 11 + 1_007)  # one past the cap of 3 questions or samples (1,006)
SMALL_MMSCAN = {"track": "mmscan-vg", "sample_ids": ["a", "b", "c"]}
_ITEM = {"pred_bboxes": [], "pred_scores": []}

TOO_MANY = [
    ("sqa3d list", sqa3d.validate, SMALL_SQA3D, "p.json",
     json.dumps([{"question_id": q, "answer": "x"} for q in PAST]),
     "p.json: Expected at most 3 answers (one per question of this split), but got more than 1,006 items"),
    ("sqa3d object", sqa3d.validate, SMALL_SQA3D, "p.json", json.dumps({str(q): "x" for q in PAST}),
     "p.json: Expected at most 3 answers (one per question of this split), but got more than 1,006 keys"),
    ("sqa3d lines", sqa3d.validate, SMALL_SQA3D, "p.jsonl",
     "\n".join(json.dumps({"question_id": q, "answer": "x"}) for q in PAST),
     "p.jsonl: Expected at most 3 answers (one per question of this split), but got more than 1,006 lines"),
    ("mmscan list", mmscan_vg.validate, SMALL_MMSCAN, "p.json",
     json.dumps([{"sample_id": f"s{i}", **_ITEM} for i in PAST]),
     "p.json: Expected at most 3 samples (one per sample_id of the labels), but got more than 1,006 items"),
    ("mmscan object", mmscan_vg.validate, SMALL_MMSCAN, "p.json", json.dumps({f"s{i}": _ITEM for i in PAST}),
     "p.json: Expected at most 3 samples (one per sample_id of the labels), but got more than 1,006 keys"),
]


@pytest.mark.parametrize(("case", "validate", "manifest", "name", "text", "message"), TOO_MANY,
                         ids=[c[0] for c in TOO_MANY])
def test_more_entries_than_the_split_has_are_refused_by_their_count(
        tmp_path: Path, case: str, validate: object, manifest: dict[str, object], name: str, text: str,
        message: str) -> None:
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(sqa3d.predictions.PredictionFormatError, match=f"^{re.escape(message)}$"):
        validate(path, manifest)  # type: ignore[operator]


def test_a_file_within_the_cap_keeps_the_message_naming_its_ids(tmp_path: Path) -> None:
    path = tmp_path / "p.json"
    path.write_text(json.dumps({str(q): "x" for q in range(11, 11 + 1_006)}))
    with pytest.raises(sqa3d.predictions.PredictionFormatError, match=r"got 1003 unknown: 14, 15, 16"):
        sqa3d.validate(path, SMALL_SQA3D)


def test_a_one_line_json_lines_file_with_many_extra_keys_is_still_one_answer(tmp_path: Path) -> None:
    path = tmp_path / "p.json"
    path.write_text(json.dumps({"question_id": 11, "answer": "x", **{f"k{i}": i for i in range(2_000)}}))
    assert sqa3d.validate(path, SMALL_SQA3D)["answered"] == 1
