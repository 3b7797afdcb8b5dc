"""GPU check: CuPy results equal NumPy results, and CuPy timings at full size.

Run on a machine with a GPU and CuPy: ``python benchmarks/gpu_check.py``.
Each track contributes a module ``benchmarks/gpu_<track>.py`` with
``run() -> None`` that prints its comparison and timings and raises
``AssertionError`` on a mismatch.
"""

from __future__ import annotations

import importlib
import math
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

CHECKS = ["gpu_openscan", "gpu_mmscan_vg"]


def assert_results_equal(a: Any, b: Any, path: str = "") -> None:
    """Result JSONs (NumPy run ``a``, CuPy run ``b``) equal to 1e-12 in every number."""
    if isinstance(a, dict):
        assert a.keys() == b.keys(), f"{path}: keys differ"
        for k in a:
            assert_results_equal(a[k], b[k], f"{path}/{k}")
    elif isinstance(a, float) and isinstance(b, float):
        assert math.isclose(a, b, rel_tol=0, abs_tol=1e-12), f"{path}: numpy {a} vs cupy {b}"
    else:
        assert a == b, f"{path}: numpy {a!r} vs cupy {b!r}"


def main() -> int:
    try:
        import cupy

        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:
        print(f"No usable GPU (CuPy: {exc}); nothing to check.")
        return 2
    print(f"CuPy {cupy.__version__}, {count} GPU(s)")
    failed = 0
    for name in CHECKS:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError:
            print(f"{name}: not written yet")
            continue
        try:
            module.run()
        except AssertionError as exc:
            failed += 1
            print(f"{name}: MISMATCH {exc}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
