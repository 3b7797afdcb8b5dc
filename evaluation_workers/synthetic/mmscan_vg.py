"""MMScan visual grounding: synthetic prompts, ground-truth boxes and ranked predictions.

Scenes are rooms of objects (mostly yaw-only boxes, some tilted in 3D, all
standing on a floor). Each prompt targets 1-5 objects of its scene and gets
10-50 predictions: near misses of its targets, boxes on other objects of the
scene, and random boxes. A few prompts get no predictions.
"""

from __future__ import annotations

import argparse
import gzip
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

SUB_CLASSES = (
    "VG_Single_Attribute_Unique",
    "VG_Single_Attribute_Common",
    "VG_Single_EQ",
    "VG_Single_Space",
    "VG_Inter_Attribute_OO",
    "VG_Inter_Space_OO",
    "VG_Inter_OR",
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", type=Path, required=True, help="folder to write into")
    parser.add_argument("--samples", type=int, default=500, help="number of prompts")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--min-preds", type=int, default=10)
    parser.add_argument("--max-preds", type=int, default=50)
    parser.add_argument("--max-gt", type=int, default=5)
    parser.add_argument(
        "--empty-fraction", type=float, default=0.02, help="share of prompts with an empty prediction list"
    )
    parser.add_argument(
        "--tilted-fraction", type=float, default=0.15, help="share of boxes with a full 3D rotation"
    )
    parser.add_argument("--gzip", action="store_true", help="write predictions.json.gz")
    parser.add_argument("--format", choices=("json", "npz"), default="json",
                        help="npz: the binary form (float32), predictions.npz")


def _samples(
    samples: int,
    seed: int,
    min_preds: int,
    max_preds: int,
    max_gt: int,
    empty_fraction: float,
    tilted_fraction: float,
    objects_per_scene: int,
    prompts_per_scene: int = 10,
    scene_spread: float = 0.0,
) -> Iterator[tuple[dict[str, Any], np.ndarray, np.ndarray]]:
    """Each prompt's label and its predicted boxes (n, 9) and scores (n,), in one random stream.

    ``scene_spread``: how much the predictions' quality varies from scene to scene (the
    standard deviation of the log of a scene's factor on the near misses' offsets): the scene
    effects that make prompts of one scene alike (``benchmarks/coverage.py``). Drawn from a
    stream of their own, so 0 gives the same data as before they existed.
    """
    rng = np.random.default_rng(seed)
    n_scenes = max(1, samples // prompts_per_scene)
    scenes = [_scene(rng, objects_per_scene, tilted_fraction) for _ in range(n_scenes)]
    jitter = np.exp(scene_spread * np.random.default_rng([seed, 1]).standard_normal(n_scenes))
    for i in range(samples):
        scene_id = int(rng.integers(n_scenes))
        objects = scenes[scene_id]
        n_gt = int(rng.integers(1, max_gt + 1))
        targets = rng.choice(objects.shape[0], size=n_gt, replace=False)
        gt = objects[targets]
        label = {
            "sample_id": f"scene{scene_id:04d}_00__{i:06d}",
            "scan_id": f"scene{scene_id:04d}_00",
            "text": f"find the object(s) number {i}",
            "sub_class": SUB_CLASSES[int(rng.integers(len(SUB_CLASSES)))],
            "gt_bboxes": gt.tolist(),
        }
        n_pred = 0 if rng.random() < empty_fraction else int(rng.integers(min_preds, max_preds + 1))
        boxes, scores = _predictions(rng, gt, objects, n_pred, tilted_fraction, float(jitter[scene_id]))
        yield label, boxes, scores


def make_data(
    samples: int,
    seed: int = 0,
    min_preds: int = 10,
    max_preds: int = 50,
    max_gt: int = 5,
    empty_fraction: float = 0.02,
    tilted_fraction: float = 0.15,
    objects_per_scene: int = 20,
    prompts_per_scene: int = 10,
    scene_spread: float = 0.0,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Labels and predictions as JSON-ready lists (see the module docstring and ``_samples``)."""
    labels: list[dict[str, Any]] = []
    predictions: list[dict[str, Any]] = []
    for label, boxes, scores in _samples(samples, seed, min_preds, max_preds, max_gt, empty_fraction,
                                         tilted_fraction, objects_per_scene, prompts_per_scene, scene_spread):
        labels.append(label)
        predictions.append(
            {"sample_id": label["sample_id"], "pred_bboxes": boxes.tolist(), "pred_scores": scores.tolist()}
        )
    return labels, predictions


def make_arrays(
    samples: int,
    seed: int = 0,
    min_preds: int = 10,
    max_preds: int = 50,
    max_gt: int = 5,
    empty_fraction: float = 0.02,
    tilted_fraction: float = 0.15,
    objects_per_scene: int = 20,
    dtype: type[np.floating[Any]] = np.float32,
    prompts_per_scene: int = 10,
    scene_spread: float = 0.0,
) -> tuple[list[dict[str, Any]], dict[str, np.ndarray]]:
    """The same content as ``make_data``, predictions as the binary form's arrays (no per-box objects)."""
    labels: list[dict[str, Any]] = []
    counts = np.zeros(samples + 1, dtype=np.int64)
    box_parts: list[np.ndarray] = []
    score_parts: list[np.ndarray] = []
    for i, (label, boxes, scores) in enumerate(
        _samples(samples, seed, min_preds, max_preds, max_gt, empty_fraction, tilted_fraction, objects_per_scene,
                 prompts_per_scene, scene_spread)
    ):
        labels.append(label)
        counts[i + 1] = len(scores)
        box_parts.append(boxes.astype(dtype))
        score_parts.append(scores.astype(dtype))
    arrays = {
        "sample_id": np.array([x["sample_id"] for x in labels]),
        "offsets": np.cumsum(counts),
        "pred_bboxes": np.concatenate(box_parts) if box_parts else np.zeros((0, 9), dtype=dtype),
        "pred_scores": np.concatenate(score_parts) if score_parts else np.zeros(0, dtype=dtype),
    }
    return labels, arrays


def make_methods(
    samples: int,
    methods: int,
    seed: int = 0,
    min_preds: int = 0,
    max_preds: int = 12,
    max_gt: int = 3,
    objects_per_scene: int = 12,
    prompts_per_scene: int = 10,
    scene_spread: float = 0.5,
    method_spread: float = 0.5,
    tilted_fraction: float = 0.15,
) -> tuple[list[dict[str, Any]], list[dict[str, np.ndarray]]]:
    """One set of labels and the predictions of ``methods`` equally good methods on it.

    Each scene has a difficulty shared by every method (a log-normal factor, sd ``scene_spread``,
    on the near misses' offsets) and each method its own luck in it (another, sd
    ``method_spread``): the scene-by-method effect that makes a method's lead in one scene carry
    over to its other prompts. The methods are drawn alike, so none is better in the population
    (``benchmarks/paired_fpr.py``). Predictions are the binary form's arrays, float64.
    """
    rng = np.random.default_rng([seed, 0])
    n_scenes = max(1, samples // prompts_per_scene)
    scenes = [_scene(rng, objects_per_scene, tilted_fraction) for _ in range(n_scenes)]
    difficulty = np.exp(scene_spread * rng.standard_normal(n_scenes))
    labels: list[dict[str, Any]] = []
    for i in range(samples):
        scene_id = i * n_scenes // samples  # prompts of a scene are consecutive, as in the label files
        targets = rng.choice(scenes[scene_id].shape[0], size=int(rng.integers(1, max_gt + 1)), replace=False)
        labels.append({"sample_id": f"scene{scene_id:04d}_00__{i:06d}", "scan_id": f"scene{scene_id:04d}_00",
                       "text": f"find the object(s) number {i}",
                       "sub_class": SUB_CLASSES[int(rng.integers(len(SUB_CLASSES)))],
                       "gt_bboxes": scenes[scene_id][targets].tolist()})
    predicted = []
    for m in range(methods):
        mrng = np.random.default_rng([seed, 1 + m])
        luck = difficulty * np.exp(method_spread * mrng.standard_normal(n_scenes))
        counts = np.zeros(samples + 1, dtype=np.int64)
        box_parts, score_parts = [], []
        for i, label in enumerate(labels):
            scene_id = i * n_scenes // samples
            n_pred = int(mrng.integers(min_preds, max_preds + 1))
            boxes, scores = _predictions(mrng, np.asarray(label["gt_bboxes"]), scenes[scene_id], n_pred,
                                         tilted_fraction, float(luck[scene_id]))
            counts[i + 1] = n_pred
            box_parts.append(boxes)
            score_parts.append(scores)
        predicted.append({"sample_id": np.array([x["sample_id"] for x in labels]), "offsets": np.cumsum(counts),
                          "pred_bboxes": np.concatenate(box_parts), "pred_scores": np.concatenate(score_parts)})
    return labels, predicted


def generate(args: argparse.Namespace) -> dict[str, str]:
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    labels_path = out / "labels.json"
    options = (args.samples, args.seed, args.min_preds, args.max_preds, args.max_gt, args.empty_fraction,
               args.tilted_fraction)
    if getattr(args, "format", "json") == "npz":
        labels, arrays = make_arrays(*options)
        labels_path.write_text(json.dumps(labels))
        pred_path = out / "predictions.npz"
        write_npz(pred_path, arrays)
        return {"labels": str(labels_path), "predictions": str(pred_path)}
    labels, predictions = make_data(*options)
    labels_path.write_text(json.dumps(labels))
    text = json.dumps(predictions).encode()
    if args.gzip:
        pred_path = out / "predictions.json.gz"
        pred_path.write_bytes(gzip.compress(text))
    else:
        pred_path = out / "predictions.json"
        pred_path.write_bytes(text)
    return {"labels": str(labels_path), "predictions": str(pred_path)}


def write_npz(path: Path, arrays: dict[str, np.ndarray]) -> None:
    """The binary form, stored (not deflated: float boxes hardly compress, and stored members map)."""
    np.savez(path, **arrays)  # type: ignore[arg-type]


def _random_boxes(rng: np.random.Generator, n: int, tilted_fraction: float, room: float = 8.0) -> np.ndarray:
    size = rng.uniform(0.2, 2.0, (n, 3))
    size[:, 2] = rng.uniform(0.05, 1.8, n)
    centre = np.c_[rng.uniform(0, room, (n, 2)), size[:, 2] / 2]  # standing on the floor z = 0
    euler = np.zeros((n, 3))
    euler[:, 0] = rng.uniform(-np.pi, np.pi, n)
    tilted = rng.random(n) < tilted_fraction
    euler[tilted, 1:] = rng.uniform(-0.5, 0.5, (int(tilted.sum()), 2))
    return np.hstack([centre, size, euler])


def _scene(rng: np.random.Generator, n_objects: int, tilted_fraction: float) -> np.ndarray:
    return _random_boxes(rng, n_objects, tilted_fraction)


def _near_miss(rng: np.random.Generator, boxes: np.ndarray, tilted_fraction: float,
               jitter: float = 1.0) -> np.ndarray:
    out = boxes.copy()
    out[:, :3] += rng.normal(0, 0.15, (len(boxes), 3)) * boxes[:, 3:6] * jitter
    out[:, 3:6] *= rng.uniform(0.75, 1.3, (len(boxes), 3))
    out[:, 6] += rng.normal(0, 0.2, len(boxes))
    tilted = rng.random(len(boxes)) < tilted_fraction
    out[tilted, 7:9] += rng.normal(0, 0.1, (int(tilted.sum()), 2))
    return out


def _predictions(
    rng: np.random.Generator, gt: np.ndarray, objects: np.ndarray, n: int, tilted_fraction: float,
    jitter: float = 1.0,
) -> tuple[np.ndarray, np.ndarray]:
    if n == 0:
        return np.zeros((0, 9)), np.zeros(0)
    kind = rng.choice(3, size=n, p=[0.35, 0.35, 0.3])  # near a target, near another object, random
    boxes = np.empty((n, 9))
    scores = np.empty(n)
    near = kind == 0
    boxes[near] = _near_miss(rng, gt[rng.integers(len(gt), size=int(near.sum()))], tilted_fraction, jitter)
    other = kind == 1
    boxes[other] = _near_miss(
        rng, objects[rng.integers(len(objects), size=int(other.sum()))], tilted_fraction
    )
    rand = kind == 2
    boxes[rand] = _random_boxes(rng, int(rand.sum()), tilted_fraction)
    scores[near] = rng.uniform(0.3, 1.0, int(near.sum()))
    scores[~near] = rng.uniform(0.0, 0.8, int((~near).sum()))
    return boxes, scores


def write_demo(folder: Path, split: str) -> tuple[Path, Path]:
    """Small labels (300 prompts) and predictions for ``manage.py load_demo``."""
    written = generate(argparse.Namespace(out=Path(folder), samples=300, seed=5, min_preds=10, max_preds=30,
                                          max_gt=5, empty_fraction=0.02, tilted_fraction=0.15, gzip=False))
    return Path(written["labels"]), Path(written["predictions"])
