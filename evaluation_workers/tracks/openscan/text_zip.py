"""ScanNet's text layout in a zip: ``<aspect>/<scene_id>.txt`` plus one mask file per line.

Each index line is ``<relative mask path> <class id> <confidence>``; the path is
relative to the aspect folder and may not leave it (no ``..``, no absolute
path, no backslash). Each mask file holds one integer per vertex, exactly V
lines for the scene; non-zero = in the mask. Mask files are inflated under a
per-file cap (V lines of at most ``_LINE_BYTES``) and the submission's budget,
and parsed without Python loops.
"""

from __future__ import annotations

import math
from pathlib import PurePosixPath
from typing import Any

import numpy as np

from evaluation_workers.plugin import Budget, PredictionFormatError, where
from evaluation_workers.tracks.openscan.common import (
    Dropped,
    Proposals,
    ScenePrediction,
    ignorable,
    max_masks_per_scene,
    scene_prediction,
    split_prefix,
)
from evaluation_workers.tracks.openscan.members import Archive

_LINE_BYTES = 24  # "-9223372036854775808\r\n" is 22
_INDEX_LINE_BYTES = 1024


def max_members(manifest: dict[str, Any]) -> int:
    """Index files and mask files of a full submission, and as many folder or metadata entries."""
    cells = sum(len(s) for s in manifest["aspects"].values())
    return 2 * cells * (1 + max_masks_per_scene()) + 64


def parse_mask(data: bytes, n_vertices: int, loc: str) -> np.ndarray:
    """(V,) bool of a mask file: one integer per line, exactly V lines."""
    raw = np.frombuffer(data, dtype=np.uint8)
    if len(raw) == 2 * n_vertices and (raw[1::2] == 10).all():
        digits = raw[0::2]
        if ((digits >= 48) & (digits <= 57)).all():  # the common "0\n"/"1\n" file
            in_mask: np.ndarray = digits != 48
            return in_mask
    tokens = data.split()
    lines = data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)
    if len(tokens) != n_vertices or lines != n_vertices:
        raise PredictionFormatError(
            f"{loc}: Expected one integer per line for each of the scene's {n_vertices} vertices, but got "
            f"{lines} lines and {len(tokens)} values")
    try:
        values = np.array(tokens, dtype=np.int64)
    except (ValueError, OverflowError):
        bad = next((t for t in tokens if not t.lstrip(b"+-").isdigit()), tokens[0] if tokens else b"")
        raise PredictionFormatError(
            f"{loc}: Expected one integer per line, but got {bad[:40].decode('utf-8', 'replace')!r}") from None
    result: np.ndarray = values != 0
    return result


