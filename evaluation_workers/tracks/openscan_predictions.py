"""OpenScan predictions: the official zip of per-scene ``.npz`` and our compact ``.npz``.

Both are read without trusting the file: member names may not leave the
archive, every ``.npy`` header is read (and its size checked) before its data
is allocated, inflating never reads past the size the header announces,
object arrays are refused (``allow_pickle`` stays off), and every value is
checked against the public manifest. Messages name the file, aspect, scene and
field. See docs/openscan-format.md for both layouts.

A reader yields, per scene, ``{aspect: ScenePrediction}``; masks are given as
(vertex, mask) memberships so that intersections are one bincount.
"""

from __future__ import annotations

import io
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

import numpy as np

from evaluation_workers.errors import PredictionFormatError, where

COMPACT_FORMAT = "openscan-compact/1"
MAX_MEMBER_BYTES = 4 * 2**30  # one inflated array
MAX_NPZ_BYTES = 4 * 2**30  # one inflated per-scene .npz inside the zip
_NUMERIC = "biuf"


@dataclass
class Proposals:
    """Masks of one scene as memberships: vertex[e] is in mask[e]. (E,) int64 each; n masks."""

    vertex: np.ndarray
    mask: np.ndarray
    n: int


@dataclass
class ScenePrediction:
    """One scene's predictions for one aspect.

    Attributes:
        proposals: the scene's masks (shared between aspects in the compact form).
        rows: (N,) int64, which proposal each prediction uses.
        scores: (N,) float64.
        classes: (N,) int64, 1..K.
        sem_pred: (V,) int64 or None.
    """

    proposals: Proposals
    rows: np.ndarray
    scores: np.ndarray
    classes: np.ndarray
    sem_pred: np.ndarray | None


def _safe_name(name: str, file: str) -> PurePosixPath:
    path = PurePosixPath(name)
    if "\\" in name or name.startswith("/") or ".." in path.parts or (path.parts and ":" in path.parts[0]):
        raise PredictionFormatError(f"{file}: Expected member paths inside the archive, but got {name!r}")
    return path


def read_npy(zf: zipfile.ZipFile, name: str, file: str, max_bytes: int = MAX_MEMBER_BYTES) -> np.ndarray:
    """One ``.npy`` member, its header checked before anything is allocated."""
    fmt = np.lib.format
    try:
        with zf.open(name) as f:
            version = fmt.read_magic(f)  # type: ignore[no-untyped-call]
            if version == (1, 0):
                shape, fortran, dtype = fmt.read_array_header_1_0(f)  # type: ignore[no-untyped-call]
            elif version == (2, 0):
                shape, fortran, dtype = fmt.read_array_header_2_0(f)  # type: ignore[no-untyped-call]
            else:
                raise ValueError(f"unsupported .npy version {version}")
            if dtype.hasobject:
                raise PredictionFormatError(
                    f"{file}: Expected `{name[:-4]}` to hold numbers, but got "
                    f"Python objects (pickled arrays are not accepted)"
                )
            nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
            if nbytes > max_bytes:
                raise PredictionFormatError(
                    f"{file}: Expected `{name[:-4]}` to be at most {max_bytes} bytes, "
                    f"but its header announces {nbytes} ({shape}, {dtype})"
                )
            data = f.read(nbytes)  # never inflates past the announced size
    except PredictionFormatError:
        raise
    except (ValueError, OSError, zipfile.BadZipFile, EOFError, KeyError) as exc:
        raise PredictionFormatError(
            f"{file}: Expected `{name[:-4]}` to be a valid .npy array, but got {exc}"
        ) from exc
    if len(data) != nbytes:
        raise PredictionFormatError(
            f"{file}: Expected `{name[:-4]}` to hold {nbytes} bytes, but got {len(data)} (truncated)"
        )
    return np.frombuffer(data, dtype=dtype).reshape(shape, order="F" if fortran else "C")


def _open_zip(data: Any, file: str) -> zipfile.ZipFile:
    try:
        return zipfile.ZipFile(data)
    except (zipfile.BadZipFile, OSError, ValueError) as exc:
        raise PredictionFormatError(f"{file}: Expected a zip archive, but got {exc}") from exc


