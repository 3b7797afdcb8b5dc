"""OpenScan: per-aspect 3D instance AP and semantic mIoU (METRICS.md, "OpenScan").

Labels: see ``labels``; predictions: see ``reader`` and docs/openscan-format.md. Scoring streams the predictions scene by scene: each
scene's masks become (vertex, mask) memberships once, and for each aspect one
bincount gives the masks' overlaps with that aspect's instances and void. The
matching and PR curves then run once per aspect over all scenes
(``metrics.instance_ap``).
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from evaluation_workers.plugin import (
    AP25_INDEX,
    AP50_INDEX,
    AP_SLICE,
    IOU_THRESHOLDS,
    MIN_REGION_SIZE,
    Manifest,
    PredictionFormatError,
    Progress,
    Result,
    average_precision_distinct,
    backend,
    bootstrap,
    confusion,
    intersection_counts,
    iou_and_accuracy,
    make_result,
    matching_entries,
    no_progress,
    positives,
    read_ahead,
    sha256_file,
    threads,
    to_device,
    to_numpy,
    where,
)
from evaluation_workers.tracks.openscan import intervals
from evaluation_workers.tracks.openscan.common import Proposals
from evaluation_workers.tracks.openscan.labels import AspectLabels, load_labels, load_vocabulary
from evaluation_workers.tracks.openscan.reader import open_predictions

SCORER_VERSION = "1.2.0"
_SHOWN = 5


def _manifest_of(labels: dict[str, AspectLabels], vocabulary: dict[str, list[str]]) -> Manifest:
    scenes: dict[str, int] = {}
    for lab in labels.values():
        for scene, count in zip(lab.scene_ids, np.diff(lab.vertex_offsets)):
            scenes[scene] = int(count)
    return {
        "track": "openscan",
        "vocabulary": {a: vocabulary[a] for a in labels},
        "aspects": {a: lab.scene_ids for a, lab in labels.items()},
        "scenes": dict(sorted(scenes.items())),
    }


def class_keys(aspect: str, names: list[str]) -> list[str]:
    """``"<aspect>/<attribute>"``; a repeated name is keyed ``"<aspect>/<attribute> (<id>)"``."""
    seen: set[str] = set()
    keys = []
    for i, name in enumerate(names, start=1):
        keys.append(f"{aspect}/{name}" if name not in seen else f"{aspect}/{name} ({i})")
        seen.add(name)
    return keys


class _AspectState:
    """What one aspect accumulates while the scenes stream by."""

    def __init__(self, xp: Any, labels: AspectLabels, units: dict[str, int]) -> None:
        self.labels = labels
        self.units = np.array([units[s] for s in labels.scene_ids], dtype=np.int64)  # scene -> unit
        self.unit: list[np.ndarray] = []
        self.sem_units: Any = None  # (S_all, 3, K): per scene TP, TP+FN, TP+FP of the semantic classes
        self.index = {s: i for i, s in enumerate(labels.scene_ids)}
        self.gt_local = to_device(labels.gt_local, xp)
        self.vertex_class: Any = None
        self.width = labels.width
        self.inter: list[Any] = []
        self.classes: list[np.ndarray] = []
        self.scores: list[np.ndarray] = []
        self.base: list[np.ndarray] = []
        self.with_sem: list[str] = []
        self.without_sem: list[str] = []
        self.conf: Any = None


def _intersections(
    xp: Any, state: _AspectState, scene: str, proposals: Proposals, cache: dict[int, tuple[Any, Any]]
) -> Any:
    s = state.index[scene]
    v0, v1 = (int(x) for x in state.labels.vertex_offsets[s : s + 2])
    key = id(proposals)
    if key not in cache:
        cache[key] = (to_device(proposals.vertex, xp), to_device(proposals.mask, xp))
    vertex, mask = cache[key]
    return intersection_counts(vertex, mask, state.gt_local[v0:v1], proposals.n, state.width)


def _vertex_class(xp: Any, state: _AspectState) -> Any:
    if state.vertex_class is None:
        state.vertex_class = to_device(state.labels.vertex_class(), xp)
    return state.vertex_class


def _add_scene(xp: Any, states: dict[str, _AspectState], units: dict[str, int], scene: str,
               read: dict[str, Any]) -> None:
    """Add one scene's predictions (all aspects) to the aspects' running state."""
    cache: dict[int, tuple[Any, Any]] = {}
    for aspect, pred in read.items():
        st = states[aspect]
        inter = _intersections(xp, st, scene, pred.proposals, cache)
        st.inter.append(xp.take(inter, to_device(pred.rows, xp), axis=0))
        st.classes.append(pred.classes)
        st.scores.append(pred.scores)
        st.base.append(
            np.full(len(pred.rows), st.labels.instance_offsets[st.index[scene]], dtype=np.int64)
        )
        st.unit.append(np.full(len(pred.rows), units[scene], dtype=np.int64))
        if pred.sem_pred is None:
            st.without_sem.append(scene)
            continue
        st.with_sem.append(scene)
        s = st.index[scene]
        v0, v1 = (int(x) for x in st.labels.vertex_offsets[s : s + 2])
        conf = confusion(_vertex_class(xp, st)[v0:v1], to_device(pred.sem_pred, xp), st.labels.n_classes)
        st.conf = conf if st.conf is None else st.conf + conf
        _note_scene_semantics(st, units[scene], conf, len(units))


def score(labels_path: Path, predictions_path: Path, progress: Progress = no_progress,
          outcomes: dict[str, Any] | None = None) -> Result:
    """Score a predictions file (official zip, text zip or compact .npz) against a labels folder.

    ``outcomes``, when given, is filled with the per-scene outcomes of each
    aspect (``intervals.statistic``); they stay on the worker.
    """
    labels_path, predictions_path = Path(labels_path), Path(predictions_path)
    # Threads: one hashes the predictions file from the start (the longest single job on a large zip:
    # AP and the intervals overlap it too), the others read the next scenes while this one is scored
    # (threads.read_ahead: one fewer while the checksum runs). Values do not depend on it.
    n_threads = threads()
    hasher = ThreadPoolExecutor(1) if n_threads > 1 else None
    refused = threading.Event()  # a bad file stops the hash: its error is not kept waiting
    predictions_sha = hasher.submit(sha256_file, predictions_path, refused) if hasher else None
    pool = None
    try:
        labels, labels_sha = load_labels(labels_path)
        vocabulary = load_vocabulary(labels_path)
        manifest = _manifest_of(labels, vocabulary)
        progress(0.02, "labels loaded")
        reader = open_predictions(predictions_path, manifest)
        xp = backend()
        units = {scene: u for u, scene in enumerate(manifest["scenes"])}
        states = {a: _AspectState(xp, lab, units) for a, lab in labels.items()}
        scenes = reader.scenes()
        depth = n_threads if getattr(reader, "parallel_reads", False) else 1
        pool = ThreadPoolExecutor(depth) if n_threads > 1 else None
        for i, (scene, read) in enumerate(read_ahead(pool, reader.read, scenes, depth)):
            _add_scene(xp, states, units, scene, read)
            if i % 10 == 0 or i == len(scenes) - 1:
                progress(0.05 + 0.85 * (i + 1) / max(len(scenes), 1), f"scene {i + 1} of {len(scenes)}")
        values = _results(xp, states, reader, len(scenes), vocabulary, units, labels, predictions_path, progress,
                          outcomes)
        predictions_sha256 = predictions_sha.result() if predictions_sha else sha256_file(predictions_path)
    except BaseException:
        refused.set()
        raise
    finally:
        for executor in (pool, hasher):
            if executor is not None:
                executor.shutdown(wait=True, cancel_futures=True)
    return make_result(track="openscan", scorer_version=SCORER_VERSION, labels_sha256=labels_sha,
                       predictions_sha256=predictions_sha256, **values)


def _results(xp: Any, states: dict[str, _AspectState], reader: Any, n_scenes: int,
             vocabulary: dict[str, list[str]], units: dict[str, int], labels: dict[str, AspectLabels],
             predictions_path: Path, progress: Progress, outcomes: dict[str, Any] | None) -> dict[str, Any]:
    """Metrics, breakdown, details, warnings and intervals once every scene is in ``states``."""
    warnings: list[str] = []
    metrics_rows: dict[str, Any] = {}
    breakdown: dict[str, dict[str, Any]] = {}
    per_class: dict[str, dict[str, Any]] = {}
    semantic_per_class: dict[str, dict[str, Any]] = {}
    all_ap: list[np.ndarray] = []
    all_iou: list[np.ndarray] = []
    all_acc: list[np.ndarray] = []
    per_scene: dict[str, dict[str, np.ndarray]] = {}
    for aspect, st in states.items():
        lab = st.labels
        missing = sorted(set(lab.scene_ids) - reader_present(reader, aspect))
        if missing:
            warnings.append(
                f"{aspect}: {len(missing)} of {len(lab.scene_ids)} scenes have no predictions "
                f"({', '.join(missing[:_SHOWN])}{', ...' if len(missing) > _SHOWN else ''}); "
                f"their instances count as misses"
            )
        ap, per_scene[aspect] = _aspect_ap(xp, st, len(units))  # (T, K)
        class_ap = ap[AP_SLICE].mean(axis=0)  # NaN for a class without valid instances
        ap50, ap25 = ap[AP50_INDEX], ap[AP25_INDEX]
        all_ap.append(np.stack([class_ap, ap50, ap25]))
        count = int((lab.instance_size >= 100).sum())
        # Valid instances per attribute: the drill-down's counts (shown only where labels are public).
        class_count = np.bincount(lab.instance_class[lab.instance_size >= MIN_REGION_SIZE] - 1,
                                  minlength=lab.n_classes)
        row: dict[str, Any] = {
            "AP": _nanmean(class_ap),
            "AP50": _nanmean(ap50),
            "AP25": _nanmean(ap25),
            "count": count,
        }
        for key, a, b, c, n in zip(class_keys(aspect, vocabulary[aspect]), class_ap, ap50, ap25, class_count):
            per_class[key] = {"AP": a, "AP50": b, "AP25": c, "count": int(n)}
        if st.with_sem and st.without_sem:
            raise PredictionFormatError(
                f"{where(predictions_path.name, aspect, st.without_sem[0])}: Expected `sem_pred` in every scene "
                f"of the aspect or in none, but it is missing here and present in {st.with_sem[0]}"
            )
        if st.with_sem:
            if missing:  # a missing scene's vertices are misses for their true class
                idx = [st.index[s] for s in missing]
                vc = _vertex_class(xp, st)
                for s in idx:
                    v0, v1 = (int(x) for x in lab.vertex_offsets[s : s + 2])
                    conf = confusion(vc[v0:v1], xp.zeros(v1 - v0, dtype=xp.int64), lab.n_classes)
                    st.conf = st.conf + conf
                    _note_scene_semantics(st, int(st.units[s]), conf, len(units))
            iou, acc = (to_numpy(x) for x in iou_and_accuracy(st.conf))
            row["mIoU"], row["mAcc"] = _nanmean(iou), _nanmean(acc)
            for key, a, b in zip(class_keys(aspect, vocabulary[aspect]), iou, acc):
                semantic_per_class[key] = {"IoU": a, "Acc": b}
            all_iou.append(iou)
            all_acc.append(acc)
            per_scene[aspect]["semantic"] = st.sem_units
        breakdown[aspect] = row
    stacked = np.concatenate(all_ap, axis=1) if all_ap else np.zeros((3, 0))
    metrics_rows = {
        "AP": _nanmean(stacked[0]),
        "AP50": _nanmean(stacked[1]),
        "AP25": _nanmean(stacked[2]),
        "mIoU": _nanmean(np.concatenate(all_iou)) if all_iou else None,
        "mAcc": _nanmean(np.concatenate(all_acc)) if all_acc else None,
    }
    warnings += reader.dropped.warnings(vocabulary, {a: len(lab.scene_ids) for a, lab in labels.items()})
    progress(0.95, "confidence intervals")
    if outcomes is not None:
        outcomes.update(per_scene)
    later = bootstrap.deferred(len(units) + sum(int(o["group"].shape[0]) for o in per_scene.values()))
    # Deferred or not, the units are named: a partition's exact results come from the statistic (``partitions``).
    uncertainty = bootstrap.intervals(intervals.statistic(per_scene), len(units), intervals.UNIT, xp=xp,
                                      width=intervals.width(per_scene), unit_ids=list(units),
                                      resamples=0 if later else None, min_scenes=intervals.MIN_SCENES)
    progress(1.0, "done")
    return dict(
        metrics=metrics_rows,
        breakdown=breakdown,
        details={
            "per_class": per_class,
            "semantic_per_class": semantic_per_class,
            "format": reader.format,
            "scenes_with_predictions": n_scenes,
        },
        warnings=warnings,
        uncertainty=uncertainty,
        deferred={"resamples": bootstrap.resamples_setting(), "unit": "scene"} if later else None,
    )


def _note_scene_semantics(st: _AspectState, unit: int, conf: Any, n_units: int) -> None:
    """Keep a scene's share of the confusion's sums (what IoU and Acc of a resample need)."""
    k = st.labels.n_classes
    if st.sem_units is None:
        st.sem_units = np.zeros((n_units, 3, k), dtype=np.int64)
    host = to_numpy(conf)
    tp = np.diagonal(host[:, 1:])
    st.sem_units[unit] += np.stack([tp, host.sum(axis=1), host[:, 1:].sum(axis=0)])


def reader_present(reader: Any, aspect: str) -> set[str]:
    present: set[str] = reader.present(aspect)
    return present


def _aspect_ap(xp: Any, st: _AspectState, n_units: int) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """(T, K) AP exactly as ``instance_ap``, and the matching's entries with their scene (host)."""
    lab = st.labels
    if st.inter:
        inter = xp.concat(st.inter, axis=0)
        classes, scores, base, unit = (np.concatenate(x) for x in (st.classes, st.scores, st.base, st.unit))
    else:
        inter = xp.zeros((0, st.width), dtype=xp.int64)
        classes, scores, base, unit = (np.zeros(0, np.int64), np.zeros(0), np.zeros(0, np.int64),
                                       np.zeros(0, np.int64))
    gt_class, gt_size = to_device(lab.instance_class, xp), to_device(lab.instance_size, xp)
    group, is_true, entry_score, pred = matching_entries(
        inter, to_device(classes, xp), to_device(scores, xp), to_device(base, xp), gt_class, gt_size,
        lab.n_classes)
    n_thr = len(IOU_THRESHOLDS)
    ap = average_precision_distinct(group, is_true, entry_score, positives(gt_class, gt_size, lab.n_classes, n_thr))
    # valid instances per (scene, class): the positives of a resample are their weighted sums
    scene_of_instance = np.repeat(st.units, np.diff(lab.instance_offsets))
    valid = lab.instance_size >= MIN_REGION_SIZE
    n_pos = np.bincount(scene_of_instance[valid] * lab.n_classes + lab.instance_class[valid] - 1,
                        minlength=n_units * lab.n_classes).reshape(n_units, lab.n_classes)
    entries = {"group": to_numpy(group), "is_true": to_numpy(is_true), "score": to_numpy(entry_score),
               "unit": unit[to_numpy(pred)], "n_pos": n_pos}
    return to_numpy(xp.reshape(ap, (n_thr, lab.n_classes))), entries


def _nanmean(values: np.ndarray) -> float | None:
    values = np.asarray(values, dtype=np.float64)
    finite = values[~np.isnan(values)]
    return float(finite.mean()) if finite.size else None


def validate(predictions_path: Path, manifest: Manifest) -> dict[str, Any]:
    """Check a predictions file against the public manifest only (reads every array)."""
    predictions_path = Path(predictions_path)
    reader = open_predictions(predictions_path, manifest)
    sem: dict[str, set[bool]] = {a: set() for a in manifest["aspects"]}
    for scene in reader.scenes():
        for aspect, pred in reader.read(scene).items():
            sem[aspect].add(pred.sem_pred is not None)
    for aspect, kinds in sem.items():
        if len(kinds) == 2:
            raise PredictionFormatError(
                f"{where(predictions_path.name, aspect)}: Expected `sem_pred` in every "
                f"scene of the aspect or in none, but got a mix"
            )
    return {
        "format": reader.format,
        "dropped_masks": {a: reader.dropped.masks[a] for a in manifest["aspects"] if a in reader.dropped.masks},
        "scenes": {a: len(reader.present(a)) for a in manifest["aspects"]},
        "expected_scenes": {a: len(s) for a, s in manifest["aspects"].items()},
    }
