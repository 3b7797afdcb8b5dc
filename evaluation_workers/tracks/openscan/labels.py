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

import contextlib
import hashlib
import json
import os
import shutil
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from evaluation_workers.errors import LabelsError
from evaluation_workers.results import sha256_tree

ASPECTS = ("affordance", "property", "type", "manner", "synonym", "requirement", "element", "material")
VOCABULARY_FILE = "vocabulary.json"
CACHE_FILE = Path(".cache") / "openscan_labels.npz"
CACHE_VERSION = 1
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
    files = [Path(folder) / VOCABULARY_FILE] + sorted((Path(folder) / "gt").rglob("*.txt"))
    return [[p.relative_to(folder).as_posix(), p.stat().st_size, p.stat().st_mtime_ns] for p in files]


def build_cache(folder: Path) -> dict[str, AspectLabels]:
    """Parse the text once and write ``.cache/openscan_labels.npz`` inside ``folder``."""
    folder = Path(folder)
    labels = parse_labels(folder)
    _write_cache(folder / CACHE_FILE, labels, sha256_tree(folder), _file_stats(folder))
    return labels


def user_cache_dir() -> Path:
    """Where the scorer keeps label caches of folders it may not write into (``EVAL_CACHE_DIR``)."""
    base = os.environ.get("EVAL_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "lb-eval")
    return Path(base) / "openscan-labels"


def load_labels(folder: Path) -> tuple[dict[str, AspectLabels], str]:
    """The labels and their checksum, parsing the text only the first time a checksum is seen.

    1. The folder's own cache (``prepare_labels`` writes it for the service's
       labels), when the size and mtime it records for every file still match.
    2. Else the user cache (``user_cache_dir()``), keyed by the labels'
       checksum: ``<sha256>.npz``, found through ``by-files/<fingerprint>``
       (the sha256 of the folder's path and its files' sizes and mtimes), so
       an unchanged folder is neither parsed nor hashed again; a copy of known
       labels elsewhere is hashed once and not parsed.
    3. Else the text is parsed and the user cache written for next time.

    Writes go to a temporary name and ``os.replace``: concurrent scorers never
    read a half-written cache (at worst two of them parse the same labels
    once). A cache that cannot be written (read-only home) costs only the parse.
    """
    folder = Path(folder)
    stats = _file_stats(folder)
    own = _read_cache(folder / CACHE_FILE, stats)
    if own is not None:
        return own
    root = user_cache_dir()
    fingerprint = hashlib.sha256(json.dumps([str(folder.resolve()), stats]).encode()).hexdigest()
    pointer = root / "by-files" / fingerprint
    if pointer.is_file():
        known = pointer.read_text().strip()
        cached = _read_cache(root / f"{known}.npz", stats, sha=known)
        if cached is not None:
            return cached
    sha = sha256_tree(folder)
    cached = _read_cache(root / f"{sha}.npz", stats, sha=sha)
    labels = cached[0] if cached is not None else parse_labels(folder)
    with contextlib.suppress(OSError):
        if cached is None:
            _write_cache(root / f"{sha}.npz", labels, sha, stats)
        pointer.parent.mkdir(parents=True, exist_ok=True)
        tmp = pointer.with_name(f"{fingerprint}.{os.getpid()}.tmp")
        tmp.write_text(sha)
        os.replace(tmp, pointer)
    return labels, sha


def _write_cache(path: Path, labels: dict[str, AspectLabels], sha: str, stats: list[list[Any]]) -> None:
    arrays: dict[str, np.ndarray] = {}
    for aspect, lab in labels.items():
        arrays[f"{aspect}.scene_ids"] = np.array(lab.scene_ids, dtype=str)
        arrays[f"{aspect}.vertex_offsets"] = lab.vertex_offsets
        arrays[f"{aspect}.gt_local"] = lab.gt_local
        arrays[f"{aspect}.instance_offsets"] = lab.instance_offsets
        arrays[f"{aspect}.instance_class"] = lab.instance_class
        arrays[f"{aspect}.instance_size"] = lab.instance_size
        arrays[f"{aspect}.n_classes"] = np.array(lab.n_classes)
    meta = {"version": CACHE_VERSION, "aspects": list(labels), "labels_sha256": sha, "files": stats}
    arrays["meta"] = np.array(json.dumps(meta))
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.stem}.{os.getpid()}.tmp.npz")
    np.savez(tmp, **arrays)  # type: ignore[arg-type]  # uncompressed: loads at disk speed
    os.replace(tmp, path)


def _read_cache(
    path: Path, stats: list[list[Any]], sha: str | None = None
) -> tuple[dict[str, AspectLabels], str] | None:
    """A cache's labels and checksum; None when absent, of another version, or stale.

    Stale: with ``sha``, recorded for other labels; without, recorded for other files.
    """
    if not path.is_file():
        return None
    try:
        with np.load(path, allow_pickle=False) as data:
            meta = json.loads(str(data["meta"]))
            if meta.get("version") != CACHE_VERSION:
                return None
            if meta.get("labels_sha256") != sha if sha is not None else meta.get("files") != stats:
                return None
            labels = {
                a: AspectLabels(
                    scene_ids=[str(s) for s in data[f"{a}.scene_ids"]],
                    vertex_offsets=data[f"{a}.vertex_offsets"],
                    gt_local=data[f"{a}.gt_local"],
                    instance_offsets=data[f"{a}.instance_offsets"],
                    instance_class=data[f"{a}.instance_class"],
                    instance_size=data[f"{a}.instance_size"],
                    n_classes=int(data[f"{a}.n_classes"]),
                )
                for a in meta["aspects"]
            }
    except (OSError, ValueError, KeyError, zipfile.BadZipFile):  # a damaged cache is rebuilt, never trusted
        return None
    return labels, str(meta["labels_sha256"])


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
