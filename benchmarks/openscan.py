"""OpenScan scoring speed on the files researchers upload, side by side with the official evaluator.

    nice .venv/bin/python benchmarks/openscan.py [--scenes 50] [--points 150000] [--aspects material]
        [--official DIR [--official-python PYTHON] [--rounds N] [--cold]] [--skip-baseline] [--full]

Generates once, under --work, a text labels folder and predictions with the
synthetic generator (100 masks per scene), and writes the official layout as
MaskClustering does (``np.savez`` per scene, key ``pred_score``) twice: a
stored zip and a deflated one (``zip``'s default level 6). Then, each scorer
run a separate process (``python -m evaluation_workers score``, ``EVAL_DEVICE=cpu``),
it prints wall time, CPU time (user + system) and peak RSS of:

- ours, stored zip, text labels, cold: an empty scorer cache (``EVAL_CACHE_DIR``)
  and the inputs evicted from the page cache (``posix_fadvise``);
- ours, stored zip, text labels, warm (the label cache the cold run built);
  the same with ``EVAL_THREADS=1``; the deflated zip; the compact form;
- the one-pass limit (``benchmarks/one_pass.py``, a fresh process measured as
  ours is, best of 3): sha256 of the mapped zip on a thread beside reading each
  member where the page cache holds it (inflating it in one zlib-ng call when
  deflated) and counting the non-zeros of its masks; no copy, no check, freed
  memory reused as the scorer's allocator does (until 2026-12-03 it ran in
  this process with every inflated member faulted in afresh: 0.54-0.62 s for
  the deflated zip, whose inflating and counting take 0.09 s);
- the official evaluator, unmodified (``--official DIR``: a folder holding its
  ``evaluation/`` package, from YoujunZhao/OpenScan
  ``Evaluation/MaskClustering/evaluation/``; not part of this repository), on
  torch CPU with ``Tensor.cuda`` as the identity (there is no GPU), run by
  ``--official-python``, on the extracted per-scene files and the text labels,
  one run per aspect. It runs from a copy of DIR made for the run (its
  ``evaluation/constants.py`` is rewritten there for each aspect; DIR itself is
  never written to). Like for like in the page cache: after one untimed
  warm-up run of the evaluator, each timed run of either side first reads its
  inputs once (warm against warm); ``--cold`` adds, each round, the same with
  both sides' inputs evicted (cold against cold: the official evaluator's
  files and its inputs; our labels, predictions, label cache and sources).
  Each ratio names the cache state it compares. ``--rounds N`` times, each
  followed by ours on the three forms, three times each (the median
  compared), and on both zips without the intervals (the official evaluator's
  work alone), so that each ratio compares runs made minutes apart at most (a shared
  virtual machine's speed drifts: every run prints the CPU time the hypervisor
  gave to other guests meanwhile, "stolen");
- a baseline written from METRICS.md the way the official code works (loops).

Every run's AP is printed; they must agree. ``--full`` adds the 312 scenes x 8
aspects shape (compact, ours only).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np
from measure import as_scored, evict, machine, measured, scratch_copy  # benchmarks/measure.py
from openscan_runs import SCORED, measured_in, row, run_official, score_cmd
from openscan_shapes import run_shapes

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
                    masks, scores, classes = pred["pred_masks"], pred["pred_score"], pred["pred_classes"]
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


def official_layout(source: Path, stored: Path, deflated: Path) -> None:
    """The synthetic zip rewritten as MaskClustering writes it: ``np.savez`` per scene, ``pred_score``."""
    with zipfile.ZipFile(source) as zin, zipfile.ZipFile(stored, "w", zipfile.ZIP_STORED) as zs, \
            zipfile.ZipFile(deflated, "w", zipfile.ZIP_DEFLATED, compresslevel=6) as zd:
        for info in zin.infolist():
            with np.load(io.BytesIO(zin.read(info))) as data:
                arrays = dict(data)
            arrays["pred_score"] = arrays.pop("pred_scores")
            buf = io.BytesIO()
            np.savez(buf, **arrays)  # type: ignore[arg-type]
            zs.writestr(info.filename, buf.getvalue())
            zd.writestr(info.filename, buf.getvalue())


def prepare(work: Path, scenes: int, points: int, aspects: list[str], fmt: str) -> dict[str, Path]:
    if not (work / "done").exists():
        start = time.perf_counter()
        synthetic.generate(argparse.Namespace(out=work, scenes=scenes, points=points, instances=(30, 50),
                                              masks=100, aspects=aspects, format=fmt, semantic=False,
                                              missing=0, seed=1))
        if fmt == "both":
            official_layout(work / "predictions.zip", work / "stored.zip", work / "deflated.zip")
        (work / "done").write_text("")
        print(f"  generated in {time.perf_counter() - start:.1f} s")
    files = {"labels": work / "labels", "stored": work / "stored.zip", "deflated": work / "deflated.zip",
             "compact": work / "predictions.npz"}
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


def prepare_full_official(work: Path, scenes: int, points: int) -> dict[str, Path]:
    """312 scenes x 8 aspects in the official layout, deflated (``np.savez`` members, zip level 1), written
    a scene at a time, and their text labels: the real test split's shape (about 37 GB once inflated)."""
    if not (work / "done").exists():
        start = time.perf_counter()
        rng = np.random.default_rng(1)
        vocabulary = json.loads(synthetic.DEFAULT_VOCABULARY.read_text())
        work.mkdir(parents=True, exist_ok=True)
        with zipfile.ZipFile(work / "deflated.zip", "w", zipfile.ZIP_DEFLATED, compresslevel=1) as zf:
            for i in range(scenes):
                scene = synthetic.make_scene(rng, f"scene{i:04d}_00", points, (30, 50), 100, vocabulary, list(ASPECTS))
                synthetic.write_labels(work, [scene], vocabulary)  # into work / "labels"
                masks = synthetic.dense_masks(scene)
                for aspect in ASPECTS:
                    buf = io.BytesIO()
                    np.savez(buf, pred_masks=masks, pred_score=scene.scores[aspect], pred_classes=scene.classes[aspect])
                    zf.writestr(f"{aspect}/{scene.scene_id}.npz", buf.getvalue())
        (work / "done").write_text("")
        print(f"  generated in {time.perf_counter() - start:.0f} s")
    return {"labels": work / "labels", "deflated": work / "deflated.zip"}


