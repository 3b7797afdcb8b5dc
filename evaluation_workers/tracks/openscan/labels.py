"""OpenScan hidden labels: the official folder, its binary cache, its public manifest.

A labels folder holds ``vocabulary.json`` (``{"<aspect>": ["<attribute>", ...]}``,
attribute ids 1..K in list order) and ``gt/<aspect>/<scene_id>.txt``: one
integer per vertex, ``attribute_id * 1000 + instance + 1``; a value whose
``// 1000`` is not in 1..K is void.

Text is parsed once, by ``prepare_labels``/``build_cache``, into
``.cache/openscan_labels.npz``: per aspect the vertices' instance numbers
(uint16, 0 = void, 1..G in ascending instance id within a scene) and an
instance table. ``.cache`` is excluded from the labels checksum.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from evaluation_workers.plugin import LabelsError, parsed_cache, sha256_tree

ASPECTS = ("affordance", "property", "type", "manner", "synonym", "requirement", "element", "material")
VOCABULARY_FILE = "vocabulary.json"
CACHE_FILE = Path(".cache") / "openscan_labels.npz"
CACHE_VERSION = 2
DEFAULT_VOCABULARY = Path(__file__).resolve().parents[2] / "data" / "openscan_vocabulary.json"


@dataclass(frozen=True)
class AspectLabels:
    """One aspect's ground truth over its scenes (S scenes, M instances, V vertices in all).

    Attributes:
        scene_ids: (S,) sorted scene ids.
        vertex_offsets: (S+1,) int64; scene s owns vertices [o[s], o[s+1]).
        gt_local: (V,) uint16; 0 void, j >= 1 the scene's j-th instance.
        instance_offsets: (S+1,) int64; scene s owns instances [o[s], o[s+1]).
        instance_class: (M,) int64 attribute id 1..K.
        instance_size: (M,) int64 vertex count.
        n_classes: K.
    """

    scene_ids: list[str]
    vertex_offsets: np.ndarray
    gt_local: np.ndarray
    instance_offsets: np.ndarray
    instance_class: np.ndarray
    instance_size: np.ndarray
    n_classes: int

    @property
    def width(self) -> int:
        """Columns of an intersection row: void plus the most instances of any scene."""
        counts = np.diff(self.instance_offsets)
        return int(counts.max(initial=0)) + 1

    def vertex_class(self) -> np.ndarray:
        """(V,) int64: the attribute id of each vertex, 0 on void (semantic ground truth)."""
        scene = np.repeat(np.arange(len(self.scene_ids)), np.diff(self.vertex_offsets))
        local = self.gt_local.astype(np.int64)
        index = self.instance_offsets[scene] + local - 1
        table = np.append(self.instance_class, 0)
        return np.where(local > 0, table[np.where(local > 0, index, len(table) - 1)], 0)


def load_vocabulary(folder: Path) -> dict[str, list[str]]:
    path = Path(folder) / VOCABULARY_FILE
    try:
        vocabulary = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise LabelsError(f"{path}: Expected a JSON vocabulary, but got {exc}") from exc
    if not isinstance(vocabulary, dict) or not all(
        isinstance(v, list) and all(isinstance(a, str) for a in v) for v in vocabulary.values()
    ):
        raise LabelsError(f"{path}: Expected {{aspect: [attribute, ...]}}, but got another shape")
    return vocabulary


def gt_files(folder: Path) -> dict[str, dict[str, Path]]:
    """``{aspect: {scene_id: path}}`` for the aspects present under ``gt/`` (METRICS.md order)."""
    vocabulary = load_vocabulary(folder)
    root = Path(folder) / "gt"
    if not root.is_dir():
        raise LabelsError(f"{folder}: Expected a gt/ folder, but got none")
    found: dict[str, dict[str, Path]] = {}
    present = sorted(p.name for p in root.iterdir() if p.is_dir())
    order = [a for a in ASPECTS if a in present] + [a for a in present if a not in ASPECTS]
    for aspect in order:
        if aspect not in vocabulary:
            raise LabelsError(
                f"{root / aspect}: Expected an aspect listed in {VOCABULARY_FILE}, but got {aspect!r}"
            )
        files = {p.name[:-4]: p for p in sorted((root / aspect).glob("*.txt"))}
        if files:
            found[aspect] = files
    if not found:
        raise LabelsError(f"{root}: Expected gt/<aspect>/<scene_id>.txt files, but got none")
    return found


def read_ids(path: Path) -> np.ndarray:
    """(V,) int64 values of one official per-vertex file."""
    text = Path(path).read_bytes()
    try:
        return np.array(text.split(), dtype=np.int64)
    except ValueError:
        try:  # the official loader is np.loadtxt, which reads "5001.0" as well
            return np.floor(np.array(text.split(), dtype=np.float64)).astype(np.int64)
        except ValueError as exc:
            raise LabelsError(f"{path}: Expected one integer per line, but got {exc}") from exc


def scene_instances(ids: np.ndarray, n_classes: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Instances of one scene and aspect, in ascending instance id (ScanNet's order).

    Args:
        ids: (V,) int64 official values.
        n_classes: K.

    Returns:
        gt_local (V,) uint16 (0 void, j >= 1 the j-th instance), instance_class (G,)
        int64, instance_size (G,) int64.
    """
    label = np.floor_divide(ids, 1000)
    valid = (label >= 1) & (label <= n_classes)
    values, inverse, counts = np.unique(ids[valid], return_inverse=True, return_counts=True)
    if len(values) >= 2**16:
        raise LabelsError(f"Expected fewer than 65536 instances in a scene, but got {len(values)}")
    local = np.zeros(ids.shape[0], dtype=np.uint16)
    local[valid] = (inverse.reshape(-1) + 1).astype(np.uint16)
    return local, values // 1000, counts.astype(np.int64)


