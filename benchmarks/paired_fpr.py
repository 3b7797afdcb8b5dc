"""How often does the paired test call two equally good methods different? Its false-positive rate, simulated.

    nice .venv/bin/python benchmarks/paired_fpr.py [--replicates 4000] [--shapes sqa3d mmscan openscan]
        [--permutations B] [--quick]

Each replicate draws a split of S scenes and two methods of EQUAL population
accuracy on it (each scene with a difficulty both share and each method its
own luck in it: the scene-by-method effect that makes a method's lead in a
scene carry over to its other units), and tests A - B with the service's own
test function: ``Track.stack`` and ``Track.statistic`` of the track, then
``metrics.permutation.paired_permutation`` (exact up to 16 scenes, else
``EVAL_PAIRED_PERMUTATIONS`` random swaps, 999 by default), as
``worker.significance.compare`` does. A false positive is p < 0.05 before any
adjustment. With B random swaps the test's size is floor(0.05 (B + 1)) / (B + 1)
whatever the data (4.9 % at 999, 4.5 % at 199) when the swaps are truly
exchangeable and the statistic has no ties: what the simulation checks is
that they are (the stacking, the scenes swapped) and what ties do; a smaller
``--permutations`` makes a cell cheaper (a test costs B x the entries). It
prints each cell's rate with its binomial 95 % interval (Wilson), the
track's minimum of scenes (below it the service runs no test:
the rate is reported, and must stay at most 6.5 %; from it up it must lie
within 3.5-6.5 %) and the seconds per test.

Shapes:
- ``sqa3d``: S scenes x 52 questions (the test split: 3,519 questions in 67
  scenes); a question is right with probability logistic(difficulty + luck),
  difficulty ~ N(0, 0.6) a scene, luck ~ N(0, 0.4) a scene and method; EM.
- ``mmscan``: 10 prompts a scene (``synthetic.mmscan_vg.make_methods``: 1-3
  target boxes, 0-12 predictions a prompt, the near misses' offsets scaled by
  the scene's difficulty and the method's luck, log-normal sd 0.5 each), scored
  by the track's scorer once for a population of 2,000 scenes x 6 methods; a
  replicate takes S of those scenes and two different methods in each;
  gTop-1@0.25 (a mean over prompts) and AP_box@0.25 (pooled PR curves).
- ``openscan``: one aspect's PR-curve entries drawn directly, as
  ``benchmarks/coverage.py`` does: 10 classes (2 instances a scene down to
  one in 50 scenes, three rare), instances shared by both methods, each
  method's detection rate a scene Beta(6, 4), 0.3 false positives a scene and
  class; AP and AP50 by the track's statistic. A test costs B x its entries
  (3 s at 312 scenes and B = 999 here): the figures use B = 199.

Nothing is written to disk.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from evaluation_workers.metrics import permutation  # noqa: E402
from evaluation_workers.tracks import get_track  # noqa: E402

LEVEL = 0.05
BAND = (0.035, 0.065)

Pair = tuple[dict[str, Any], dict[str, Any]]


# ---- SQA3D-shaped: EM of questions in scenes ----

def sqa3d_pairs(scenes: int, per_scene: int = 52) -> Callable[[np.random.Generator], Pair]:
    def draw(rng: np.random.Generator) -> Pair:
        scene = np.repeat(np.arange(scenes), per_scene)
        kinds = rng.integers(0, 6, scene.shape[0])
        difficulty = rng.normal(0.0, 0.6, scenes)
        methods = []
        for _ in range(2):
            logit = difficulty + rng.normal(0.0, 0.4, scenes)
            em = rng.random(scene.shape[0]) < 1 / (1 + np.exp(-logit[scene]))
            methods.append({"em": em, "em_r": em, "type": kinds, "scene": scene})
        return methods[0], methods[1]

    return draw


# ---- MMScan-shaped: the track's scorer on a population of scenes, two methods a scene ----

class MMScanPopulation:
    """Every method's outcomes on every scene of a population, scored once; a replicate assembles two
    methods' outcomes on some of the scenes, as the scorer would have kept them on that split."""

    def __init__(self, scenes: int = 2000, methods: int = 6, prompts_per_scene: int = 10, seed: int = 7) -> None:
        from evaluation_workers import _xp
        from evaluation_workers.metrics import bootstrap
        from evaluation_workers.synthetic.mmscan_vg import make_methods
        from evaluation_workers.tracks.mmscan_vg.labels import GROUPS, SUB_CLASS_GROUP, Labels, Predictions
        from evaluation_workers.tracks.mmscan_vg.score import score_arrays

        labels, predicted = make_methods(scenes * prompts_per_scene, methods, seed=seed,
                                         prompts_per_scene=prompts_per_scene)
        scans, scan_index = bootstrap.scene_index([x["scan_id"] for x in labels])
        lab = Labels(sample_ids=[x["sample_id"] for x in labels],
                     group=np.array([GROUPS.index(SUB_CLASS_GROUP[x["sub_class"]]) for x in labels]),
                     gt_count=np.array([len(x["gt_bboxes"]) for x in labels]),
                     gt_boxes=np.concatenate([np.asarray(x["gt_bboxes"]) for x in labels]),
                     scans=scans, scan_index=scan_index)
        self.kept = []
        for arrays in predicted:
            preds = Predictions(sample=np.repeat(np.arange(len(labels)), np.diff(arrays["offsets"])),
                                boxes=arrays["pred_bboxes"], scores=arrays["pred_scores"], missing=[],
                                entries=len(labels))
            outcomes: dict[str, Any] = {}
            score_arrays(lab, preds, _xp.backend(), outcomes=outcomes)
            self.kept.append(outcomes)
        self.values = np.stack([k["values"] for k in self.kept])  # (methods, prompts, metrics)
        self.scene = scan_index
        self.n_scenes, self.methods = scenes, methods

    def pairs(self, scenes: int) -> Callable[[np.random.Generator], Pair]:
        def draw(rng: np.random.Generator) -> Pair:
            chosen = np.sort(rng.choice(self.n_scenes, scenes, replace=False))
            first = rng.integers(0, self.methods, scenes)
            second = (first + rng.integers(1, self.methods, scenes)) % self.methods  # another method
            return self.assemble(chosen, first), self.assemble(chosen, second)

        return draw

    def assemble(self, chosen: np.ndarray, method_of: np.ndarray) -> dict[str, Any]:
        """The outcomes of a split of the ``chosen`` scenes (sorted), scene i scored by method ``method_of[i]``."""
        rank = np.full(self.n_scenes, -1, dtype=np.int64)
        rank[chosen] = np.arange(chosen.shape[0])
        prompt_rank = rank[self.scene]
        selected = np.flatnonzero(prompt_rank >= 0)  # the split's prompts, in label order
        new_index = np.full(self.scene.shape[0], -1, dtype=np.int64)
        new_index[selected] = np.arange(selected.shape[0])
        method = np.full(self.scene.shape[0], -1, dtype=np.int64)
        method[selected] = method_of[prompt_rank[selected]]
        first = self.kept[0]
        values = self.values[method[selected], selected]
        parts: dict[str, list[np.ndarray]] = {key: [] for key in ("sample", "tp", "score", "own")}
        for m, kept in enumerate(self.kept):
            keep = np.flatnonzero(method[kept["pool_sample"]] == m)
            parts["sample"].append(new_index[kept["pool_sample"][keep]])
            parts["tp"].append(kept["pool_tp"][keep])
            parts["score"].append(kept["pool_score"][keep])
            parts["own"].append(keep)
        sample, tp, score, own = (np.concatenate(parts[k]) for k in ("sample", "tp", "score", "own"))
        order = np.lexsort((own, sample, -score))  # as the scorer ranks: score, label order, rank
        group = first["group"][selected]
        return {"values": values, "group": group, "gt_count": first["gt_count"][selected],
                "scene": prompt_rank[selected], "pool_sample": sample[order], "pool_group": group[sample[order]],
                "pool_tp": tp[order], "pool_score": score[order]}


