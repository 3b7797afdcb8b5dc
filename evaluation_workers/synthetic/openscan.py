"""OpenScan: synthetic labels folder and predictions (official zip and/or compact .npz).

Scenes are runs of vertices ("segments", as a mesh's vertex order keeps
neighbours together) assigned to objects with log-normal sizes or to void.
Each object gets, per aspect, a Zipf-distributed attribute of the real
vocabulary or none (void in that aspect). Predictions are class-agnostic
proposals shared by the aspects, as real methods produce them: noisy copies of
objects, duplicates, merges, mostly-void blobs, masks under 100 vertices; per
aspect each proposal gets a class (often the right one) and a score with ties.
"""

from __future__ import annotations

import argparse
import io
import json
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from evaluation_workers.tracks.openscan.compact import COMPACT_FORMAT
from evaluation_workers.tracks.openscan.labels import ASPECTS, DEFAULT_VOCABULARY

# share of objects that carry an attribute of the aspect (Table 2: annotations per object)
COVERAGE = {
    "affordance": 0.77,
    "property": 0.18,
    "type": 0.58,
    "manner": 0.10,
    "synonym": 0.06,
    "requirement": 0.20,
    "element": 0.28,
    "material": 0.99,
}


@dataclass
class SyntheticScene:
    """One scene: per-vertex object (0 void), per-aspect gt values, proposals as segment sets."""

    scene_id: str
    n_vertices: int
    seg_start: np.ndarray  # (G,) int64
    seg_len: np.ndarray  # (G,) int64
    proposals: list[np.ndarray]  # each a sorted array of segment indices
    gt: dict[str, np.ndarray]  # aspect -> (V,) int64 official values
    classes: dict[str, np.ndarray]  # aspect -> (M,) predicted attribute ids
    scores: dict[str, np.ndarray]  # aspect -> (M,)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--scenes", type=int, default=10)
    parser.add_argument("--points", type=int, default=150_000, help="vertices per scene")
    parser.add_argument("--instances", type=int, nargs=2, default=(30, 50), metavar=("MIN", "MAX"))
    parser.add_argument("--masks", type=int, default=100, help="proposals per scene")
    parser.add_argument("--aspects", nargs="+", default=list(ASPECTS), choices=ASPECTS)
    parser.add_argument("--format", choices=("official", "compact", "both"), default="both")
    parser.add_argument("--semantic", action="store_true", help="also write sem_pred")
    parser.add_argument(
        "--missing", type=int, default=0, help="leave this many scenes out of the predictions"
    )
    parser.add_argument("--seed", type=int, default=0)


def _zipf(rng: np.random.Generator, k: int, size: int) -> np.ndarray:
    weights = 1.0 / np.arange(1, k + 1) ** 1.1
    return rng.choice(np.arange(1, k + 1), size=size, p=weights / weights.sum())


