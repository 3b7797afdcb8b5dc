"""The allocator settings of a scoring process: temporaries stop being page-faulted in again."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from evaluation_workers import allocator

PROBE = """
import json, resource, sys
import numpy as np
from evaluation_workers import allocator
tuned = allocator.tune() if sys.argv[1] == "tune" else False
np.ones(1 << 20).sum()  # warm up
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(50):  # a block's temporaries: several of a few MiB at once, then all freed
    parts = [np.ones(1 << 21) for _ in range(4)]  # 16 MiB each
    del parts
after = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
allocator.release()
print(json.dumps({"tuned": tuned, "faults": after - before}))
"""

glibc = pytest.mark.skipif(allocator._libc() is None, reason="not glibc")


def _faults(mode: str) -> dict[str, int]:
    out = subprocess.run([sys.executable, "-c", PROBE, mode], capture_output=True, text=True, check=True)
    result: dict[str, int] = json.loads(out.stdout)
    return result


@glibc
def test_tuned_process_reuses_freed_temporaries_instead_of_faulting_them_in_again() -> None:
    plain, tuned = _faults("plain"), _faults("tune")
    assert tuned["tuned"]
    # 4 x 16 MiB freed together: glibc unmaps or trims them and faults ~16,000 pages in again
    # each round; the tuned heap keeps them for the next round.
    assert plain["faults"] > 50_000
    assert tuned["faults"] < plain["faults"] / 20
