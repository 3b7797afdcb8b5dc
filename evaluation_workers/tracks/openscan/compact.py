"""Our compact form: one ``.npz``, masks as runs of vertices, shared by the aspects.

Members are read one at a time in dependency order, each header checked
against an exact shape derived from what was read before (and the public
manifest) before its payload is inflated: scene ids (at most the split's),
vertex counts, proposal offsets (at most the most masks per scene), run
offsets (a proposal has at most its scene's vertex count of runs), then the
runs themselves, inflated a chunk at a time and checked per chunk. Members the
format does not define are refused unread. See docs/openscan-format.md.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from evaluation_workers.plugin import PredictionFormatError, where
from evaluation_workers.tracks.openscan.common import (
    ID_KINDS,
    Dropped,
    Proposals,
    ScenePrediction,
    check_ids,
    check_scores,
    max_masks_per_scene,
    scene_prediction,
)
from evaluation_workers.tracks.openscan.members import Archive

COMPACT_FORMAT = "openscan-compact/1"
GLOBAL_KEYS = ("format", "scene_ids", "vertex_counts", "proposal_offsets", "run_offsets", "run_starts", "run_lengths")
ASPECT_KEYS = ("rows", "proposal", "scores", "classes", "sem_pred")
MAX_SCENE_ID_CHARS = 64


def max_members(manifest: dict[str, Any]) -> int:
    return len(GLOBAL_KEYS) + len(ASPECT_KEYS) * len(manifest["aspects"]) + 8


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
    """Our compact form: one .npz, masks as runs, shared by the aspects."""

    format = "compact"

    def __init__(self, archive: Archive, manifest: dict[str, Any]) -> None:
        self.archive = archive
        self.file = archive.file
        self.manifest = manifest
        self.max_masks = max_masks_per_scene()
        self.dropped = Dropped()
        self.names: dict[str, str] = {}
        for name in archive.files():
            key = name[:-4] if name.endswith(".npy") else None
            head, _, tail = (key or "").partition(".")
            known = key in GLOBAL_KEYS or (head in manifest["aspects"] and tail in ASPECT_KEYS)
            if key is None or "/" in name or not known:
                if key is not None and tail and head not in manifest["aspects"]:
                    raise PredictionFormatError(
                        f"{self.file}: Expected aspects among {', '.join(manifest['aspects'])}, but got {head!r}")
                raise PredictionFormatError(
                    f"{self.file}: Expected only the compact form's arrays ({', '.join(GLOBAL_KEYS)}, "
                    f"<aspect>.{{{','.join(ASPECT_KEYS)}}}), but got member {name!r}")
            self.names[key] = name
        self._check()

    def _get(self, key: str, kind: str, shape: tuple[int, ...] | None, max_elements: int,
             max_itemsize: int = 8, chunk_check: Any = None) -> np.ndarray:
        if key not in self.names:
            raise PredictionFormatError(f"{self.file}: Expected a `{key}` array, but got none")
        what = f"{self.file}: `{key}`"

        def header(got: tuple[int, ...], dtype: np.dtype[Any]) -> None:
            if dtype.kind not in kind or (shape is not None and got != shape) or (shape is None and len(got) != 1):
                want = f"shape {shape}" if shape is not None else "a 1-d array"
                raise PredictionFormatError(
                    f"{what}: Expected {want} of kind {kind!r}, but got shape {got} and dtype {dtype}")

        return self.archive.npy(self.names[key], what, max_elements, header, max_itemsize, chunk_check)

    def _check(self) -> None:
        known = self.manifest["scenes"]
        chars = 4 * MAX_SCENE_ID_CHARS
        fmt = self._get("format", "U", (), 1, max_itemsize=chars)
        if str(fmt[()]) != COMPACT_FORMAT:
            raise PredictionFormatError(f"{self.file}: Expected `format` {COMPACT_FORMAT!r}, but got {str(fmt)!r}")
        self.scene_ids = [str(s) for s in self._get("scene_ids", "U", None, len(known), max_itemsize=chars)]
        self._index = {s: i for i, s in enumerate(self.scene_ids)}
        if len(set(self.scene_ids)) != len(self.scene_ids):
            raise PredictionFormatError(f"{self.file}: Expected `scene_ids` to be unique, but got repeats")
        for s in self.scene_ids:
            if s not in known:
                raise PredictionFormatError(f"{self.file}: Expected scene ids of the split, but got unknown scene {s!r}")
        n_scenes = len(self.scene_ids)
        counts = self._get("vertex_counts", "iu", (n_scenes,), n_scenes)
        expected = np.array([known[s] for s in self.scene_ids], dtype=np.int64)
        if not np.array_equal(counts.astype(np.int64), expected):
            bad = int(np.argmax(counts.astype(np.int64) != expected))
            raise PredictionFormatError(
                f"{where(self.file, self.scene_ids[bad])}: Expected `vertex_counts` to equal the scenes' vertex "
                f"counts, but got {int(counts[bad])} instead of {int(expected[bad])}")
        self.vertex_offsets = np.concatenate([[0], np.cumsum(expected)]).astype(np.int64)
        self.proposal_offsets = self._offsets("proposal_offsets", n_scenes, np.full(n_scenes, self.max_masks),
                                              "proposals per scene (EVAL_OPENSCAN_MAX_MASKS_PER_SCENE)")
        n_props = int(self.proposal_offsets[-1])
        prop_scene = np.repeat(np.arange(n_scenes), np.diff(self.proposal_offsets))
        self.run_offsets = self._offsets("run_offsets", n_props, expected[prop_scene],
                                         "runs per proposal (its scene's vertex count)")
        n_runs = int(self.run_offsets[-1])
        self.lengths = self._get("run_lengths", "iu", (n_runs,), n_runs, chunk_check=self._check_lengths)
        self._expected = expected
        self._last: tuple[int, int] = (-1, 0)  # (proposal, end) of the run before the current chunk
        self.starts = self._get("run_starts", "iu", (n_runs,), n_runs, chunk_check=self._check_starts)
        self.aspects: dict[str, dict[str, np.ndarray]] = {}
        for aspect in self.manifest["aspects"]:
            if f"{aspect}.rows" in self.names:
                self.aspects[aspect] = self._check_aspect(aspect, n_scenes)
            elif any(f"{aspect}.{k}" in self.names for k in ASPECT_KEYS):
                raise PredictionFormatError(f"{self.file}: Expected a `{aspect}.rows` array, but got none")

    def _offsets(self, key: str, n: int, max_step: np.ndarray, what: str) -> np.ndarray:
        off = self._get(key, "iu", (n + 1,), n + 1).astype(np.int64)
        step = np.diff(off)
        if off[0] != 0 or (step < 0).any():
            raise PredictionFormatError(
                f"{self.file}: Expected `{key}` to be ({n + 1},) non-decreasing offsets from 0, but got "
                f"{'first ' + str(int(off[0])) if off[0] != 0 else 'a decrease at ' + str(int(np.argmax(step < 0)))}")
        over = step > max_step
        if over.any():
            i = int(np.argmax(over))
            raise PredictionFormatError(
                f"{self.file}: `{key}`: Expected at most {int(max_step[i]):,} {what}, but got {int(step[i]):,} at {i}")
        return off

    def _locate(self, first_run: int, n: int) -> tuple[np.ndarray, np.ndarray]:
        runs = np.arange(first_run, first_run + n)
        prop = np.searchsorted(self.run_offsets, runs, side="right") - 1
        scene = np.searchsorted(self.proposal_offsets, prop, side="right") - 1
        return prop, scene

    def _run_error(self, run: int, start: int, length: int) -> PredictionFormatError:
        prop, scene = (int(x[0]) for x in self._locate(run, 1))
        proposal = f"proposal {prop - int(self.proposal_offsets[scene])}"
        return PredictionFormatError(
            f"{where(self.file, self.scene_ids[scene], proposal)}: Expected runs in increasing vertex order, "
            f"non-overlapping, of length >= 1 inside the scene's {int(self._expected[scene])} vertices, "
            f"but got start {start} length {length}")

    def _check_lengths(self, offset: int, chunk: np.ndarray) -> None:
        bad = chunk < 1
        if bad.any():
            i = int(np.argmax(bad))
            raise PredictionFormatError(
                f"{self.file}: `run_lengths`: Expected lengths >= 1, but got {int(chunk[i])} at run {offset + i}")

    def _check_starts(self, offset: int, chunk: np.ndarray) -> None:
        starts = chunk.astype(np.int64)
        lengths = self.lengths[offset : offset + len(chunk)].astype(np.int64)
        prop, scene = self._locate(offset, len(chunk))
        ends = starts + lengths
        prev_prop = np.concatenate([[self._last[0]], prop[:-1]])
        prev_end = np.concatenate([[self._last[1]], ends[:-1]])
        bad = (starts < 0) | (ends > self._expected[scene]) | ((prop == prev_prop) & (starts < prev_end))
        if bad.any():
            i = int(np.argmax(bad))
            raise self._run_error(offset + i, int(starts[i]), int(lengths[i]))
        if len(chunk):
            self._last = (int(prop[-1]), int(ends[-1]))

    def _check_aspect(self, aspect: str, n_scenes: int) -> dict[str, np.ndarray]:
        loc = where(self.file, aspect)
        per_scene = np.diff(self.proposal_offsets)
        rows = self._offsets(f"{aspect}.rows", n_scenes, np.full(n_scenes, self.max_masks),
                             "predictions per scene (EVAL_OPENSCAN_MAX_MASKS_PER_SCENE)")
        n = int(rows[-1])
        out = {"rows": rows}
        prop = self._get(f"{aspect}.proposal", "iu", (n,), n).astype(np.int64)
        scores = self._get(f"{aspect}.scores", ID_KINDS, (n,), n)
        classes = self._get(f"{aspect}.classes", ID_KINDS, (n,), n)
        row_scene = np.repeat(np.arange(n_scenes), np.diff(rows))
        n_props = per_scene[row_scene]
        bad = (prop < 0) | (prop >= n_props)
        if bad.any():
            i = int(np.argmax(bad))
            raise PredictionFormatError(
                f"{where(loc, self.scene_ids[row_scene[i]])}: Expected `{aspect}.proposal` "
                f"to index the scene's {int(n_props[i])} proposals, but got {int(prop[i])}")
        out["proposal"] = prop
        out["scores"] = check_scores(scores, loc, f"{aspect}.scores")
        out["classes"] = check_ids(classes, loc, f"{aspect}.classes")
        if f"{aspect}.sem_pred" in self.names:
            total = int(self.vertex_offsets[-1])
            out["sem_pred"] = check_ids(self._get(f"{aspect}.sem_pred", ID_KINDS, (total,), total),
                                        loc, f"{aspect}.sem_pred")
        return out

    def scenes(self) -> list[str]:
        return list(self.scene_ids)

    def present(self, aspect: str) -> set[str]:
        return set(self.scene_ids) if aspect in self.aspects else set()

    def read(self, scene: str) -> dict[str, ScenePrediction]:
        s = self._index[scene]
        p0, p1 = int(self.proposal_offsets[s]), int(self.proposal_offsets[s + 1])
        r0, r1 = int(self.run_offsets[p0]), int(self.run_offsets[p1])
        run_prop = np.repeat(np.arange(p1 - p0), np.diff(self.run_offsets[p0 : p1 + 1]))
        vertex, mask = runs_to_memberships(self.starts[r0:r1], self.lengths[r0:r1], run_prop)
        proposals = Proposals(vertex, mask, p1 - p0)
        out = {}
        v0, v1 = int(self.vertex_offsets[s]), int(self.vertex_offsets[s + 1])
        for aspect, arr in self.aspects.items():
            a0, a1 = int(arr["rows"][s]), int(arr["rows"][s + 1])
            sem = arr["sem_pred"][v0:v1] if "sem_pred" in arr else None
            out[aspect] = scene_prediction(
                proposals, arr["proposal"][a0:a1], arr["scores"][a0:a1], arr["classes"][a0:a1], sem,
                len(self.manifest["vocabulary"][aspect]), self.dropped, aspect)
        return out
