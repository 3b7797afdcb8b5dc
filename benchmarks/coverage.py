"""How often do the intervals cover the truth? Coverage of 95 % bootstrap intervals, simulated.

    nice .venv/bin/python benchmarks/coverage.py [--replicates 200] [--shapes sqa3d mmscan openscan]

Each replicate draws a new test set from a population whose value is known
(or measured on a sample a hundred times larger), scores it with the track's
own bootstrap statistic, and forms 95 % intervals from the same 1,000
resamples by each method (``metrics.confidence``: percentile, basic, BCa),
resampling scenes as the service does; beside them, resampling single
questions or prompts (what the service did before, which ignores that units
of one scene are alike). It prints, per shape and method, the share of
replicates whose interval covers the population value (with its binomial
standard error), the mean width, and what the intervals cost.

Shapes (with scene effects, so that units of a scene are correlated):
- ``sqa3d``: 67 scenes x 52 questions (the test split: 3,519 questions in 67
  scenes); a scene's accuracy is Beta-distributed around 0.5 with intra-scene
  correlation 0.09; the population EM is 0.5.
- ``mmscan``: synthetic prompts (``synthetic.mmscan_vg``), 10 prompts a scene,
  the near misses' offsets scaled per scene (log-normal, sd 0.5); scored by
  the track's scorer; the population values are measured on 100,000 prompts.
- ``openscan``: the PR-curve entries of one aspect drawn directly: 10
  classes, three of them rare (one instance in 20-50 scenes), a scene's
  detection rate Beta-distributed; AP, AP50 and AP25 by the track's
  statistic; at 50 and 312 scenes (OpenScan's val). The population values are
  measured on 30,000 scenes.

Nothing is written to disk.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from evaluation_workers.metrics import bootstrap, confidence  # noqa: E402

LEVEL_Z = 1.96
METHODS = ("percentile", "basic", "bca")


# ---- SQA3D-shaped: EM of questions in scenes ----

def sqa3d_population(scenes: int = 67, per_scene: int = 52, icc: float = 0.09,
                     accuracy: float = 0.5) -> Callable[[np.random.Generator], dict[str, Any]]:
    from evaluation_workers.tracks.sqa3d import outcomes_statistic

    # A scene's accuracy ~ Beta(a, b) with mean ``accuracy`` and a + b = 1 / icc - 1: the intra-scene
    # correlation of the questions' hits is then ``icc``.
    total = 1.0 / icc - 1.0
    a, b = accuracy * total, (1.0 - accuracy) * total

    def draw(rng: np.random.Generator) -> dict[str, Any]:
        p = rng.beta(a, b, scenes)
        scene = np.repeat(np.arange(scenes), per_scene)
        em = rng.random(scene.shape[0]) < p[scene]
        outcomes = {"em": em, "em_r": em, "type": rng.integers(0, 6, scene.shape[0])}
        return {"statistic": outcomes_statistic(outcomes), "n": scene.shape[0], "scenes": scene,
                "width": 1, "truth": {"EM": accuracy}}

    return draw


# ---- MMScan-shaped: the track's scorer on synthetic prompts with scene effects ----

def _mmscan_outcomes(samples: int, seed: int, spread: float) -> dict[str, Any]:
    from evaluation_workers import _xp
    from evaluation_workers.synthetic.mmscan_vg import make_arrays
    from evaluation_workers.tracks.mmscan_vg.labels import GROUPS, SUB_CLASS_GROUP, Labels, Predictions
    from evaluation_workers.tracks.mmscan_vg.score import score_arrays

    labels, arrays = make_arrays(samples, seed=seed, max_preds=30, dtype=np.float64, scene_spread=spread)
    scans, scan_index = bootstrap.scene_index([x["scan_id"] for x in labels])
    lab = Labels(sample_ids=[x["sample_id"] for x in labels],
                 group=np.array([GROUPS.index(SUB_CLASS_GROUP[x["sub_class"]]) for x in labels]),
                 gt_count=np.array([len(x["gt_bboxes"]) for x in labels]),
                 gt_boxes=np.concatenate([np.asarray(x["gt_bboxes"]) for x in labels]),
                 scans=scans, scan_index=scan_index)
    preds = Predictions(sample=np.repeat(np.arange(len(labels)), np.diff(arrays["offsets"])),
                        boxes=arrays["pred_bboxes"], scores=arrays["pred_scores"], missing=[], entries=len(labels))
    outcomes: dict[str, Any] = {}
    values = score_arrays(lab, preds, _xp.backend(), outcomes=outcomes)
    outcomes["scene"] = scan_index
    return {"outcomes": outcomes, "metrics": values["metrics"]}


def mmscan_population(samples: int = 5000, spread: float = 0.5,
                      reference: int = 100_000) -> Callable[[np.random.Generator], dict[str, Any]]:
    from evaluation_workers.tracks.mmscan_vg import intervals

    truth = _mmscan_outcomes(reference, 999_999, spread)["metrics"]

    def draw(rng: np.random.Generator) -> dict[str, Any]:
        o = _mmscan_outcomes(samples, int(rng.integers(2**31)), spread)["outcomes"]
        return {"statistic": intervals.statistic(o), "n": intervals.units_of(o), "scenes": o["scene"],
                "width": intervals.width(o),
                "truth": {k: truth[k] for k in ("gTop-1@0.25", "AP_sample@0.25", "AP_box@0.25", "AR@0.5")}}

    return draw


# ---- OpenScan-shaped: one aspect's PR-curve entries, rare classes ----

CLASSES = 10
RARE = (7, 8, 9)  # one instance in 20, 35 and 50 scenes
RATES = np.array([2.0, 1.5, 1.2, 1.0, 0.8, 0.6, 0.4, 1 / 20, 1 / 35, 1 / 50])


def _openscan_outcomes(rng: np.random.Generator, scenes: int) -> dict[str, Any]:
    from evaluation_workers.metrics.instance_ap import IOU_THRESHOLDS

    thresholds = np.asarray(IOU_THRESHOLDS)
    n_gt = rng.poisson(RATES[None, :], (scenes, CLASSES))  # (S, K)
    detect = rng.beta(6.0, 4.0, scenes)  # a scene's detection rate
    # Detections of instances: IoU mostly high, score higher when the IoU is.
    inst_scene = np.repeat(np.repeat(np.arange(scenes), CLASSES), n_gt.ravel())
    inst_class = np.tile(np.arange(CLASSES), scenes).repeat(n_gt.ravel())
    found = rng.random(inst_scene.shape[0]) < detect[inst_scene]
    d_scene, d_class = inst_scene[found], inst_class[found]
    iou = rng.beta(7.0, 2.0, d_scene.shape[0])
    d_score = np.clip(0.5 * iou + 0.5 * rng.random(d_scene.shape[0]), 0, 1)
    # False positives: a few per scene and class, lower scores.
    n_fp = rng.poisson(0.3, (scenes, CLASSES))
    f_scene = np.repeat(np.repeat(np.arange(scenes), CLASSES), n_fp.ravel())
    f_class = np.tile(np.arange(CLASSES), scenes).repeat(n_fp.ravel())
    f_score = 0.6 * rng.random(f_scene.shape[0])
    unit = np.concatenate([d_scene, f_scene])
    cls = np.concatenate([d_class, f_class])
    score = np.concatenate([d_score, f_score])
    hit = np.concatenate([iou, np.zeros(f_scene.shape[0])])
    t = len(thresholds)
    entries = {
        "group": (np.arange(t)[:, None] * CLASSES + cls[None, :]).ravel(),
        "is_true": (hit[None, :] > thresholds[:, None]).ravel(),
        "score": np.tile(score, t),
        "unit": np.tile(unit, t),
        "n_pos": n_gt.astype(np.int64),
    }
    return {"material": entries}


def openscan_population(scenes: int, reference: int = 30_000) -> Callable[[np.random.Generator], dict[str, Any]]:
    from evaluation_workers.tracks.openscan import intervals

    def values(outcomes: dict[str, Any]) -> dict[str, float]:
        return bootstrap.observed(intervals.statistic(outcomes), intervals.units_of(outcomes))

    big = values(_openscan_outcomes(np.random.default_rng(12345), reference))
    truth = {k: big[k] for k in ("AP", "AP50", "AP25")}

    def draw(rng: np.random.Generator) -> dict[str, Any]:
        o = _openscan_outcomes(rng, scenes)
        return {"statistic": intervals.statistic(o), "n": intervals.units_of(o), "scenes": None,
                "width": intervals.width(o), "truth": truth}

    return draw


# ---- the simulation ----

def one_replicate(case: dict[str, Any], resamples: int, seed: int) -> Iterator[tuple[str, str, list[float] | None,
                                                                                    float]]:
    """(method, key, interval, seconds) for each method and key of one simulated test set."""
    stat, n, scenes, width = case["statistic"], case["n"], case["scenes"], case["width"]
    t0 = time.perf_counter()
    values = bootstrap.replicates(stat, n, resamples, seed, width=width, scenes=scenes)
    t_boot = time.perf_counter() - t0
    t0 = time.perf_counter()
    jack = bootstrap.jackknife(stat, n, width=width, scenes=scenes)
    t_jack = time.perf_counter() - t0
    point = bootstrap.observed(stat, n, scenes=scenes)
    for key in case["truth"]:
        yield "percentile", key, confidence.percentile_interval(values[key]), t_boot
        yield "basic", key, confidence.basic_interval(values[key], point[key]), t_boot
        yield "bca", key, confidence.bca_interval(values[key], point[key], jack[key]), t_boot + t_jack
    if scenes is not None:  # what the service did before: resample units, not scenes
        t0 = time.perf_counter()
        by_unit = bootstrap.replicates(stat, n, resamples, seed, width=width)
        t_unit = time.perf_counter() - t0
        for key in case["truth"]:
            yield "percentile by unit", key, confidence.percentile_interval(by_unit[key]), t_unit


def simulate(name: str, draw: Callable[[np.random.Generator], dict[str, Any]], replicates: int,
             resamples: int) -> None:
    rng = np.random.default_rng(20261202)
    tallies: dict[tuple[str, str], list[tuple[bool, float]]] = {}
    seconds: dict[str, list[float]] = {}
    truth: dict[str, float] = {}
    scenes_seen = 0
    started = time.perf_counter()
    for r in range(replicates):
        case = draw(rng)
        truth = case["truth"]
        scenes_seen = int(case["scenes"].max() + 1) if case["scenes"] is not None else case["n"]
        # Each replicate its own seed: a fixed one would reuse one set of resampled scene indices.
        for method, key, found, spent in one_replicate(case, resamples, seed=r + 1):
            covered = found is not None and found[0] <= truth[key] <= found[1]
            tallies.setdefault((method, key), []).append((covered, np.nan if found is None else found[1] - found[0]))
            if key == next(iter(truth)):
                seconds.setdefault(method, []).append(spent)
    print(f"\n{name}: {replicates} replicates, {scenes_seen} scenes, {resamples} resamples "
          f"({time.perf_counter() - started:.0f} s); population " +
          ", ".join(f"{k} {v:.4f}" for k, v in truth.items()))
    print(f"  {'method':<20} {'value':<16} {'coverage':>16} {'mean width':>11} {'s/interval set':>15}")
    for (method, key), rows in tallies.items():
        cover = np.mean([c for c, _ in rows])
        se = np.sqrt(cover * (1 - cover) / len(rows))
        width = np.nanmean([w for _, w in rows])
        print(f"  {method:<20} {key:<16} {100 * cover:6.1f} % +- {100 * se:4.1f} {width:11.4f} "
              f"{np.mean(seconds[method]):15.3f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--replicates", type=int, default=200)
    parser.add_argument("--resamples", type=int, default=1000)
    parser.add_argument("--shapes", nargs="*", default=["sqa3d", "mmscan", "openscan"])
    parser.add_argument("--openscan-scenes", nargs="*", type=int, default=[50, 100, 312])
    args = parser.parse_args()
    os.environ.setdefault("EVAL_DEVICE", "cpu")
    print(f"CPU: {_cpu()}; EVAL_THREADS={os.environ.get('EVAL_THREADS', 'default')}")
    if "sqa3d" in args.shapes:
        simulate("SQA3D-shaped (67 scenes x 52 questions, ICC 0.09)", sqa3d_population(), args.replicates,
                 args.resamples)
        simulate("SQA3D-shaped, few scenes (20 scenes x 52 questions, ICC 0.09)", sqa3d_population(scenes=20),
                 args.replicates, args.resamples)
    if "mmscan" in args.shapes:
        simulate("MMScan-shaped (5,000 prompts in 500 scenes, scene spread 0.5)", mmscan_population(),
                 args.replicates, args.resamples)
    if "openscan" in args.shapes:
        for scenes in args.openscan_scenes:
            simulate(f"OpenScan-shaped ({scenes} scenes, 10 classes, 3 rare)", openscan_population(scenes),
                     args.replicates, args.resamples)
    return 0


def _cpu() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"


if __name__ == "__main__":
    raise SystemExit(main())
