"""Hostile OpenScan files: each is refused with a specific message, at a bounded memory cost.

Every case runs in a fresh interpreter (``peak.run_isolated``) so that its
peak resident memory (VmHWM) can be measured; ``extra_mib`` is that peak above
the interpreter's after imports.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.hostile.openscan_files import CASES, MANIFEST
from tests.hostile.peak import run_isolated

MAX_EXTRA_MIB = 64
BUDGET_CASE = "past the submission budget"


@pytest.mark.parametrize("case", list(CASES))
def test_it_refuses_the_file_cheaply(case: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    build, expected = CASES[case]
    if case == BUDGET_CASE:
        monkeypatch.setenv("EVAL_MAX_INFLATED_BYTES_OPENSCAN", str(8 * 2**20))
    path = build(tmp_path)
    assert path.stat().st_size <= 3 * 2**20 + 2**18, "keep hostile inputs small"
    out = run_isolated("evaluation_workers.tracks.openscan.score", "validate", str(path), MANIFEST)
    print(f"{case}: {out.outcome} {out.extra_mib:.1f} MiB: {out.message}")
    assert out.outcome == "rejected", out.message
    assert re.search(expected, out.message), out.message
    assert out.extra_mib < MAX_EXTRA_MIB