def _numeric(arr: np.ndarray, field: str, loc: str, shape: tuple[int, ...]) -> np.ndarray:
    if arr.dtype.kind not in _NUMERIC:
        raise PredictionFormatError(f"{loc}: Expected `{field}` to be numeric, but got dtype {arr.dtype}")
    if arr.shape != shape:
        raise PredictionFormatError(f"{loc}: Expected `{field}` to have shape {shape}, but got {arr.shape}")
    return arr


def check_scores(scores: np.ndarray, loc: str, field: str = "pred_scores") -> np.ndarray:
    scores = scores.astype(np.float64)
    bad = ~np.isfinite(scores)
    if bad.any():
        i = int(np.argmax(bad))
        raise PredictionFormatError(
            f"{loc}: Expected `{field}` to be finite, but got {scores[i]} at mask {i}"
        )
    return scores


def check_ids(values: np.ndarray, loc: str, field: str, n_classes: int | None) -> np.ndarray:
    """Integer ids; with ``n_classes``, each must lie in 1..K (else any integer)."""
    if values.dtype.kind == "f":
        ok = np.isfinite(values) & (values == np.round(values))
        if not ok.all():
            i = int(np.argmax(~ok))
            raise PredictionFormatError(
                f"{loc}: Expected `{field}` to hold integers, but got {values[i]} at {i}"
            )
        if np.abs(values).max(initial=0) > 2**62:
            raise PredictionFormatError(
                f"{loc}: Expected `{field}` to hold ids, but got {np.abs(values).max()}"
            )
    elif values.dtype.kind == "u" and values.dtype.itemsize == 8 and values.max(initial=0) > 2**62:
        raise PredictionFormatError(f"{loc}: Expected `{field}` to hold ids, but got {values.max()}")
    values = values.astype(np.int64)
    if n_classes is not None:
        bad = (values < 1) | (values > n_classes)
        if bad.any():
            i = int(np.argmax(bad))
            raise PredictionFormatError(
                f"{loc}: Expected `{field}` to be attribute ids in 1..{n_classes}, "
                f"but got {values[i]} at mask {i}"
            )
    return values


