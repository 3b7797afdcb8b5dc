"""OpenScan scoring speed: our scorer vs a loop baseline vs the official evaluator.

    nice .venv/bin/python benchmarks/openscan.py [--scenes 50] [--points 150000] [--aspects material]
        [--official /tmp/official] [--full]

Generates (once, under --work) a labels folder and predictions in both layouts
with the synthetic generator, builds the label cache, then prints wall times
and peak memory of separate processes:
- ours, compact .npz with the label cache (the target: under 3 s for 50 x 150k);
- ours, official zip, with and without the label cache;
- a baseline written from METRICS.md the way the official code works (text
  labels via np.loadtxt, per scene -> class -> instance -> prediction loops);
- the official evaluator itself, if --official points to a runnable copy of
  Evaluation/MaskClustering (adapted to run without a GPU), one run per aspect.
``--full`` adds the 312 scenes x 8 aspects shape (compact, ours only).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np

from evaluation_workers.synthetic import openscan as synthetic
from evaluation_workers.tracks.openscan.labels import ASPECTS, build_cache

THRESHOLDS = np.append(np.arange(0.5, 0.95, 0.05), 0.25)


def baseline(labels: Path, predictions: Path) -> float:
    """METRICS.md by loops, as the official code does it; returns the mean AP over classes."""
    vocabulary = json.loads((labels / "vocabulary.json").read_text())
    all_ap = []
    with zipfile.ZipFile(predictions) as zf:
        for aspect in sorted({n.split("/")[0] for n in zf.namelist()}):
            k = len(vocabulary[aspect])
            matches = []
            for name in sorted(n for n in zf.namelist() if n.startswith(aspect + "/")):
                scene = name.split("/")[1][:-4]
                with zf.open(name) as f:
                    pred = np.load(f)
                    masks, scores, classes = pred["pred_masks"], pred["pred_scores"], pred["pred_classes"]
                ids = np.loadtxt(labels / "gt" / aspect / f"{scene}.txt").astype(np.int64)
                void = ~np.isin(ids // 1000, np.arange(1, k + 1))
                gts = {c: [] for c in range(1, k + 1)}
                for v in np.unique(ids[~void]):
                    gts[int(v // 1000)].append(
                        {"id": v, "mask": ids == v, "size": int((ids == v).sum()), "preds": []}
                    )
                preds = {c: [] for c in range(1, k + 1)}
                for m in range(masks.shape[1]):
                    mask = masks[:, m] != 0
                    size = int(mask.sum())
                    if size < 100:
                        continue
                    c = int(classes[m])
                    p = {
                        "m": m,
                        "size": size,
                        "score": float(scores[m]),
                        "void": int((mask & void).sum()),
                        "gts": [],
                    }
                    for g in gts[c]:
                        inter = int((mask & g["mask"]).sum())
                        if inter:
                            p["gts"].append((g, inter))
                            g["preds"].append((p, inter))
                    preds[c].append(p)
                matches.append((gts, preds))
            ap = np.zeros((len(THRESHOLDS), k))
            for ti, t in enumerate(THRESHOLDS):
                for c in range(1, k + 1):
                    true, score, n_pos = [], [], 0
                    for gts, preds in matches:
                        visited = set()
                        for g in gts[c]:
                            if g["size"] < 100:
                                continue
                            n_pos += 1
                            cur = None
                            for p, inter in g["preds"]:
                                if p["m"] in visited or inter / (g["size"] + p["size"] - inter) <= t:
                                    continue
                                if cur is None:
                                    cur = p["score"]
                                    visited.add(p["m"])
                                else:
                                    true.append(0)
                                    score.append(min(cur, p["score"]))
                                    cur = max(cur, p["score"])
                            if cur is not None:
                                true.append(1)
                                score.append(cur)
                        for p in preds[c]:
                            if any(i / (g["size"] + p["size"] - i) > t for g, i in p["gts"]):
                                continue
                            ignore = p["void"] + sum(i for g, i in p["gts"] if g["size"] < 100)
                            if ignore / p["size"] <= t:
                                true.append(0)
                                score.append(p["score"])
                    if n_pos == 0:
                        ap[ti, c - 1] = np.nan
                        continue
                    y, s = np.array(true), np.array(score)
                    points = [(np.mean(y[s >= u]), y[s >= u].sum() / n_pos) for u in np.unique(s)] + [
                        (1.0, 0.0)
                    ]
                    rec = [r for _, r in points]
                    ap[ti, c - 1] = sum(
                        p * ((rec[i - 1] if i else rec[0]) - (rec[i + 1] if i + 1 < len(rec) else 0)) / 2
                        for i, (p, _) in enumerate(points)
                    )
            all_ap.extend(ap[:9].mean(axis=0).tolist())
    return float(np.nanmean(all_ap))


def run(cmd: list[str], env: dict[str, str] | None = None) -> tuple[float, str]:
    """Wall seconds and stdout of a child process."""
    start = time.perf_counter()
    out = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, **(env or {})}, check=False)
    wall = time.perf_counter() - start
    if out.returncode:
        raise RuntimeError(f"{cmd} failed: {out.stderr[-2000:]}")
    return wall, out.stdout


def score_cmd(labels: Path, predictions: Path) -> list[str]:
    return [
        sys.executable,
        "-m",
        "evaluation_workers",
        "score",
        "--track",
        "openscan",
        "--labels",
        str(labels),
        "--predictions",
        str(predictions),
        "--quiet",
    ]


def prepare(work: Path, scenes: int, points: int, aspects: list[str], fmt: str) -> dict[str, Path]:
    if not (work / "done").exists():
        start = time.perf_counter()
        synthetic.generate(
            argparse.Namespace(
                out=work,
                scenes=scenes,
                points=points,
                instances=(30, 50),
                masks=100,
                aspects=aspects,
                format=fmt,
                semantic=False,
                missing=0,
                seed=1,
            )
        )
        (work / "done").write_text("")
        print(f"  generated in {time.perf_counter() - start:.1f} s")
    files = {
        "labels": work / "labels",
        "official": work / "predictions.zip",
        "compact": work / "predictions.npz",
    }
    cached = work / "cached"
    if not (cached / ".cache").exists():
        if cached.exists():
            subprocess.run(["rm", "-rf", str(cached)], check=True)
        subprocess.run(["cp", "-r", str(files["labels"]), str(cached)], check=True)
        start = time.perf_counter()
        build_cache(cached)
        print(f"  label cache built in {time.perf_counter() - start:.1f} s (once per labels version)")
    files["cached"] = cached
    return files


def peak_memory_mib(cmd: list[str]) -> float:
    """Peak RSS of ``cmd`` alone (children's RSS is cumulative, so measure it in a fresh parent)."""
    probe = ("import resource, subprocess, sys; subprocess.run(sys.argv[1:], capture_output=True, check=True); "
             "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024)")
    out = subprocess.run([sys.executable, "-c", probe, *cmd], capture_output=True, text=True, check=True)
    return float(out.stdout)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--scenes", type=int, default=50)
    parser.add_argument("--points", type=int, default=150_000)
    parser.add_argument("--aspects", nargs="+", default=["material"])
    parser.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "openscan_bench")
    parser.add_argument(
        "--official", type=Path, help="folder with an adapted copy of the official evaluation/"
    )
    parser.add_argument("--skip-baseline", action="store_true")
    parser.add_argument("--full", action="store_true", help="also 312 scenes x 8 aspects, compact, ours only")
    args = parser.parse_args()
    tag = f"{args.scenes}x{args.points}_{'-'.join(args.aspects)}"
    print(f"OpenScan benchmark: {args.scenes} scenes x {args.points} vertices, aspects {args.aspects}")
    files = prepare(args.work / tag, args.scenes, args.points, args.aspects, "both")
    sizes = {k: files[k].stat().st_size / 2**20 for k in ("official", "compact")}
    print(
        f"  predictions: official zip {sizes['official']:.1f} MiB, compact {sizes['compact']:.2f} MiB "
        f"({sizes['official'] / sizes['compact']:.1f}x smaller)"
    )
    rows = {}
    for name, labels, preds in (
        ("ours, compact + label cache", files["cached"], files["compact"]),
        ("ours, official zip + label cache", files["cached"], files["official"]),
        ("ours, official zip, text labels", files["labels"], files["official"]),
    ):
        wall, out = run(score_cmd(labels, preds), {"EVAL_DEVICE": "cpu"})
        rows[name] = (wall, json.loads(out)["metrics"]["AP"])
        print(f"  {name:40s} {wall:7.2f} s  AP={rows[name][1]:.6f}")
    # peak RSS of children is cumulative (max over all); measure the compact run alone for memory
    print(f"  peak memory, ours compact: {peak_memory_mib(score_cmd(files['cached'], files['compact'])):.0f} MiB")
    print(f"  peak memory, ours official zip: {peak_memory_mib(score_cmd(files['cached'], files['official'])):.0f} MiB")
    base = rows["ours, compact + label cache"][0]
    if not args.skip_baseline:
        start = time.perf_counter()
        ap = baseline(files["labels"], files["official"])
        wall = time.perf_counter() - start
        print(
            f"  {'baseline loops (official algorithm)':40s} {wall:7.2f} s  AP={ap:.6f}  "
            f"(ours compact {wall / base:.0f}x faster)"
        )
    if args.official:
        total = 0.0
        with tempfile.TemporaryDirectory() as tmp:
            with zipfile.ZipFile(files["official"]) as zf:
                zf.extractall(tmp)
            for aspect in args.aspects:  # the official loader reads `pred_score`
                for npz in sorted(Path(tmp, aspect).glob("*.npz")):
                    with np.load(npz) as d:
                        arrays = dict(d)
                    np.savez(npz, pred_score=arrays["pred_scores"], **arrays)
                names = json.loads((files["labels"] / "vocabulary.json").read_text())[aspect]
                (args.official / "evaluation" / "constants.py").write_text(
                    "MATTERPORT_LABELS = MATTERPORT_IDS = SCANNETPP_LABELS = SCANNETPP_IDS = []\n"
                    f"SCANNET_LABELS = {names!r}\nSCANNET_IDS = list(range(1, {len(names) + 1}))\n"
                )
                start = time.perf_counter()
                subprocess.run(
                    [
                        sys.executable,
                        "-m",
                        "evaluation.evaluate",
                        "--pred_path",
                        f"{tmp}/{aspect}",
                        "--gt_path",
                        str(files["labels"] / "gt" / aspect),
                        "--dataset",
                        "scannet",
                        "--output_file",
                        f"{tmp}/out_{aspect}.csv",
                    ],
                    cwd=args.official,
                    capture_output=True,
                    check=True,
                )
                total += time.perf_counter() - start
                last = Path(f"{tmp}/out_{aspect}.csv").read_text().splitlines()[-1]
                print(f"  official evaluator, {aspect}: averages {last}")
        print(
            f"  {'official evaluator':40s} {total:7.2f} s  (ours compact {total / base:.0f}x faster, "
            f"ours official zip {total / rows['ours, official zip + label cache'][0]:.0f}x faster)"
        )
    if args.full:
        print("Full shape: 312 scenes x 150000 vertices x 8 aspects (compact)")
        full = prepare(args.work / "full", 312, args.points, list(ASPECTS), "compact")
        print(f"  compact predictions {full['compact'].stat().st_size / 2**20:.1f} MiB")
        wall, out = run(score_cmd(full["cached"], full["compact"]), {"EVAL_DEVICE": "cpu"})
        print(
            f"  ours, compact + label cache (CPU)        {wall:7.2f} s  AP={json.loads(out)['metrics']['AP']:.6f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