# ---- OpenScan-shaped: one aspect's PR-curve entries, instances shared ----

# benchmarks/coverage.py's aspect, on which the intervals' minimum of 150 scenes was measured: 10 classes,
# three of them rare (one instance in 20, 35 and 50 scenes). Twenty classes doubled a test's cost.
CLASSES = 10
RATES = np.array([2.0, 1.5, 1.2, 1.0, 0.8, 0.6, 0.4, 1 / 20, 1 / 35, 1 / 50])


def _openscan_entries(rng: np.random.Generator, n_gt: np.ndarray) -> dict[str, Any]:
    from evaluation_workers.metrics.instance_ap import IOU_THRESHOLDS

    thresholds = np.asarray(IOU_THRESHOLDS)
    scenes = n_gt.shape[0]
    detect = rng.beta(6.0, 4.0, scenes)  # this method's detection rate in each scene
    inst_scene = np.repeat(np.repeat(np.arange(scenes), CLASSES), n_gt.ravel())
    inst_class = np.tile(np.arange(CLASSES), scenes).repeat(n_gt.ravel())
    found = rng.random(inst_scene.shape[0]) < detect[inst_scene]
    d_scene, d_class = inst_scene[found], inst_class[found]
    iou = rng.beta(7.0, 2.0, d_scene.shape[0])
    d_score = np.clip(0.5 * iou + 0.5 * rng.random(d_scene.shape[0]), 0, 1)
    n_fp = rng.poisson(0.3, (scenes, CLASSES))
    f_scene = np.repeat(np.repeat(np.arange(scenes), CLASSES), n_fp.ravel())
    f_class = np.tile(np.arange(CLASSES), scenes).repeat(n_fp.ravel())
    unit = np.concatenate([d_scene, f_scene])
    cls = np.concatenate([d_class, f_class])
    score = np.concatenate([d_score, 0.6 * rng.random(f_scene.shape[0])])
    hit = np.concatenate([iou, np.zeros(f_scene.shape[0])])
    t = len(thresholds)
    return {"material": {"group": (np.arange(t)[:, None] * CLASSES + cls[None, :]).ravel(),
                         "is_true": (hit[None, :] > thresholds[:, None]).ravel(),
                         "score": np.tile(score, t), "unit": np.tile(unit, t), "n_pos": n_gt.astype(np.int64)}}