class OfficialReader:
    """``<aspect>/<scene_id>.npz`` members (optionally under one top folder) of a zip."""

    def __init__(self, path: Path, manifest: dict[str, Any]) -> None:
        self.path = Path(path)
        self.file = self.path.name
        self.manifest = manifest
        self.zf = _open_zip(self.path, self.file)
        names = [i.filename for i in self.zf.infolist() if not i.is_dir()]
        parts = [_safe_name(n, self.file).parts for n in names]
        keep = [p for p in parts if p[0] != "__MACOSX" and not p[-1].startswith(".")]
        if keep and all(len(p) == 3 for p in keep) and len({p[0] for p in keep}) == 1:
            keep = [p[1:] for p in keep]
            self.prefix = parts[0][0] + "/"
        else:
            self.prefix = ""
        self.members: dict[tuple[str, str], str] = {}
        for p in keep:
            name = "/".join(p)
            if len(p) != 2 or not p[1].endswith(".npz"):
                raise PredictionFormatError(
                    f"{self.file}: Expected members named <aspect>/<scene_id>.npz, "
                    f"but got {self.prefix + name!r}"
                )
            aspect, scene = p[0], p[1][:-4]
            if aspect not in manifest["aspects"]:
                raise PredictionFormatError(
                    f"{self.file}: Expected aspect folders among "
                    f"{', '.join(manifest['aspects'])}, but got {aspect!r}"
                )
            if scene not in set(manifest["aspects"][aspect]):
                raise PredictionFormatError(
                    f"{where(self.file, aspect)}: Expected scene ids of the split, "
                    f"but got unknown scene {scene!r}"
                )
            if (aspect, scene) in self.members:
                raise PredictionFormatError(
                    f"{self.file}: Expected one file per scene, but got {name!r} twice"
                )
            self.members[(aspect, scene)] = self.prefix + name

    def scenes(self) -> list[str]:
        return sorted({s for _, s in self.members})

    def present(self, aspect: str) -> set[str]:
        return {s for a, s in self.members if a == aspect}

    def read(self, scene: str) -> dict[str, ScenePrediction]:
        return {a: self._read_one(a, scene) for a in self.manifest["aspects"] if (a, scene) in self.members}

    def _read_one(self, aspect: str, scene: str) -> ScenePrediction:
        name = self.members[(aspect, scene)]
        loc = where(self.file, f"{aspect}/{scene}.npz")
        n_vertices = int(self.manifest["scenes"][scene])
        n_classes = len(self.manifest["vocabulary"][aspect])
        info = self.zf.getinfo(name)
        if info.file_size > MAX_NPZ_BYTES:
            raise PredictionFormatError(
                f"{loc}: Expected at most {MAX_NPZ_BYTES} bytes, but got {info.file_size}"
            )
        with self.zf.open(info) as f:
            blob = f.read(MAX_NPZ_BYTES + 1)
        if len(blob) > MAX_NPZ_BYTES:
            raise PredictionFormatError(
                f"{loc}: Expected at most {MAX_NPZ_BYTES} bytes inflated, but got more"
            )
        if not blob:
            raise PredictionFormatError(f"{loc}: Expected an .npz file, but got an empty (0-byte) file")
        inner = _open_zip(io.BytesIO(blob), loc)
        keys = {n[:-4]: n for n in inner.namelist() if n.endswith(".npy")}
        for field in ("pred_masks", "pred_classes"):
            if field not in keys:
                raise PredictionFormatError(f"{loc}: Expected a `{field}` array, but got keys {sorted(keys)}")
        score_key = "pred_scores" if "pred_scores" in keys else "pred_score"
        if score_key not in keys:
            raise PredictionFormatError(f"{loc}: Expected a `pred_scores` array, but got keys {sorted(keys)}")
        masks = read_npy(inner, keys["pred_masks"], loc)
        if masks.ndim != 2 or masks.shape[0] != n_vertices:
            raise PredictionFormatError(
                f"{loc}: Expected `pred_masks` to have shape ({n_vertices}, M) "
                f"(one row per vertex of the scene), but got {masks.shape}"
            )
        if masks.dtype.kind not in _NUMERIC:
            raise PredictionFormatError(
                f"{loc}: Expected `pred_masks` to be numeric, but got dtype {masks.dtype}"
            )
        n = masks.shape[1]
        scores = check_scores(
            _numeric(read_npy(inner, keys[score_key], loc), score_key, loc, (n,)), loc, score_key
        )
        classes = check_ids(
            _numeric(read_npy(inner, keys["pred_classes"], loc), "pred_classes", loc, (n,)),
            loc,
            "pred_classes",
            n_classes,
        )
        sem = None
        if "sem_pred" in keys:
            sem = check_ids(
                _numeric(read_npy(inner, keys["sem_pred"], loc), "sem_pred", loc, (n_vertices,)),
                loc,
                "sem_pred",
                None,
            )
        vertex, mask = np.nonzero(masks)
        proposals = Proposals(vertex.astype(np.int64), mask.astype(np.int64), n)
        return ScenePrediction(proposals, np.arange(n, dtype=np.int64), scores, classes, sem)


