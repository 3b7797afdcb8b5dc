"""The allocator settings of a scoring process: temporaries stop being page-faulted in again."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from evaluation_workers import allocator

PROBE = """
import json, resource, sys, threading
import numpy as np
from evaluation_workers import allocator
tuned = allocator.tune() if sys.argv[1] == "tune" else False
size, rounds, where = int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
np.ones(1 << 20).sum()  # warm up

def work():
    for _ in range(rounds):  # a block's temporaries: several at once, then all freed
        parts = [np.ones(size) for _ in range(4)]
        del parts

before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
if where == "thread":  # as a reading or bootstrap thread allocates
    thread = threading.Thread(target=work)
    thread.start()
    thread.join()
else:
    work()
after = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
allocator.release()
print(json.dumps({"tuned": tuned, "faults": after - before}))
"""

glibc = pytest.mark.skipif(allocator._libc() is None, reason="not glibc")


def _faults(mode: str, size: int = 1 << 21, rounds: int = 50, where: str = "main") -> dict[str, int]:
    out = subprocess.run([sys.executable, "-c", PROBE, mode, str(size), str(rounds), where], capture_output=True, text=True,
                         check=True, env={**os.environ, "NUMPY_MADVISE_HUGEPAGE": "0"})  # faults counted in pages
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


@glibc
def test_arrays_beyond_the_mmap_threshold_are_reused_too() -> None:
    """Arrays of the full test split (21 M predictions: 168 MiB each) were mapped and unmapped one by one,
    each faulted in afresh (sorting them spent more time in the kernel than sorting)."""
    plain, tuned = _faults("plain", 1 << 23, 6), _faults("tune", 1 << 23, 6)  # 64 MiB each
    assert plain["faults"] > 6 * 4 * 16_000 * 0.9
    assert tuned["faults"] < plain["faults"] / 5


@glibc
def test_a_threads_temporaries_are_reused_too() -> None:
    """The scorer's other threads (reading ahead, bootstrap blocks) got arenas of their own, heaps of
    64 MiB at most that glibc unmaps once empty and that cannot hold a larger request: those were
    mapped afresh, and faulted in again, every round."""
    plain, tuned = _faults("plain", 1 << 23, 6, "thread"), _faults("tune", 1 << 23, 6, "thread")  # 64 MiB each
    assert plain["faults"] > 6 * 4 * 16_000 * 0.9
    assert tuned["faults"] < plain["faults"] / 5
