"""The benchmarks leave the official evaluators' folders they are given byte for byte as they were.

``benchmarks/openscan.py --official DIR`` rewrites ``evaluation/constants.py`` for each aspect, and
``benchmarks/mmscan_vg.py --devkit DIR`` imports the devkit's package (Python writes its bytecode
beside it): both must do so in a copy of their own. Each runs at a tiny shape against a stand-in
folder with the same entry point and command line as the real one (a few lines that write a
plausible result), and a stand-in ``torch`` (the real one takes seconds to import).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

FAKE_TORCH = '''float32 = "float32"


class Tensor:
    pass


def tensor(data, dtype=None):
    return data
'''

# The official OpenScan evaluator's command line (evaluation/evaluate.py, run as a module from the folder).
OPENSCAN_EVALUATE = '''import argparse
import os

from evaluation import constants

parser = argparse.ArgumentParser()
for name in ("--pred_path", "--gt_path", "--dataset", "--output_file"):
    parser.add_argument(name)
args = parser.parse_args()
scenes = len(os.listdir(args.pred_path))
with open(args.output_file, "w") as f:
    f.write("class,ap50,ap25\\n")
    for name in constants.SCANNET_LABELS:
        f.write(f"{name},0.5,0.5\\n")
    f.write(f"average,0.5,{scenes / 10}\\n")
'''

# The MMScan devkit's evaluator, as the benchmark's runner calls it.
MMSCAN_EVALUATOR = '''class VisualGroundingEvaluator:
    def __init__(self, show_results=True):
        self.batch = []

    def update(self, batch):
        self.batch.extend(batch)

    def start_evaluation(self):
        return {"overall": {"gTop-1@0.25": [0.5], "AP_C@0.25": [0.25]}}
'''


def snapshot(folder: Path) -> dict[str, bytes | None]:
    """Every path under ``folder`` with its bytes (None for a folder)."""
    return {
        str(p.relative_to(folder)): (p.read_bytes() if p.is_file() else None) for p in sorted(folder.rglob("*"))
    }


def run_benchmark(tmp_path: Path, script: str, *args: str) -> subprocess.CompletedProcess[str]:
    stub = tmp_path / "stub"
    stub.mkdir()
    (stub / "torch.py").write_text(FAKE_TORCH)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}  # as a user runs it
    env.update(PYTHONPATH=str(stub), TMPDIR=str(scratch))
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / script), *args], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-3000:]
    return out


def openscan_official(tmp_path: Path) -> Path:
    official = tmp_path / "official"
    (official / "evaluation").mkdir(parents=True)
    (official / "evaluation" / "__init__.py").write_text("")
    (official / "evaluation" / "constants.py").write_text("SCANNET_LABELS = ['as', 'shipped']\n")
    (official / "evaluation" / "evaluate.py").write_text(OPENSCAN_EVALUATE)
    return official


def run_openscan(tmp_path: Path, official: Path, *extra: str) -> str:
    return run_benchmark(tmp_path, "openscan.py", "--scenes", "2", "--points", "2000", "--aspects", "material",
                         "--rounds", "1", "--skip-baseline", "--work", str(tmp_path / "work"),
                         "--official", str(official), *extra).stdout


def test_openscan_runs_the_official_evaluator_from_a_copy_warm_and_cold(tmp_path: Path) -> None:
    """One run with --cold covers both cache states (the default, warm, runs in it too)."""
    official = openscan_official(tmp_path)
    before = snapshot(official)

    out = run_openscan(tmp_path, official, "--cold")

    assert snapshot(official) == before
    assert "official evaluator, material: average,0.5,0.2" in out  # it ran, on the copy
    assert "official evaluator (unmodified, torch CPU), cold" in out and "cold against cold" in out
    assert "warm against warm" in out
    # The one-pass limit (benchmarks/one_pass.py, its own process) read every member of both zips.
    nonzeros = re.findall(r"one pass over the (?:stored|deflated) zip.* ([0-9,]+) non-zeros", out)
    assert len(nonzeros) == 2 and nonzeros[0] == nonzeros[1] != "0", out


def test_mmscan_vg_runs_the_devkit_from_a_copy(tmp_path: Path) -> None:
    devkit = tmp_path / "devkit"
    (devkit / "mmscan" / "evaluator").mkdir(parents=True)
    (devkit / "mmscan" / "__init__.py").write_text("")
    (devkit / "mmscan" / "evaluator" / "__init__.py").write_text("")
    (devkit / "mmscan" / "evaluator" / "vg_evaluation.py").write_text(MMSCAN_EVALUATOR)
    before = snapshot(devkit)

    out = run_benchmark(tmp_path, "mmscan_vg.py", "--samples", "20", "--reference-pairs", "10",
                        "--devkit", str(devkit))

    assert snapshot(devkit) == before
    assert "gTop-1@0.25=0.500000 AP_C@0.25=0.250000" in out.stdout  # it ran, on the copy
    assert re.search(r"ours / one pass: [0-9.]+x", out.stdout)