def runs_to_memberships(
    starts: np.ndarray, lengths: np.ndarray, run_mask: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Expand runs (start, length) of masks into (vertex, mask) memberships, (E,) int64 each."""
    lengths = lengths.astype(np.int64)
    total = int(lengths.sum())
    run_of = np.repeat(np.arange(len(lengths)), lengths)
    first = np.cumsum(lengths) - lengths
    vertex = starts.astype(np.int64)[run_of] + (np.arange(total) - first[run_of])
    return vertex, run_mask.astype(np.int64)[run_of]


class CompactReader:
    """Our compact form: one uncompressed .npz, masks as runs, shared by the aspects."""

    def __init__(self, path: Path, manifest: dict[str, Any]) -> None:
        self.path = Path(path)
        self.file = self.path.name
        self.manifest = manifest
        zf = _open_zip(self.path, self.file)
        members = {}
        for n in zf.namelist():
            _safe_name(n, self.file)
            if n.endswith(".npy"):
                members[n[:-4]] = n
        self.arrays = {k: read_npy(zf, n, self.file) for k, n in members.items()}
        self._check()

    def _get(self, key: str, kind: str, ndim: int) -> np.ndarray:
        if key not in self.arrays:
            raise PredictionFormatError(f"{self.file}: Expected a `{key}` array, but got none")
        arr = self.arrays[key]
        if arr.dtype.kind not in kind or arr.ndim != ndim:
            raise PredictionFormatError(
                f"{self.file}: Expected `{key}` to be a {ndim}-d array of kind {kind!r}, "
                f"but got shape {arr.shape} and dtype {arr.dtype}"
            )
        return arr

    def _check(self) -> None:
        fmt = self._get("format", "U", 0)
        if str(fmt) != COMPACT_FORMAT:
            raise PredictionFormatError(
                f"{self.file}: Expected `format` {COMPACT_FORMAT!r}, but got {str(fmt)!r}"
            )
        self.scene_ids = [str(s) for s in self._get("scene_ids", "U", 1)]
        self._index = {s: i for i, s in enumerate(self.scene_ids)}
        known = self.manifest["scenes"]
        if len(set(self.scene_ids)) != len(self.scene_ids):
            raise PredictionFormatError(f"{self.file}: Expected `scene_ids` to be unique, but got repeats")
        for s in self.scene_ids:
            if s not in known:
                raise PredictionFormatError(
                    f"{self.file}: Expected scene ids of the split, but got unknown scene {s!r}"
                )
        n_scenes = len(self.scene_ids)
        counts = self._get("vertex_counts", "iu", 1)
        expected = np.array([known[s] for s in self.scene_ids], dtype=np.int64)
        if counts.shape != (n_scenes,) or not np.array_equal(counts.astype(np.int64), expected):
            first_bad = next((i for i in range(min(len(counts), n_scenes)) if counts[i] != expected[i]), 0)
            raise PredictionFormatError(
                f"{where(self.file, self.scene_ids[first_bad] if n_scenes else '')}: Expected "
                f"`vertex_counts` to equal the scenes' vertex counts, but got {counts[:n_scenes]}"
            )
        self.vertex_offsets = np.concatenate([[0], np.cumsum(expected)]).astype(np.int64)
        self.proposal_offsets = self._offsets("proposal_offsets", n_scenes)
        n_props = int(self.proposal_offsets[-1])
        self.run_offsets = self._offsets("run_offsets", n_props)
        n_runs = int(self.run_offsets[-1])
        starts = self._get("run_starts", "iu", 1).astype(np.int64)
        lengths = self._get("run_lengths", "iu", 1).astype(np.int64)
        if starts.shape != (n_runs,) or lengths.shape != (n_runs,):
            raise PredictionFormatError(
                f"{self.file}: Expected `run_starts` and `run_lengths` to have shape "
                f"({n_runs},), but got {starts.shape} and {lengths.shape}"
            )
        run_prop = np.repeat(np.arange(n_props), np.diff(self.run_offsets))
        prop_scene = np.repeat(np.arange(n_scenes), np.diff(self.proposal_offsets))
        run_scene = prop_scene[run_prop]
        ends = starts + lengths
        bad = (lengths < 1) | (starts < 0) | (ends > expected[run_scene])
        same = run_prop[1:] == run_prop[:-1]
        overlap = np.zeros(n_runs, dtype=bool)
        overlap[1:] = same & (starts[1:] < ends[:-1])
        bad = bad | overlap
        if bad.any():
            run = int(np.argmax(bad))
            sc = int(run_scene[run])
            proposal = f"proposal {int(run_prop[run] - self.proposal_offsets[sc])}"
            raise PredictionFormatError(
                f"{where(self.file, self.scene_ids[sc], proposal)}: Expected runs in increasing vertex order, "
                f"non-overlapping, of length >= 1 inside the scene's {int(expected[sc])} vertices, "
                f"but got start {int(starts[run])} length {int(lengths[run])}"
            )
        self.starts, self.lengths, self.run_prop = starts, lengths, run_prop
        self.aspects: dict[str, dict[str, np.ndarray]] = {}
        for aspect in self.manifest["aspects"]:
            if f"{aspect}.rows" in self.arrays:
                self.aspects[aspect] = self._check_aspect(aspect, n_scenes)
        for key in self.arrays:
            head = key.split(".")[0]
            if "." in key and head not in self.manifest["aspects"]:
                raise PredictionFormatError(
                    f"{self.file}: Expected aspects among "
                    f"{', '.join(self.manifest['aspects'])}, but got {head!r}"
                )

    def _offsets(self, key: str, n: int) -> np.ndarray:
        off = self._get(key, "iu", 1).astype(np.int64)
        if off.shape != (n + 1,) or off[0] != 0 or (np.diff(off) < 0).any():
            raise PredictionFormatError(
                f"{self.file}: Expected `{key}` to be ({n + 1},) non-decreasing offsets "
                f"from 0, but got shape {off.shape}"
            )
        return off

    def _check_aspect(self, aspect: str, n_scenes: int) -> dict[str, np.ndarray]:
        loc = where(self.file, aspect)
        rows = self._offsets(f"{aspect}.rows", n_scenes)
        n = int(rows[-1])
        out = {"rows": rows}
        prop = self._get(f"{aspect}.proposal", "iu", 1).astype(np.int64)
        scores = self._get(f"{aspect}.scores", "iuf", 1)
        classes = self._get(f"{aspect}.classes", "iuf", 1)
        for key, arr in (("proposal", prop), ("scores", scores), ("classes", classes)):
            if arr.shape != (n,):
                raise PredictionFormatError(
                    f"{loc}: Expected `{aspect}.{key}` to have shape ({n},), but got {arr.shape}"
                )
        row_scene = np.repeat(np.arange(n_scenes), np.diff(rows))
        n_props = np.diff(self.proposal_offsets)[row_scene]
        bad = (prop < 0) | (prop >= n_props)
        if bad.any():
            i = int(np.argmax(bad))
            raise PredictionFormatError(
                f"{where(loc, self.scene_ids[row_scene[i]])}: Expected `{aspect}.proposal` "
                f"to index the scene's {int(n_props[i])} proposals, but got {int(prop[i])}"
            )
        out["proposal"] = prop
        out["scores"] = check_scores(scores, loc, f"{aspect}.scores")
        out["classes"] = check_ids(
            classes, loc, f"{aspect}.classes", len(self.manifest["vocabulary"][aspect])
        )
        if f"{aspect}.sem_pred" in self.arrays:
            sem = self._get(f"{aspect}.sem_pred", "iuf", 1)
            if sem.shape != (int(self.vertex_offsets[-1]),):
                raise PredictionFormatError(
                    f"{loc}: Expected `{aspect}.sem_pred` to have shape "
                    f"({int(self.vertex_offsets[-1])},), but got {sem.shape}"
                )
            out["sem_pred"] = check_ids(sem, loc, f"{aspect}.sem_pred", None)
        return out

    def scenes(self) -> list[str]:
        return list(self.scene_ids)

    def present(self, aspect: str) -> set[str]:
        if aspect not in self.aspects:
            return set()
        return set(self.scene_ids)

    def read(self, scene: str) -> dict[str, ScenePrediction]:
        s = self._index[scene]
        p0, p1 = int(self.proposal_offsets[s]), int(self.proposal_offsets[s + 1])
        r0, r1 = int(self.run_offsets[p0]), int(self.run_offsets[p1])
        vertex, mask = runs_to_memberships(self.starts[r0:r1], self.lengths[r0:r1], self.run_prop[r0:r1] - p0)
        proposals = Proposals(vertex, mask, p1 - p0)
        out = {}
        v0, v1 = int(self.vertex_offsets[s]), int(self.vertex_offsets[s + 1])
        for aspect, arr in self.aspects.items():
            a0, a1 = int(arr["rows"][s]), int(arr["rows"][s + 1])
            sem = arr["sem_pred"][v0:v1] if "sem_pred" in arr else None
            out[aspect] = ScenePrediction(
                proposals, arr["proposal"][a0:a1], arr["scores"][a0:a1], arr["classes"][a0:a1], sem
            )
        return out


def open_predictions(path: Path, manifest: dict[str, Any]) -> OfficialReader | CompactReader:
    """A reader for either layout, told apart by content (a ``format.npy`` member means compact)."""
    path = Path(path)
    if not path.is_file() or path.stat().st_size == 0:
        raise PredictionFormatError(
            f"{path.name}: Expected a zip or .npz file, but got an empty or missing file"
        )
    with _open_zip(path, path.name) as zf:
        compact = "format.npy" in zf.namelist()
    return CompactReader(path, manifest) if compact else OfficialReader(path, manifest)


def iter_scenes(reader: OfficialReader | CompactReader) -> Iterator[tuple[str, dict[str, ScenePrediction]]]:
    for scene in reader.scenes():
        yield scene, reader.read(scene)