def parse_labels(folder: Path) -> dict[str, AspectLabels]:
    """Parse the official text files (slow; ``build_cache`` keeps the result)."""
    vocabulary = load_vocabulary(folder)
    result: dict[str, AspectLabels] = {}
    for aspect, files in gt_files(folder).items():
        n_classes = len(vocabulary[aspect])
        locals_, classes, sizes, v_counts, g_counts = [], [], [], [], []
        for path in files.values():
            local, cls, size = scene_instances(read_ids(path), n_classes)
            locals_.append(local)
            classes.append(cls)
            sizes.append(size)
            v_counts.append(len(local))
            g_counts.append(len(cls))
        result[aspect] = AspectLabels(
            scene_ids=list(files),
            vertex_offsets=np.concatenate([[0], np.cumsum(v_counts)]).astype(np.int64),
            gt_local=np.concatenate(locals_) if locals_ else np.zeros(0, np.uint16),
            instance_offsets=np.concatenate([[0], np.cumsum(g_counts)]).astype(np.int64),
            instance_class=np.concatenate(classes).astype(np.int64),
            instance_size=np.concatenate(sizes).astype(np.int64),
            n_classes=n_classes,
        )
    return result


def _file_stats(folder: Path) -> list[list[Any]]:
    if not (Path(folder) / VOCABULARY_FILE).is_file():
        raise LabelsError(f"{folder}: Expected a labels folder holding {VOCABULARY_FILE} and gt/, but it has no "
                          f"{VOCABULARY_FILE}")
    files = [Path(folder) / VOCABULARY_FILE] + sorted((Path(folder) / "gt").rglob("*.txt"))
    return parsed_cache.file_stats(files, Path(folder))


def _to_arrays(labels: dict[str, AspectLabels]) -> dict[str, np.ndarray]:
    arrays: dict[str, np.ndarray] = {"aspects": np.array(list(labels), dtype=str)}
    for aspect, lab in labels.items():
        arrays[f"{aspect}.scene_ids"] = np.array(lab.scene_ids, dtype=str)
        arrays[f"{aspect}.vertex_offsets"] = lab.vertex_offsets
        arrays[f"{aspect}.gt_local"] = lab.gt_local
        arrays[f"{aspect}.instance_offsets"] = lab.instance_offsets
        arrays[f"{aspect}.instance_class"] = lab.instance_class
        arrays[f"{aspect}.instance_size"] = lab.instance_size
        arrays[f"{aspect}.n_classes"] = np.array(lab.n_classes)
    return arrays


def _from_arrays(arrays: dict[str, np.ndarray]) -> dict[str, AspectLabels]:
    return {
        a: AspectLabels(
            scene_ids=[str(s) for s in arrays[f"{a}.scene_ids"]],
            vertex_offsets=arrays[f"{a}.vertex_offsets"],
            gt_local=arrays[f"{a}.gt_local"],
            instance_offsets=arrays[f"{a}.instance_offsets"],
            instance_class=arrays[f"{a}.instance_class"],
            instance_size=arrays[f"{a}.instance_size"],
            n_classes=int(arrays[f"{a}.n_classes"]),
        )
        for a in (str(x) for x in arrays["aspects"])
    }


def build_cache(folder: Path) -> dict[str, AspectLabels]:
    """Parse the text once and write ``.cache/openscan_labels.npz`` inside ``folder``."""
    folder = Path(folder)
    labels = parse_labels(folder)
    parsed_cache.write(folder / CACHE_FILE, _to_arrays(labels), sha256_tree(folder), _file_stats(folder),
                       CACHE_VERSION)
    return labels


def load_labels(folder: Path) -> tuple[dict[str, AspectLabels], str]:
    """The labels and their checksum, parsing the text only the first time a checksum is seen
    (the folder's own cache, else the user cache: ``parsed_cache``)."""
    folder = Path(folder)
    arrays, sha = parsed_cache.cached(folder, "openscan-labels", CACHE_VERSION, _file_stats(folder),
                                      folder / CACHE_FILE, lambda: _to_arrays(parse_labels(folder)))
    return _from_arrays(arrays), sha


def manifest(folder: Path) -> dict[str, Any]:
    """Public facts: vocabulary, scene ids and vertex counts per aspect; no labels."""
    folder = Path(folder)
    vocabulary = load_vocabulary(folder)
    labels, _ = load_labels(folder)
    scenes: dict[str, int] = {}
    aspects: dict[str, list[str]] = {}
    for aspect, lab in labels.items():
        counts = np.diff(lab.vertex_offsets)
        for scene, count in zip(lab.scene_ids, counts):
            if scenes.setdefault(scene, int(count)) != int(count):
                raise LabelsError(
                    f"{folder}: Expected scene {scene} to have one vertex count in every aspect, "
                    f"but got {scenes[scene]} and {int(count)}"
                )
        aspects[aspect] = lab.scene_ids
    return {
        "track": "openscan",
        "vocabulary": {a: vocabulary[a] for a in aspects},
        "aspects": aspects,
        "scenes": dict(sorted(scenes.items())),
    }


def prepare_labels(source: Path, dest: Path) -> dict[str, Any]:
    """Copy the official files into ``dest``, build the cache there, return the manifest."""
    source, dest = Path(source), Path(dest)
    files = gt_files(source)
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copy2(source / VOCABULARY_FILE, dest / VOCABULARY_FILE)
    for aspect, scenes in files.items():
        (dest / "gt" / aspect).mkdir(parents=True, exist_ok=True)
        for path in scenes.values():
            shutil.copy2(path, dest / "gt" / aspect / path.name)
    build_cache(dest)
    return manifest(dest)