def openscan_pairs(scenes: int) -> Callable[[np.random.Generator], Pair]:
    def draw(rng: np.random.Generator) -> Pair:
        n_gt = rng.poisson(RATES[None, :], (scenes, CLASSES))
        return _openscan_entries(rng, n_gt), _openscan_entries(rng, n_gt)

    return draw


# ---- the simulation ----

def wilson(hits: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """The binomial 95 % interval of hits / n (Wilson's score interval)."""
    if n == 0:
        return 0.0, 1.0
    p = hits / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def cell(track_name: str, draw: Callable[[np.random.Generator], Pair], keys: tuple[str, ...], replicates: int,
         seed: int) -> dict[str, Any]:
    """Draw ``replicates`` pairs and test each as the service does; the p-values of ``keys``."""
    track = get_track(track_name)
    assert track.stack is not None and track.units_of is not None
    rng = np.random.default_rng(seed)
    p_values: dict[str, list[float]] = {key: [] for key in keys}
    spent = 0.0
    scenes = 0
    exact = False
    for _ in range(replicates):
        a, b = draw(rng)
        t0 = time.perf_counter()
        stacked = track.stack(a, b)
        units = track.scenes_of(a) if track.scenes_of else None
        width = track.width(stacked) if track.width else 1
        found = permutation.paired_permutation(track.statistic(stacked), track.units_of(a), units, width=width)
        spent += time.perf_counter() - t0
        scenes = track.units_of(a) if units is None else int(units.max()) + 1
        exact = found[keys[0]]["exact"]
        for key in keys:
            p_values[key].append(np.nan if found[key]["p_value"] is None else found[key]["p_value"])
    return {"p": {k: np.asarray(v) for k, v in p_values.items()}, "seconds": spent / max(replicates, 1),
            "scenes": scenes, "exact": exact}


def report(name: str, track_name: str, found: dict[str, Any]) -> bool:
    """Print a cell's rates; whether they meet the bounds (3.5-6.5 % from the minimum up, <= 6.5 % below)."""
    least = get_track(track_name).min_scenes
    scenes = found["scenes"]
    below = scenes < least
    ok = True
    for key, p in found["p"].items():
        defined = p[np.isfinite(p)]
        hits = int((defined < LEVEL).sum())
        rate = hits / max(defined.size, 1)
        lo, hi = wilson(hits, defined.size)
        within = rate <= BAND[1] if below else BAND[0] <= rate <= BAND[1]
        ok &= within
        how = "exact" if found["exact"] else f"{permutation.permutations_setting()} swaps"
        print(f"  {name:<10} {scenes:>4} scenes{' (below the minimum)' if below else '':<21} {key:<14} "
              f"{100 * rate:5.2f} % [{100 * lo:4.2f}, {100 * hi:4.2f}] of {defined.size:>5}  {how:<11} "
              f"{1000 * found['seconds']:7.1f} ms/test  {'ok' if within else 'OUT OF BOUNDS'}", flush=True)
    return ok


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--replicates", type=int, default=4000)
    parser.add_argument("--shapes", nargs="*", default=["sqa3d", "mmscan", "openscan"])
    parser.add_argument("--quick", action="store_true", help="a smoke run: 200 replicates, fewer scenes")
    parser.add_argument("--permutations", type=int,
                        help="B of the Monte Carlo tests (EVAL_PAIRED_PERMUTATIONS; default the service's)")
    parser.add_argument("--scenes", type=int, nargs="*",
                        help="only these scene counts (a cell of a long run, run again on its own)")
    args = parser.parse_args()
    os.environ.setdefault("EVAL_DEVICE", "cpu")
    if args.permutations:
        os.environ["EVAL_PAIRED_PERMUTATIONS"] = str(args.permutations)
    replicates = 200 if args.quick else args.replicates
    print(f"CPU: {_cpu()}; EVAL_THREADS={os.environ.get('EVAL_THREADS', 'default')}; {replicates} replicates a cell; "
          f"p < {LEVEL} before adjustment; {time.strftime('%Y-%m-%d %H:%M')}", flush=True)
    counts = {"sqa3d": (4, 8, 20) if args.quick else (4, 8, 20, 67, 150),
              "mmscan": (4, 8, 20) if args.quick else (4, 8, 20, 67, 150),
              "openscan": (4, 8, 150) if args.quick else (4, 8, 150, 312)}
    if args.scenes:
        counts = {shape: tuple(args.scenes) for shape in counts}
    ok = True
    started = time.perf_counter()
    if "sqa3d" in args.shapes:
        print("\nSQA3D-shaped (52 questions a scene)")
        for s in counts["sqa3d"]:
            ok &= report("SQA3D", "sqa3d", cell("sqa3d", sqa3d_pairs(s), ("EM",), replicates, 1000 + s))
    if "mmscan" in args.shapes:
        t0 = time.perf_counter()
        population = MMScanPopulation(scenes=400 if args.quick else 2000)
        print(f"\nMMScan-shaped (10 prompts a scene; population of {population.n_scenes} scenes x "
              f"{population.methods} methods scored in {time.perf_counter() - t0:.0f} s)")
        for s in counts["mmscan"]:
            ok &= report("MMScan", "mmscan-vg", cell("mmscan-vg", population.pairs(s), ("gTop-1@0.25", "AP_box@0.25"),
                                                     replicates, 2000 + s))
    if "openscan" in args.shapes:
        print(f"\nOpenScan-shaped (one aspect, {CLASSES} classes, instances shared by both methods)")
        for s in counts["openscan"]:
            ok &= report("OpenScan", "openscan", cell("openscan", openscan_pairs(s), ("AP", "AP50"), replicates,
                                                      3000 + s))
    print(f"\n{'every cell within its bounds' if ok else 'SOME CELL OUT OF BOUNDS'} "
          f"({time.perf_counter() - started:.0f} s)")
    return 0 if ok else 1


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
