"""GPU check for MMScan visual grounding: CuPy equals NumPy; CuPy time at 200,000 prompts.

Called by ``benchmarks/gpu_check.py`` (``run()``), or alone:
``python benchmarks/gpu_mmscan_vg.py [--prompts 200000]``.
Target: 200,000 prompts (about 6M predicted boxes, 18M box pairs) score in
under 5 s on one GPU, from loaded arrays (reading a 1 GiB JSON file is host
work and is timed separately on a 5,000-prompt file).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gpu_check import assert_results_equal  # benchmarks/ is on sys.path: scripts run from here

from evaluation_workers.metrics.iou3d import paired_iou3d
from evaluation_workers.synthetic.mmscan_vg import make_data
from evaluation_workers.tracks import mmscan_vg


def _arrays(
    labels: list[dict[str, Any]], preds: list[dict[str, Any]], copies: int
) -> tuple[mmscan_vg.Labels, mmscan_vg.Predictions]:
    """Labels and predictions as arrays, the prompts repeated ``copies`` times (each copy shifted)."""
    gt_count = np.array([len(x["gt_bboxes"]) for x in labels])
    gt = np.array([b for x in labels for b in x["gt_bboxes"]], dtype=float)
    group = np.array([mmscan_vg.GROUPS.index(mmscan_vg.SUB_CLASS_GROUP[x["sub_class"]]) for x in labels])
    counts = np.array([len(p["pred_scores"]) for p in preds])
    boxes = np.array([b for p in preds for b in p["pred_bboxes"]], dtype=float).reshape(-1, 9)
    scores = np.array([s for p in preds for s in p["pred_scores"]], dtype=float)
    n = len(labels)
    rng = np.random.default_rng(1)
    all_gt = np.tile(gt, (copies, 1))  # copies share the geometry; predictions are jittered
    all_boxes = np.concatenate([boxes + rng.normal(0, 1e-3, boxes.shape) * (c > 0) for c in range(copies)])
    labels_arr = mmscan_vg.Labels(
        sample_ids=[str(i) for i in range(n * copies)],
        group=np.tile(group, copies),
        gt_count=np.tile(gt_count, copies),
        gt_boxes=all_gt,
    )
    sample = np.concatenate([np.repeat(np.arange(n) + c * n, counts) for c in range(copies)])
    preds_arr = mmscan_vg.Predictions(
        sample=sample, boxes=all_boxes, scores=np.tile(scores, copies), missing=[], entries=n * copies
    )
    return labels_arr, preds_arr


def _edge_boxes(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Identical, touching, same-floor, nested and tilted pairs."""
    b1 = np.hstack([rng.uniform(-1, 1, (n, 3)), rng.uniform(0.2, 2, (n, 3)), rng.uniform(-3, 3, (n, 3))])
    b1[: n // 2, 7:] = 0
    b2 = b1.copy()
    q = n // 5
    b2[q : 2 * q, 0] += b1[q : 2 * q, 3] * 0.999999  # nearly touching
    b2[2 * q : 3 * q, 3:6] *= 0.5  # nested
    b2[3 * q : 4 * q, :2] += rng.normal(0, 0.3, (q, 2))  # same floor and height
    b2[4 * q :, :3] += rng.normal(0, 0.3, (n - 4 * q, 3))
    b2[4 * q :, 6:] += rng.normal(0, 0.3, (n - 4 * q, 3))
    return b1, b2


def run(prompts: int = 200_000) -> None:
    import cupy
    from array_api_compat import cupy as xc
    from array_api_compat import numpy as xn

    rng = np.random.default_rng(0)
    b1, b2 = _edge_boxes(rng, 20_000)
    cpu = np.asarray(paired_iou3d(xn.asarray(b1), xn.asarray(b2)))
    gpu = cupy.asnumpy(paired_iou3d(xc.asarray(b1), xc.asarray(b2), mmscan_vg.GPU_CHUNK_PAIRS))
    diff = float(np.abs(cpu - gpu).max())
    print(f"mmscan-vg IoU, 20,000 edge-case pairs: max |numpy - cupy| = {diff:.1e}")
    assert diff < 1e-12, f"IoU differs by {diff}"

    base = 5000
    labels, preds = make_data(base, seed=0, empty_fraction=0.02)
    lab, pr = _arrays(labels, preds, 1)
    want = mmscan_vg.score_arrays(lab, pr, xn)
    got = mmscan_vg.score_arrays(lab, pr, xc, mmscan_vg.GPU_CHUNK_PAIRS)  # also warms CUDA up
    assert_results_equal(want, got)
    start = time.perf_counter()
    mmscan_vg.score_arrays(lab, pr, xn)
    cpu_s = time.perf_counter() - start
    print(f"mmscan-vg {base} prompts: numpy == cupy on every value; numpy arrays {cpu_s:.2f} s")

    work = Path(tempfile.mkdtemp(prefix="mmscan_gpu_"))
    (work / "labels.json").write_text(json.dumps(labels))
    (work / "predictions.json").write_text(json.dumps(preds))
    start = time.perf_counter()
    loaded = mmscan_vg.load_labels(work / "labels.json")
    mmscan_vg.load_predictions(work / "predictions.json", loaded.index)
    print(f"mmscan-vg reading {base} prompts' JSON (host): {time.perf_counter() - start:.2f} s")

    copies = max(1, prompts // base)
    big_lab, big_pr = _arrays(labels, preds, copies)
    for attempt in range(2):
        cupy.cuda.Device().synchronize()
        start = time.perf_counter()
        mmscan_vg.score_arrays(big_lab, big_pr, xc, mmscan_vg.GPU_CHUNK_PAIRS)
        cupy.cuda.Device().synchronize()
        seconds = time.perf_counter() - start
        print(
            f"mmscan-vg {base * copies} prompts, {len(big_pr.sample)} predicted boxes on the GPU "
            f"(run {attempt + 1}): {seconds:.2f} s (target < 5 s)"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--prompts", type=int, default=200_000)
    run(parser.parse_args().prompts)