def make_scene(
    rng: np.random.Generator,
    scene_id: str,
    n_vertices: int,
    instances: tuple[int, int],
    n_masks: int,
    vocabulary: dict[str, list[str]],
    aspects: list[str],
) -> SyntheticScene:
    n_obj = int(rng.integers(instances[0], instances[1] + 1))
    seg_len = np.maximum(1, rng.lognormal(np.log(40), 0.8, size=n_vertices // 20)).astype(np.int64)
    seg_len = seg_len[np.cumsum(seg_len) <= n_vertices]
    seg_len = np.append(seg_len, n_vertices - seg_len.sum())
    seg_len = seg_len[seg_len > 0]
    seg_start = np.cumsum(seg_len) - seg_len
    size_weight = rng.lognormal(0.0, 1.2, size=n_obj)
    p = np.append(size_weight / size_weight.sum() * 0.7, 0.3)  # 30% of segments are void (walls, floor)
    seg_obj = rng.choice(np.arange(1, n_obj + 2), size=len(seg_len), p=p)
    seg_obj[seg_obj == n_obj + 1] = 0
    vert_obj = np.repeat(seg_obj, seg_len)

    gt, attr_of = {}, {}
    for aspect in aspects:
        k = len(vocabulary[aspect])
        attr = _zipf(rng, k, n_obj + 1)
        attr[rng.random(n_obj + 1) > max(COVERAGE[aspect], 0.3)] = 0
        attr[0] = 0
        attr_of[aspect] = attr
        values = np.where(attr > 0, attr * 1000 + np.arange(n_obj + 1) + 1, 0)
        gt[aspect] = values[vert_obj]

    segs_of = [np.flatnonzero(seg_obj == o) for o in range(n_obj + 1)]
    proposals: list[np.ndarray] = []
    source: list[int] = []
    n_seg = len(seg_len)
    while len(proposals) < n_masks:
        kind = rng.random()
        o = int(rng.integers(1, n_obj + 1))
        segs = segs_of[o]
        if kind < 0.6 and len(segs):  # noisy copy (duplicates arise when an object is drawn twice)
            keep = segs[rng.random(len(segs)) > rng.choice([0.0, 0.05, 0.2, 0.5])]
            extra = np.clip(segs + rng.integers(-2, 3, size=len(segs)), 0, n_seg - 1)
            extra = extra[rng.random(len(extra)) < rng.choice([0.0, 0.1, 0.3])]
            proposals.append(np.union1d(keep, extra))
        elif kind < 0.7 and len(segs):  # merge with another object
            proposals.append(np.union1d(segs, segs_of[int(rng.integers(1, n_obj + 1))]))
        elif kind < 0.85:  # blob of neighbouring segments, often mostly void
            s = int(rng.integers(0, n_seg))
            proposals.append(np.arange(s, min(n_seg, s + int(rng.integers(1, 60)))))
        elif len(segs):  # a small part of an object (often under 100 vertices)
            proposals.append(segs[: int(rng.integers(1, 3))])
        else:
            continue
        source.append(o if kind < 0.7 else 0)
    classes, scores = {}, {}
    for aspect in aspects:
        k = len(vocabulary[aspect])
        true = attr_of[aspect][np.array(source)]
        guess = _zipf(rng, k, n_masks)
        right = (true > 0) & (rng.random(n_masks) < 0.5)
        classes[aspect] = np.where(right, true, guess)
        raw = np.where(right, rng.beta(5, 2, n_masks), rng.beta(2, 5, n_masks))
        scores[aspect] = np.round(raw, 2).astype(np.float32)  # ties
    return SyntheticScene(scene_id, n_vertices, seg_start, seg_len, proposals, gt, classes, scores)


def proposal_runs(scene: SyntheticScene, proposal: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Runs (start, length) of one proposal, adjacent segments merged."""
    starts, lengths = scene.seg_start[proposal], scene.seg_len[proposal]
    if len(proposal) == 0:
        return starts, lengths
    new = np.ones(len(proposal), dtype=bool)
    new[1:] = np.diff(proposal) != 1
    group = np.cumsum(new) - 1
    return starts[new], np.bincount(group, weights=lengths).astype(np.int64)


def dense_masks(scene: SyntheticScene) -> np.ndarray:
    """(V, M) uint8 masks, the official layout."""
    masks = np.zeros((scene.n_vertices, len(scene.proposals)), dtype=np.uint8)
    for m, prop in enumerate(scene.proposals):
        starts, lengths = proposal_runs(scene, prop)
        for s, n in zip(starts, lengths):
            masks[s : s + n, m] = 1
    return masks


def semantic(scene: SyntheticScene, aspect: str) -> np.ndarray:
    """(V,) the class of the highest-scoring proposal covering each vertex, else 0."""
    sem = np.zeros(scene.n_vertices, dtype=np.int32)
    best = np.full(scene.n_vertices, -1.0)
    for m, prop in enumerate(scene.proposals):
        starts, lengths = proposal_runs(scene, prop)
        for s, n in zip(starts, lengths):
            better = best[s : s + n] < scene.scores[aspect][m]
            sem[s : s + n][better] = scene.classes[aspect][m]
            best[s : s + n][better] = scene.scores[aspect][m]
    return sem


def write_labels(out: Path, scenes: list[SyntheticScene], vocabulary: dict[str, list[str]]) -> Path:
    labels = out / "labels"
    (labels / "gt").mkdir(parents=True, exist_ok=True)
    (labels / "vocabulary.json").write_text(json.dumps(vocabulary, indent=1))
    for aspect in scenes[0].gt:
        (labels / "gt" / aspect).mkdir(exist_ok=True)
        for sc in scenes:
            (labels / "gt" / aspect / f"{sc.scene_id}.txt").write_text(
                "\n".join(map(str, sc.gt[aspect].tolist())) + "\n"
            )
    return labels


def write_official(path: Path, scenes: list[SyntheticScene], with_semantic: bool) -> Path:
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_STORED) as zf:
        for sc in scenes:
            masks = dense_masks(sc)
            for aspect in sc.classes:
                buf = io.BytesIO()
                arrays: dict[str, Any] = {
                    "pred_masks": masks,
                    "pred_scores": sc.scores[aspect],
                    "pred_classes": sc.classes[aspect],
                }
                if with_semantic:
                    arrays["sem_pred"] = semantic(sc, aspect)
                np.savez_compressed(buf, **arrays)
                zf.writestr(f"{aspect}/{sc.scene_id}.npz", buf.getvalue())
    return path


def compact_arrays(scenes: list[SyntheticScene], with_semantic: bool) -> dict[str, np.ndarray]:
    run_starts, run_lengths, run_counts, prop_counts = [], [], [], []
    for sc in scenes:
        prop_counts.append(len(sc.proposals))
        for prop in sc.proposals:
            s, n = proposal_runs(sc, prop)
            run_starts.append(s)
            run_lengths.append(n)
            run_counts.append(len(s))
    arrays: dict[str, np.ndarray] = {
        "format": np.array(COMPACT_FORMAT),
        "scene_ids": np.array([sc.scene_id for sc in scenes]),
        "vertex_counts": np.array([sc.n_vertices for sc in scenes], dtype=np.int64),
        "proposal_offsets": np.concatenate([[0], np.cumsum(prop_counts)]).astype(np.int64),
        "run_offsets": np.concatenate([[0], np.cumsum(run_counts)]).astype(np.int64),
        "run_starts": np.concatenate(run_starts).astype(np.uint32) if run_starts else np.zeros(0, np.uint32),
        "run_lengths": np.concatenate(run_lengths).astype(np.uint32)
        if run_lengths
        else np.zeros(0, np.uint32),
    }
    for aspect in scenes[0].classes if scenes else {}:
        counts = [len(sc.proposals) for sc in scenes]
        arrays[f"{aspect}.rows"] = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        arrays[f"{aspect}.proposal"] = np.concatenate([np.arange(c) for c in counts]).astype(np.int32)
        arrays[f"{aspect}.scores"] = np.concatenate([sc.scores[aspect] for sc in scenes])
        arrays[f"{aspect}.classes"] = np.concatenate([sc.classes[aspect] for sc in scenes]).astype(np.int16)
        if with_semantic:
            arrays[f"{aspect}.sem_pred"] = np.concatenate([semantic(sc, aspect) for sc in scenes]).astype(
                np.int16
            )
    return arrays


def generate(args: argparse.Namespace) -> dict[str, Any]:
    rng = np.random.default_rng(args.seed)
    vocabulary = json.loads(DEFAULT_VOCABULARY.read_text())
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    scenes = [
        make_scene(
            rng,
            f"scene{i:04d}_00",
            args.points,
            tuple(args.instances),
            args.masks,
            vocabulary,
            list(args.aspects),
        )
        for i in range(args.scenes)
    ]
    written: dict[str, Any] = {"labels": write_labels(out, scenes, vocabulary)}
    predicted = scenes[args.missing :]
    if args.format in ("official", "both"):
        written["official"] = write_official(out / "predictions.zip", predicted, args.semantic)
    if args.format in ("compact", "both"):
        arrays = compact_arrays(predicted, args.semantic)
        np.savez_compressed(out / "predictions.npz", **arrays)  # type: ignore[arg-type]
        written["compact"] = out / "predictions.npz"
    return written


def write_demo(folder: Path, split: str) -> tuple[Path, Path]:
    """Small labels (4 scenes, all aspects) and predictions for ``manage.py load_demo``."""
    args = argparse.Namespace(out=Path(folder), scenes=4, points=20_000, instances=(8, 14), masks=30,
                              aspects=list(ASPECTS), format="both", semantic=True, missing=0, seed=11)
    written = generate(args)
    return Path(written["labels"]), Path(written["compact"])
