"""How one OpenScan scorer or official-evaluator run is made, measured and printed, for
``benchmarks/openscan.py`` and its input shapes (``openscan_shapes.py``)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from measure import evict, measured, read_once  # benchmarks/measure.py

ROOT = Path(__file__).resolve().parents[1]

# The real val split has 312 scenes, past OpenScan's minimum of 150 for an interval (Track.min_scenes); on
# the benchmark's 50 the intervals would be withheld, and "as scored" would skip their work. Every scorer
# run here lowers the minimum to 20, so that it does the work a submission to the real split gets.
SCORED = {"EVAL_DEVICE": "cpu", "EVAL_BOOTSTRAP_MIN_SCENES": "20"}


def score_cmd(labels: Path, predictions: Path) -> list[str]:
    return [sys.executable, "-m", "evaluation_workers", "score", "--track", "openscan",
            "--labels", str(labels), "--predictions", str(predictions), "--quiet"]


def official_cmd(official: Path, pred_dir: Path, gt_dir: Path, out: Path, python: str) -> list[str]:
    """The unmodified evaluator, with ``Tensor.cuda`` the identity (torch CPU, no GPU here), run by ``python``
    (an environment with torch 2.13.0 CPU and a NumPy below 2.4: the evaluator calls ``np.in1d``)."""
    shim = ("import runpy, sys, torch; torch.Tensor.cuda = lambda self, *a, **k: self; "
            "sys.argv = ['evaluate.py'] + sys.argv[1:]; runpy.run_module('evaluation.evaluate', run_name='__main__')")
    return [python, "-c", shim, "--pred_path", str(pred_dir), "--gt_path", str(gt_dir),
            "--dataset", "scannet", "--output_file", str(out)]


def measured_in(state: str, inputs: list[Path], cmd: list[str], env: dict[str, str] | None = None,
                cwd: Path | None = None) -> dict[str, Any]:
    """``measured`` with ``inputs`` read once first (``state`` "warm") or evicted from the page cache ("cold")."""
    (read_once if state == "warm" else evict)(inputs)
    return measured(cmd, env, cwd=cwd)


def run_official(evaluator: Path, names: list[str], pred_dir: Path, gt_dir: Path, out: Path, python: str,
                 state: str) -> dict[str, Any]:
    """One aspect through the official evaluator in ``evaluator`` (a copy from ``scratch_copy``: its
    ``evaluation/constants.py`` is rewritten to this aspect's vocabulary), its inputs and its own files
    ``state`` ("warm" or "cold") in the page cache; ``measured``'s figures. It writes ``out``."""
    (evaluator / "evaluation" / "constants.py").write_text(
        "MATTERPORT_LABELS = MATTERPORT_IDS = SCANNETPP_LABELS = SCANNETPP_IDS = []\n"
        f"SCANNET_LABELS = {names!r}\nSCANNET_IDS = list(range(1, {len(names) + 1}))\n")
    return measured_in(state, [gt_dir, pred_dir, evaluator], official_cmd(evaluator, pred_dir, gt_dir, out, python),
                       cwd=evaluator)


def row(name: str, run: dict[str, Any], ap: float | str = "") -> None:
    ap_text = f"AP={ap:.6f}" if isinstance(ap, float) else ap
    system = f"({run['sys']:.2f} sys)" if "sys" in run else ""
    print(f"  {name:52s} {run['wall']:7.2f} s wall {run['cpu']:7.2f} s CPU {system:11s}"
          f"{run.get('rss_mib', float('nan')):7.0f} MiB {run.get('steal', 0.0):5.2f} s stolen  {ap_text}")
