"""Which ``EVAL_THREADS`` is fastest on this machine, for the inputs the scorers spend their time on.

    .venv/bin/python benchmarks/threads.py --openscan DIR [--mmscan-samples 5000] [--runs 9]

``DIR``: a folder ``benchmarks/openscan.py`` wrote (``<work>/<shape>``: ``labels``, ``stored.zip``,
``deflated.zip``). Each input is scored in fresh processes (``python -m evaluation_workers score``,
``EVAL_DEVICE=cpu``, warm: inputs read once before each run, the label cache built first) with
``EVAL_THREADS`` unset (the default), 1 and 2, the settings interleaved run by run so that a drift of a
shared machine's speed falls on all of them alike. Prints each setting's median wall time and its
ratio to the best, with its system time, page faults and context switches (where two threads cost more
than they give, these say why); the default must be within 5 % of the best and never slower than one thread
(issue 28). Results are bit-identical whatever the setting (checked here too).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from measure import machine, measured, read_once  # benchmarks/measure.py

from evaluation_workers.synthetic.mmscan_vg import make_data
from evaluation_workers.threads import threads

SETTINGS = ["", "1", "2"]


def score_cmd(track: str, labels: Path, predictions: Path) -> list[str]:
    return [sys.executable, "-m", "evaluation_workers", "score", "--track", track, "--labels", str(labels),
            "--predictions", str(predictions), "--quiet"]


def compare(name: str, cmd: list[str], inputs: list[Path], runs: int, extra: dict[str, str]) -> None:
    with tempfile.TemporaryDirectory() as cache:
        env = {"EVAL_DEVICE": "cpu", "EVAL_CACHE_DIR": cache, **extra}
        measured(cmd, env)  # the label cache, and a warm-up
        seen: dict[str, list[dict[str, float]]] = {s: [] for s in SETTINGS}
        results = set()
        for _ in range(runs):
            for setting in SETTINGS:
                read_once([*inputs, Path(cache)])
                run = measured(cmd, {**env, **({"EVAL_THREADS": setting} if setting else {})})
                seen[setting].append({k: float(run[k]) for k in ("wall", "sys", "faults", "switches")})
                results.add(json.dumps(json.loads(run["stdout"])["metrics"], sort_keys=True))
    medians = {s: {k: statistics.median(r[k] for r in rows) for k in rows[0]} for s, rows in seen.items()}
    best = min(m["wall"] for m in medians.values())
    print(f"{name} ({'bit-identical' if len(results) == 1 else 'RESULTS DIFFER'}):")
    for setting, m in medians.items():
        label = f"default ({threads()} here)" if not setting else setting
        # System time, page faults and context switches: where two threads cost more than they give
        # (issue 28 saw 0.66 s of system time on an Intel Xeon), these show why.
        print(f"  EVAL_THREADS={label:14s} median {m['wall']:.3f} s of {runs} "
              f"(min {min(r['wall'] for r in seen[setting]):.3f}), {m['wall'] / best:.3f}x the best; "
              f"{m['sys']:.2f} s system, {m['faults']:,.0f} page faults, {m['switches']:,.0f} context switches")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--openscan", type=Path, help="a folder benchmarks/openscan.py wrote")
    parser.add_argument("--mmscan-samples", type=int, default=5000)
    parser.add_argument("--runs", type=int, default=9)
    args = parser.parse_args()
    print(f"EVAL_THREADS on {machine()}")
    # OpenScan's 50 scenes get intervals as the real 312-scene split does (benchmarks/openscan.py).
    scored = {"EVAL_BOOTSTRAP_MIN_SCENES": "20"}
    if args.openscan:
        for form in ("stored", "deflated"):
            labels, zipped = args.openscan / "labels", args.openscan / f"{form}.zip"
            compare(f"OpenScan, {form} zip, as scored", score_cmd("openscan", labels, zipped), [labels, zipped],
                    args.runs, scored)
    with tempfile.TemporaryDirectory() as work:
        labels, preds = make_data(args.mmscan_samples, seed=0, empty_fraction=0.0, tilted_fraction=1.0)
        labels_path, preds_path = Path(work, "labels.json"), Path(work, "predictions.json")
        labels_path.write_text(json.dumps(labels))
        preds_path.write_text(json.dumps(preds))
        cmd = score_cmd("mmscan-vg", labels_path, preds_path)
        compare(f"MMScan VG, {args.mmscan_samples} tilted prompts, as scored", cmd, [labels_path, preds_path],
                args.runs, {})
        compare(f"MMScan VG, {args.mmscan_samples} tilted prompts, no intervals", cmd, [labels_path, preds_path],
                args.runs, {"EVAL_BOOTSTRAP_RESAMPLES": "0"})
    return 0


if __name__ == "__main__":
    sys.exit(main())