class TextReader:
    """ScanNet's ``<aspect>/<scene_id>.txt`` + mask files, in a zip."""

    format = "text"

    def __init__(self, archive: Archive, manifest: dict[str, Any], budget: Budget) -> None:
        self.archive = archive
        self.file = archive.file
        self.manifest = manifest
        self.budget = budget
        self.max_masks = max_masks_per_scene()
        self.dropped = Dropped()
        names = [n for n in archive.files() if not ignorable(tuple(n.split("/")))]
        prefix, parts = split_prefix([tuple(n.split("/")) for n in names], manifest["aspects"])
        self.prefix = prefix
        self.members: dict[tuple[str, str], str] = {}
        files: set[str] = set()
        loose: list[str] = []
        for p, name in zip(parts, names):
            if p[0] not in manifest["aspects"]:
                raise PredictionFormatError(
                    f"{self.file}: Expected aspect folders among {', '.join(manifest['aspects'])}, "
                    f"but got {name!r}")
            if len(p) < 2:
                raise PredictionFormatError(f"{self.file}: Expected files inside aspect folders, but got {name!r}")
            files.add("/".join(p))
            if len(p) == 2 and p[1].endswith(".txt"):
                scene = p[1][:-4]
                if scene in set(manifest["aspects"][p[0]]):
                    self.members[(p[0], scene)] = name
                else:
                    loose.append("/".join(p))
        self.files = files
        self._index: dict[tuple[str, str], list[tuple[str, int, float]]] = {}
        referenced: set[str] = set()
        for (aspect, scene), name in self.members.items():
            entries = self._read_index(aspect, scene, name)
            self._index[(aspect, scene)] = entries
            referenced.update(path for path, _, _ in entries)
        for path in loose:
            if path not in referenced:
                aspect, stem = path.split("/")[0], path.split("/")[1][:-4]
                raise PredictionFormatError(
                    f"{where(self.file, aspect)}: Expected scene ids of the split (or mask files named by an "
                    f"index file), but got unknown scene {stem!r}")

    def _read_index(self, aspect: str, scene: str, name: str) -> list[tuple[str, int, float]]:
        loc = where(self.file, f"{aspect}/{scene}.txt")
        data = bytes(self.archive.read(name, self.max_masks * _INDEX_LINE_BYTES, loc))
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise PredictionFormatError(f"{loc}: Expected UTF-8 text, but got byte {exc.start}") from None
        entries: list[tuple[str, int, float]] = []
        seen: set[str] = set()
        for number, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            fields = line.split()
            if len(fields) != 3:
                raise PredictionFormatError(
                    f"{loc}: line {number}: Expected `<relative mask path> <class id> <confidence>`, "
                    f"but got {line[:120]!r}")
            rel, cls_text, conf_text = fields
            path = PurePosixPath(rel)
            if rel.startswith("/") or "\\" in rel or ".." in path.parts or ":" in rel:
                raise PredictionFormatError(
                    f"{loc}: line {number}: Expected a mask path relative to the {aspect}/ folder and inside it, "
                    f"but got {rel!r}")
            full = "/".join((aspect, *path.parts))
            if full not in self.files:
                raise PredictionFormatError(
                    f"{loc}: line {number}: Expected the mask file {self.prefix + full!r} in the archive, "
                    f"but it is missing")
            if full in seen:
                raise PredictionFormatError(
                    f"{loc}: line {number}: Expected each mask file once per scene, but got {rel!r} again")
            seen.add(full)
            try:
                cls_value, conf = float(cls_text), float(conf_text)
            except ValueError:
                raise PredictionFormatError(
                    f"{loc}: line {number}: Expected a numeric class id and confidence, but got "
                    f"{cls_text[:40]!r} and {conf_text[:40]!r}") from None
            if not math.isfinite(cls_value) or cls_value != int(cls_value) or abs(cls_value) > 2**62:
                raise PredictionFormatError(f"{loc}: line {number}: Expected an integer class id, but got {cls_text!r}")
            if not math.isfinite(conf):
                raise PredictionFormatError(f"{loc}: line {number}: Expected a finite confidence, but got {conf_text!r}")
            entries.append((full, int(cls_value), conf))
        if len(entries) > self.max_masks:
            raise PredictionFormatError(
                f"{loc}: Expected at most {self.max_masks:,} masks per scene (EVAL_OPENSCAN_MAX_MASKS_PER_SCENE), "
                f"but got {len(entries):,}")
        return entries

    def scenes(self) -> list[str]:
        return sorted({s for _, s in self.members})

    def present(self, aspect: str) -> set[str]:
        return {s for a, s in self.members if a == aspect}

    def read(self, scene: str) -> dict[str, ScenePrediction]:
        return {a: self._read_one(a, scene) for a in self.manifest["aspects"] if (a, scene) in self.members}

    def _read_one(self, aspect: str, scene: str) -> ScenePrediction:
        n_vertices = int(self.manifest["scenes"][scene])
        entries = self._index[(aspect, scene)]
        vertex, mask = [], []
        for m, (path, _, _) in enumerate(entries):
            loc = where(self.file, path)
            data = bytes(self.archive.read(self.prefix + path, n_vertices * _LINE_BYTES, loc))
            members = np.flatnonzero(parse_mask(data, n_vertices, loc))
            vertex.append(members)
            mask.append(np.full(len(members), m, dtype=np.int64))
        empty = np.zeros(0, dtype=np.int64)
        proposals = Proposals(np.concatenate(vertex) if vertex else empty,
                              np.concatenate(mask) if mask else empty.copy(), len(entries))
        classes = np.array([c for _, c, _ in entries], dtype=np.int64)
        scores = np.array([s for _, _, s in entries], dtype=np.float64)
        return scene_prediction(proposals, np.arange(len(entries), dtype=np.int64), scores, classes, None,
                                len(self.manifest["vocabulary"][aspect]), self.dropped, aspect)
