"""The official layout: a zip of ``<aspect>/<scene_id>.npz`` (optionally under one top folder).

Each per-scene ``.npz`` is read member by member (``members.Archive``): its
inflated size is capped by what the scene can legitimately hold (V vertices x
the most masks per scene, 8-byte values), every ``.npy`` header is checked
against the scene before its payload is inflated, and nothing but the
``.npy`` members of the layout is read. See docs/openscan-format.md.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from evaluation_workers.plugin import Budget, PredictionFormatError, where
from evaluation_workers.tracks.openscan.common import (
    MASK_KINDS,
    Dropped,
    ScenePrediction,
    check_ids,
    check_kind,
    check_scores,
    check_shape,
    ignorable,
    max_masks_per_scene,
    memberships,
    scene_prediction,
    split_prefix,
)
from evaluation_workers.tracks.openscan.members import Archive

FIELDS = ("pred_masks", "pred_scores", "pred_score", "pred_classes", "sem_pred")
_SLACK = 1 << 20  # zip and .npy headers of one scene file


def scene_file_cap(n_vertices: int, max_masks: int) -> int:
    """The largest legitimate per-scene ``.npz``: 8-byte masks, scores, classes and sem_pred, stored."""
    return 8 * (n_vertices * max_masks + 2 * max_masks + n_vertices) + _SLACK


class OfficialReader:
    """``<aspect>/<scene_id>.npz`` members of a zip."""

    format = "official"
    parallel_reads = True  # read() is thread-safe: Archive, Budget and Dropped lock what they share

    def __init__(self, archive: Archive, manifest: dict[str, Any], budget: Budget) -> None:
        self.archive = archive
        self.file = archive.file
        self.manifest = manifest
        self.budget = budget
        self.max_masks = max_masks_per_scene()
        self.dropped = Dropped()
        names = archive.files()
        parts = [tuple(n.split("/")) for n in names]
        keep = [(p, n) for p, n in zip(parts, names) if not ignorable(p)]
        prefix, stripped = split_prefix([p for p, _ in keep], manifest["aspects"])
        self.members: dict[tuple[str, str], str] = {}
        for p, (_, name) in zip(stripped, keep):
            if len(p) != 2 or not p[1].endswith(".npz"):
                raise PredictionFormatError(
                    f"{self.file}: Expected members named <aspect>/<scene_id>.npz, but got {name!r}")
            aspect, scene = p[0], p[1][:-4]
            if aspect not in manifest["aspects"]:
                raise PredictionFormatError(
                    f"{self.file}: Expected aspect folders among {', '.join(manifest['aspects'])}, "
                    f"but got {aspect!r}")
            if scene not in set(manifest["aspects"][aspect]):
                raise PredictionFormatError(
                    f"{where(self.file, aspect)}: Expected scene ids of the split, but got unknown scene {scene!r}")
            if (aspect, scene) in self.members:
                raise PredictionFormatError(f"{self.file}: Expected one file per scene, but got {name!r} twice")
            self.members[(aspect, scene)] = name

    def scenes(self) -> list[str]:
        return sorted({s for _, s in self.members})

    def present(self, aspect: str) -> set[str]:
        return {s for a, s in self.members if a == aspect}

    def read(self, scene: str) -> dict[str, ScenePrediction]:
        return {a: self._read_one(a, scene) for a in self.manifest["aspects"] if (a, scene) in self.members}

    def _read_one(self, aspect: str, scene: str) -> ScenePrediction:
        loc = where(self.file, f"{aspect}/{scene}.npz")
        n_vertices = int(self.manifest["scenes"][scene])
        n_classes = len(self.manifest["vocabulary"][aspect])
        name = self.members[(aspect, scene)]
        if self.archive.infos[name].file_size == 0 and self.archive.infos[name].compress_size <= 2:
            raise PredictionFormatError(f"{loc}: Expected an .npz file, but got an empty (0-byte) file")
        inner = Archive(self.archive.spill(name, scene_file_cap(n_vertices, self.max_masks), loc), loc,
                        self.budget, max_members=64)
        try:
            return self._read_npz(inner, aspect, scene, loc, n_vertices, n_classes)
        finally:
            inner.close()
            self.archive.release(name)

    def _read_npz(self, inner: Archive, aspect: str, scene: str, loc: str, n_vertices: int,
                  n_classes: int) -> ScenePrediction:
        keys: dict[str, str] = {}
        for name in inner.files():
            if not name.endswith(".npy") or "/" in name:
                raise PredictionFormatError(
                    f"{loc}: Expected only .npy arrays in the .npz ({', '.join(FIELDS)}), but got {name!r}")
            keys[name[:-4]] = name
        for key in ("pred_masks", "pred_classes"):
            if key not in keys:
                raise PredictionFormatError(f"{loc}: Expected a `{key}` array, but got keys {sorted(keys)}")
        score_key = "pred_scores" if "pred_scores" in keys else "pred_score"
        if score_key not in keys:
            raise PredictionFormatError(f"{loc}: Expected a `pred_scores` array, but got keys {sorted(keys)}")

        def masks_header(shape: tuple[int, ...], dtype: np.dtype[Any]) -> None:
            if len(shape) != 2 or shape[0] != n_vertices:
                raise PredictionFormatError(
                    f"{loc}: Expected `pred_masks` to have shape ({n_vertices}, M) (one row per vertex of "
                    f"the scene), but got {shape}")
            if shape[1] > self.max_masks:
                raise PredictionFormatError(
                    f"{loc}: Expected at most {self.max_masks:,} masks per scene "
                    f"(EVAL_OPENSCAN_MAX_MASKS_PER_SCENE), but `pred_masks` announces {shape[1]:,}")
            if dtype.kind not in MASK_KINDS:
                raise PredictionFormatError(f"{loc}: Expected `pred_masks` to hold numbers, but got dtype {dtype}")

        masks = inner.npy(keys["pred_masks"], f"{loc}: `pred_masks`", n_vertices * self.max_masks, masks_header)
        n = masks.shape[1]
        proposals = memberships(masks)
        del masks
        scores = check_scores(
            check_shape(inner.npy(keys[score_key], f"{loc}: `{score_key}`", self.max_masks), loc, score_key, (n,)), loc, score_key)
        classes = check_ids(
            check_shape(inner.npy(keys["pred_classes"], f"{loc}: `pred_classes`", self.max_masks), loc, "pred_classes", (n,)),
            loc, "pred_classes")
        sem = None
        if "sem_pred" in keys:
            raw = inner.npy(keys["sem_pred"], f"{loc}: `sem_pred`", n_vertices)
            sem = check_ids(check_shape(check_kind(raw, "iuf", loc, "sem_pred"), loc, "sem_pred", (n_vertices,)),
                            loc, "sem_pred")
        return scene_prediction(proposals, np.arange(n, dtype=np.int64), scores, classes, sem, n_classes,
                                self.dropped, aspect)
