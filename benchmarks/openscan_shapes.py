"""OpenScan's input shapes for ``benchmarks/openscan.py --shapes``: the stored zip rewritten with bool
masks and with scattered vertices, each scored by ours and by the official evaluator."""

from __future__ import annotations

import argparse
import io
import json
import subprocess
import tempfile
import zipfile
from pathlib import Path

import numpy as np
from measure import as_scored, measured, scratch_copy  # benchmarks/measure.py
from openscan_runs import ROOT, SCORED, measured_in, row, run_official, score_cmd


def shape_variants(files: dict[str, Path], work: Path) -> dict[str, tuple[Path, Path]]:
    """The stored zip (uint8 masks whose instances are runs of vertices, as the generator makes them)
    rewritten in other shapes researchers upload, each with labels it scores identically against: bool
    masks; and scattered masks, every scene's vertices in a random order (its labels' lines in the same
    order, so that every overlap and so every score is unchanged). name -> (labels, stored zip)."""
    variants = {"uint8 masks, runs of vertices": (files["labels"], files["stored"]),
                "bool masks, runs of vertices": (files["labels"], work / "stored_bool.zip"),
                "uint8 masks, scattered vertices": (work / "labels_scattered", work / "stored_scattered.zip")}
    if (work / "shapes_done").exists():
        return variants
    rng = np.random.default_rng(2)
    scattered_labels = work / "labels_scattered"
    subprocess.run(["rm", "-rf", str(scattered_labels)], check=True)
    subprocess.run(["cp", "-r", str(files["labels"]), str(scattered_labels)], check=True)
    with zipfile.ZipFile(files["stored"]) as zin, \
            zipfile.ZipFile(work / "stored_bool.zip", "w", zipfile.ZIP_STORED) as as_bool, \
            zipfile.ZipFile(work / "stored_scattered.zip", "w", zipfile.ZIP_STORED) as scattered:
        orders: dict[str, np.ndarray] = {}
        for info in zin.infolist():
            aspect, scene = info.filename.split("/")[0], Path(info.filename).stem
            with np.load(io.BytesIO(zin.read(info))) as data:
                arrays = dict(data)
            order = orders.setdefault(scene, rng.permutation(arrays["pred_masks"].shape[0]))
            for zf, masks in ((as_bool, arrays["pred_masks"].astype(bool)), (scattered, arrays["pred_masks"][order])):
                buf = io.BytesIO()
                np.savez(buf, **{**arrays, "pred_masks": masks})  # type: ignore[arg-type]
                zf.writestr(info.filename, buf.getvalue())
            gt = scattered_labels / "gt" / aspect / f"{scene}.txt"
            lines = gt.read_text().splitlines()
            gt.write_text("".join(lines[i] + "\n" for i in order))
    (work / "shapes_done").write_text("")
    return variants


def run_shapes(files: dict[str, Path], work: Path, args: argparse.Namespace) -> None:
    """Ours (warm, as scored, median of 3; and with ``EVAL_THREADS=1``) on each shape of
    ``shape_variants``, and the official evaluator once on each where ``--official`` is given."""
    print("Input shapes (stored zip, warm against warm):")
    vocabulary = json.loads((files["labels"] / "vocabulary.json").read_text())
    for name, (labels, stored) in shape_variants(files, work).items():
        with tempfile.TemporaryDirectory() as cache:
            env = {**SCORED, "EVAL_CACHE_DIR": cache}
            measured(score_cmd(labels, stored), env)  # builds the label cache
            inputs = [labels, stored, Path(cache), ROOT / "evaluation_workers"]
            walls = {}
            for threads in ("", "1"):
                extra = {"EVAL_THREADS": threads} if threads else {}
                runs3 = sorted((measured_in("warm", inputs, score_cmd(labels, stored), {**env, **extra})
                                for _ in range(3)), key=lambda r: float(r["wall"]))
                result = json.loads(runs3[1]["stdout"])
                walls[threads or "default threads"] = float(runs3[1]["wall"])
                row(f"ours, {name}{', EVAL_THREADS=1' if threads else ''}", runs3[1], result["metrics"]["AP"])
                print(f"    {as_scored(result, 'AP')}")
        if args.official:
            with tempfile.TemporaryDirectory() as tmp, scratch_copy(args.official) as evaluator:
                with zipfile.ZipFile(stored) as zf:
                    zf.extractall(tmp)
                total = 0.0
                for aspect in args.aspects:
                    run = run_official(evaluator, vocabulary[aspect], Path(tmp, aspect), labels / "gt" / aspect,
                                       Path(tmp, f"out_{aspect}.csv"), args.official_python, "warm")
                    total += run["wall"]
                    print(f"    official evaluator, {aspect}: {Path(tmp, f'out_{aspect}.csv').read_text().splitlines()[-1]}")
                ratios = ", ".join(f"{total / wall:.1f}x with {'EVAL_THREADS=1' if k == '1' else k}"
                                   for k, wall in walls.items())
                print(f"    official evaluator (unmodified, torch CPU), warm: {total:.2f} s wall; ours as scored {ratios}")
