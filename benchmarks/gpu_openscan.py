"""GPU check for OpenScan: CuPy results equal NumPy results; CuPy timings at 312 scenes x 8 aspects.

Called by ``benchmarks/gpu_check.py`` (``run()``), or alone:
``python benchmarks/gpu_openscan.py [--scenes 312] [--points 150000]``.
Target: the full shape in the compact form scores in under 5 s on the GPU.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gpu_check import assert_results_equal  # benchmarks/ is on sys.path: scripts run from here

from evaluation_workers import _xp
from evaluation_workers.synthetic import openscan as synthetic
from evaluation_workers.tracks.openscan import score
from evaluation_workers.tracks.openscan.labels import ASPECTS, build_cache


def _score_on(device: str, labels: Path, predictions: Path) -> tuple[dict[str, Any], float]:
    os.environ["EVAL_DEVICE"] = device
    _xp.backend.cache_clear()
    start = time.perf_counter()
    result = score(labels, predictions)
    if device == "gpu":
        import cupy

        cupy.cuda.Device().synchronize()
    return result, time.perf_counter() - start


def run(scenes: int = 312, points: int = 150_000, work: Path | None = None) -> None:
    work = Path(work or tempfile.mkdtemp(prefix="openscan_gpu_"))
    start = time.perf_counter()
    written = synthetic.generate(
        argparse.Namespace(
            out=work,
            scenes=scenes,
            points=points,
            instances=(30, 50),
            masks=100,
            aspects=list(ASPECTS),
            format="compact",
            semantic=True,
            missing=0,
            seed=5,
        )
    )
    build_cache(written["labels"])
    print(
        f"openscan: generated {scenes} scenes x {points} vertices x 8 aspects and the label cache "
        f"in {time.perf_counter() - start:.0f} s"
    )
    cpu, cpu_s = _score_on("cpu", written["labels"], written["compact"])
    _score_on("gpu", written["labels"], written["compact"])  # warm-up: CUDA context, kernel compilation
    gpu, gpu_s = _score_on("gpu", written["labels"], written["compact"])
    for key in ("metrics", "breakdown", "details", "warnings"):
        assert_results_equal(cpu[key], gpu[key], key)
    print(
        f"openscan: CuPy equals NumPy on every metric, breakdown and per-class value; "
        f"score (load + match, compact, cache): NumPy {cpu_s:.2f} s, CuPy {gpu_s:.2f} s (target < 5 s); "
        f"AP={gpu['metrics']['AP']:.6f} mIoU={gpu['metrics']['mIoU']:.6f}"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--scenes", type=int, default=312)
    parser.add_argument("--points", type=int, default=150_000)
    args = parser.parse_args()
    run(args.scenes, args.points)
