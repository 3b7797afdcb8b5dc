"""Issue 26: the web process validates an upload in a child process under a memory cap and a time limit.

The web process's own memory does not grow with the file (it receives a summary or a message), and a
child that needs more than its cap, or more time than the limit, leaves the file to the worker.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evaluation_workers import isolated
from evaluation_workers.errors import PredictionFormatError
from tests.hostile.peak import run_isolated
from tests.hostile.test_many_entries import BOUND_MIB, SQA3D_MANIFEST, _object_file

MANIFEST = {"track": "sqa3d", "question_ids": [11, 12, 13], "count": 3}


def test_the_web_side_of_a_2_5_million_key_file_stays_small_and_gets_the_specific_refusal(tmp_path: Path) -> None:
    path = _object_file(tmp_path / "p.json", '"{}":"yes"')
    result = run_isolated("evaluation_workers.isolated", "validate", "sqa3d", str(path), SQA3D_MANIFEST,
                          BOUND_MIB * 2**20, 120, timeout=300)
    assert result.outcome == "rejected", result.message
    assert result.message == ("p.json: Expected at most 3,519 answers (one per question of this split), "
                              "but got more than 8,038 keys")
    assert result.extra_mib < 32, result.extra_mib  # the caller holds neither the file nor its parse


def test_it_returns_the_tracks_summary_and_refusals_unchanged(tmp_path: Path) -> None:
    good, bad = tmp_path / "good.json", tmp_path / "bad.json"
    good.write_text(json.dumps({"11": "left", "12": "two"}))
    bad.write_text(json.dumps([{"question_id": 11, "answer": 3}]))
    assert isolated.validate("sqa3d", good, MANIFEST) == {
        "format": "object", "answered": 2, "missing": 1, "count": 3,
        "warnings": ["1 of 3 questions have no prediction; they count as wrong."]}
    with pytest.raises(PredictionFormatError, match=r"^bad.json: item 1: Expected `answer` to be a string, but got 3$"):
        isolated.validate("sqa3d", bad, MANIFEST)


def test_a_validation_past_its_memory_cap_is_left_to_the_worker(tmp_path: Path) -> None:
    path = tmp_path / "p.json"
    path.write_text(json.dumps({"11": "x" * (40 * 2**20)}))  # a 40 MiB answer: read, decoded, parsed
    with pytest.raises(isolated.OutOfBounds, match="memory"):
        isolated.validate("sqa3d", path, MANIFEST, max_memory=16 * 2**20)


def test_a_validation_past_its_time_limit_is_left_to_the_worker(tmp_path: Path) -> None:
    path = _object_file(tmp_path / "p.json", '"{}":"yes"')
    with pytest.raises(isolated.OutOfBounds, match="0.01 s"):
        isolated.validate("sqa3d", path, SQA3D_MANIFEST, timeout=0.01)