def one_pass(path: Path) -> dict[str, Any]:
    """The one-pass limit of a zip (``benchmarks/one_pass.py``), measured as ours is: a fresh process."""
    run = measured([sys.executable, str(Path(__file__).with_name("one_pass.py")), "openscan-zip", str(path)])
    return {**run, **json.loads(run["stdout"])}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--scenes", type=int, default=50)
    parser.add_argument("--points", type=int, default=150_000)
    parser.add_argument("--aspects", nargs="+", default=["material"])
    parser.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "openscan_bench")
    parser.add_argument("--official", type=Path, help="folder holding the official evaluation/ package")
    parser.add_argument("--official-python", default=sys.executable, help="the Python that runs it (with torch)")
    parser.add_argument("--rounds", type=int, default=1, help="official evaluator runs, each followed by ours")
    parser.add_argument("--cold", action="store_true",
                        help="each round also both sides cold: their inputs evicted from the page cache")
    parser.add_argument("--skip-baseline", action="store_true")
    parser.add_argument("--shapes", action="store_true",
                        help="also bool masks and scattered masks (ours, and the official evaluator with --official)")
    parser.add_argument("--full", action="store_true", help="also 312 scenes x 8 aspects, compact, ours only")
    parser.add_argument("--full-official", action="store_true",
                        help="also 312 scenes x 8 aspects in a deflated official zip, ours only")
    args = parser.parse_args()
    tag = f"{args.scenes}x{args.points}_{'-'.join(args.aspects)}"
    print(f"OpenScan benchmark on {machine()}: {args.scenes} scenes x {args.points} vertices x 100 masks, "
          f"aspects {args.aspects}; load average at start {os.getloadavg()[0]:.2f}")
    files = prepare(args.work / tag, args.scenes, args.points, args.aspects, "both")
    mib = {k: files[k].stat().st_size / 2**20 for k in ("stored", "deflated", "compact")}
    print(f"  predictions: stored zip {mib['stored']:.0f} MiB, deflated zip {mib['deflated']:.1f} MiB, "
          f"compact {mib['compact']:.2f} MiB")
    runs: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory() as cache:
        env = {**SCORED, "EVAL_CACHE_DIR": cache}
        evict([files["labels"], files["stored"]])
        plan = [
            ("ours, stored zip, text labels, cold", files["stored"], {}),
            ("ours, stored zip, text labels, warm", files["stored"], {}),
            ("ours, stored zip, text labels, warm, EVAL_THREADS=1", files["stored"], {"EVAL_THREADS": "1"}),
            ("ours, deflated zip, text labels, warm", files["deflated"], {}),
            ("ours, compact, text labels, warm", files["compact"], {}),
        ]
        for name, preds, extra in plan:
            run = measured(score_cmd(files["labels"], preds), {**env, **extra})
            run["result"] = json.loads(run["stdout"])
            runs[name] = run
            row(name, run, run["result"]["metrics"]["AP"])
    same = {json.dumps(r["result"]["metrics"], sort_keys=True) for r in runs.values()}
    print(f"  all five results {'bit-identical' if len(same) == 1 else 'DIFFER'}; "
          f"{as_scored(runs['ours, stored zip, text labels, warm']['result'], 'AP')}")
    limits = {}
    for kind in ("stored", "deflated"):
        one_pass(files[kind])  # warm the page cache
        limits[kind] = min((one_pass(files[kind]) for _ in range(3)), key=lambda r: float(r["wall"]))
        row(f"one pass over the {kind} zip, best of 3 (sha256 + read + count non-zeros)", limits[kind],
             f"{limits[kind]['nonzero']:,} non-zeros")
    for kind, name in (("stored", "ours, stored zip, text labels, warm"),
                       ("deflated", "ours, deflated zip, text labels, warm")):
        print(f"  ours / one pass, {kind}: {runs[name]['wall'] / limits[kind]['wall']:.2f}x")
    if not args.skip_baseline:
        start = time.perf_counter()
        ap = baseline(files["labels"], files["stored"])
        print(f"  {'baseline loops (official algorithm, in process)':52s} {time.perf_counter() - start:7.2f} s wall"
              f"{'':31s}AP={ap:.6f}")
    if args.official:
        # Rounds of [official evaluator, then ours on each form]: on a shared machine whose speed drifts
        # from minute to minute (see "stolen"), each ratio compares runs minutes apart at most. The
        # evaluator runs from a copy (its constants.py is rewritten for each aspect), and both sides
        # read their inputs from the page cache (warm), or, with --cold, also both from the disk.
        vocabulary = json.loads((files["labels"] / "vocabulary.json").read_text())
        with tempfile.TemporaryDirectory() as tmp, tempfile.TemporaryDirectory() as cache, \
                scratch_copy(args.official) as evaluator:
            with zipfile.ZipFile(files["stored"]) as zf:
                zf.extractall(tmp)
            env = {**SCORED, "EVAL_CACHE_DIR": cache}
            measured(score_cmd(files["labels"], files["compact"]), env)  # builds the label cache
            first = args.aspects[0]
            run_official(evaluator, vocabulary[first], Path(tmp, first), files["labels"] / "gt" / first,
                         Path(tmp, f"out_{first}.csv"), args.official_python, "warm")  # warm-up, untimed
            states = ["warm", "cold"] if args.cold else ["warm"]
            for round_ in range(1, args.rounds + 1):
                for state in states:
                    total = {"wall": 0.0, "cpu": 0.0, "rss_mib": 0.0, "steal": 0.0}
                    for aspect in args.aspects:
                        out = Path(tmp, f"out_{aspect}.csv")
                        run = run_official(evaluator, vocabulary[aspect], Path(tmp, aspect),
                                           files["labels"] / "gt" / aspect, out, args.official_python, state)
                        for key in total:
                            total[key] = max(total[key], run[key]) if key == "rss_mib" else total[key] + run[key]
                        if round_ == 1 and state == "warm":
                            print(f"  official evaluator, {aspect}: {out.read_text().splitlines()[-1]}")
                    row(f"round {round_}: official evaluator (unmodified, torch CPU), {state}", total)
                    # Ours three times each (one second is more exposed to a moment's noise than the
                    # official evaluator's half minute), the median compared; and without the intervals
                    # (the official evaluator's work alone) on the two zips.
                    plan = [(form, {}, "") for form in ("stored", "deflated", "compact")] + [
                        (form, {"EVAL_BOOTSTRAP_RESAMPLES": "0"}, ", no intervals") for form in ("stored", "deflated")]
                    for form, extra, note in plan:
                        inputs = [files["labels"], files[form], Path(cache), ROOT / "evaluation_workers"]
                        runs3 = sorted((measured_in(state, inputs, score_cmd(files["labels"], files[form]),
                                                    {**env, **extra}) for _ in range(3)),
                                       key=lambda r: float(r["wall"]))
                        run = runs3[1]
                        result = json.loads(run["stdout"])
                        row(f"round {round_}: ours, {form}{note}, {state}, median of 3", run, result["metrics"]["AP"])
                        if not note:  # the ratio "as scored" is for a result with its intervals
                            print(f"    {as_scored(result, 'AP')}")
                        walls = ", ".join(f"{float(r['wall']):.2f}" for r in runs3)
                        print(f"    {total['wall'] / run['wall']:.1f}x faster than the official evaluator, "
                              f"{state} against {state} (runs {walls} s)")
    if args.shapes:
        run_shapes(files, args.work / tag, args)
    if args.full_official:
        print(f"Full shape, official layout: 312 scenes x {args.points} vertices x 8 aspects, deflated zip")
        big = prepare_full_official(args.work / f"full_official_{args.points}", 312, args.points)
        with zipfile.ZipFile(big["deflated"]) as zf:
            inflated = sum(i.file_size for i in zf.infolist())
        print(f"  deflated zip {big['deflated'].stat().st_size / 2**30:.2f} GiB, {inflated / 2**30:.1f} GiB inflated")
        with tempfile.TemporaryDirectory() as cache:
            for name in ("cold (label cache built)", "warm"):
                run = measured(score_cmd(big["labels"], big["deflated"]), {**SCORED, "EVAL_CACHE_DIR": cache})
                row(f"ours, deflated official zip, {name}", run, json.loads(run["stdout"])["metrics"]["AP"])
    if args.full:
        print("Full shape: 312 scenes x 150000 vertices x 8 aspects (compact)")
        full = prepare(args.work / "full", 312, args.points, list(ASPECTS), "compact")
        print(f"  compact predictions {full['compact'].stat().st_size / 2**20:.1f} MiB")
        run = measured(score_cmd(full["cached"], full["compact"]), {"EVAL_DEVICE": "cpu"})
        row("ours, compact + label cache (CPU)", run, json.loads(run["stdout"])["metrics"]["AP"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
