"""What every OpenScan prediction form reads into, and the checks they share.

A reader yields, per scene, ``{aspect: ScenePrediction}``; masks are given as
(vertex, mask) memberships so that intersections are one bincount. Masks whose
class id is not one of the aspect's ids (0, K+1 for ``other``, anything outside
1..K) are dropped, as the official evaluator drops them, and counted in
``Dropped`` for the result's warnings (METRICS.md, OpenScan).
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from evaluation_workers.plugin import PredictionFormatError

# Real methods emit 100-600 masks per scene and aspect; this bounds what a
# header may announce (EVAL_OPENSCAN_MAX_MASKS_PER_SCENE overrides it).
DEFAULT_MAX_MASKS_PER_SCENE = 2000
ID_KINDS = "iuf"  # integer-valued numbers; bool is refused where ids are expected
MASK_KINDS = "biuf"


def max_masks_per_scene() -> int:
    name = "EVAL_OPENSCAN_MAX_MASKS_PER_SCENE"
    value = os.environ.get(name)
    if not value:
        return DEFAULT_MAX_MASKS_PER_SCENE
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"Expected {name} to be a number of masks, but got {value!r}") from None


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
        rows: (N,) int64, which proposal each kept prediction uses (file order).
        scores: (N,) float64.
        classes: (N,) int64, 1..K.
        sem_pred: (V,) int64 or None.
    """

    proposals: Proposals
    rows: np.ndarray
    scores: np.ndarray
    classes: np.ndarray
    sem_pred: np.ndarray | None


@dataclass
class Dropped:
    """Masks dropped for a class id outside 1..K, per aspect: masks and scenes (thread-safe)."""

    masks: dict[str, int] = field(default_factory=dict)
    scenes: dict[str, int] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def add(self, aspect: str, n: int) -> None:
        if n:
            with self._lock:
                self.masks[aspect] = self.masks.get(aspect, 0) + n
                self.scenes[aspect] = self.scenes.get(aspect, 0) + 1

    def warnings(self, vocabulary: dict[str, list[str]], n_scenes: dict[str, int]) -> list[str]:
        """One line per aspect with drops, in the vocabulary's order (whatever order scenes were read in)."""
        out = []
        for aspect in (a for a in vocabulary if a in self.masks):
            n, k = self.masks[aspect], len(vocabulary[aspect])
            out.append(
                f"{aspect}: dropped {n} masks in {self.scenes[aspect]} of {n_scenes.get(aspect, 0)} scenes "
                f"whose class id is not an attribute id 1..{k} (0 = unlabelled, {k + 1} = other), "
                f"as the official evaluator drops them")
        return out


def memberships(masks: np.ndarray) -> Proposals:
    """(vertex, mask) pairs of a (V, M) mask array, non-zero = in (NaN counts as in, as `!= 0` does)."""
    n_vertices, n = masks.shape
    if n == 0 or n_vertices == 0:
        empty = np.zeros(0, dtype=np.int64)
        return Proposals(empty, empty.copy(), n)
    if masks.flags.c_contiguous:
        flat = flat_nonzero(masks)
        vertex = flat // n
        return Proposals(vertex, flat - vertex * n, n)
    flat = flat_nonzero(masks.T)  # Fortran order: the transpose is the C view
    mask = flat // n_vertices
    return Proposals(flat - mask * n_vertices, mask, n)


def flat_nonzero(array: np.ndarray) -> np.ndarray:
    """``np.flatnonzero(array)`` of a C-contiguous array, three to ten times faster on masks.

    NumPy's nonzero is fast on bool data only. One-byte masks (bool, uint8) are
    scanned as they are, eight bytes at a time as words: masks are mostly
    zeros, and only the words with a non-zero byte are looked into, as bool
    when their bytes are all 0 or 1 (checked on those words only), as ``!= 0``
    otherwise (a bool array whose bytes are not 0 or 1 gets it too). Wider
    types become ``!= 0`` first.
    """
    flat = array.reshape(-1)
    raw = (flat if flat.dtype.itemsize == 1 else flat != 0).view(np.uint8)
    # Words start at an 8-byte address: a stored zip member's masks begin wherever the archive put
    # them, and NumPy copies unaligned words through a buffer to compare them (a third slower).
    lead = min(-raw.ctypes.data % 8, raw.shape[0])
    end = lead + (raw.shape[0] - lead) // 8 * 8
    words = raw[lead:end].view(np.uint64)
    parts = [np.flatnonzero(raw[:lead])] if lead else []
    # Blocks of words, so that a block's temporaries stay small (_BLOCK_WORDS).
    parts += [_word_block(words[w0 : w0 + _BLOCK_WORDS], lead + w0 * 8, flat.dtype.itemsize == 1)
              for w0 in range(0, words.shape[0], _BLOCK_WORDS)]
    if end < raw.shape[0]:
        parts.append(end + np.flatnonzero(raw[end:]))
    if len(parts) == 1:
        return parts[0]
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)


def _word_block(words: np.ndarray, offset: int, any_byte: bool) -> np.ndarray:
    """Flat byte positions (from ``offset``) of the non-zero bytes of ``words``; ``any_byte``: bytes
    other than 0 and 1 may occur (one-byte masks), so they are compared with 0 rather than read as bool."""
    hit = np.flatnonzero(words != 0)
    hit_words = words[hit]
    if any_byte and bool(np.bitwise_or.reduce(hit_words & _ABOVE_ONE, initial=0)):
        inside = np.flatnonzero(hit_words.view(np.uint8) != 0)
    else:
        inside = np.flatnonzero(hit_words.view(np.bool_))
    found: np.ndarray = (hit[inside >> 3] * 8 + offset) + (inside & 7)
    return found


_ABOVE_ONE = np.uint64(0xFEFE_FEFE_FEFE_FEFE)  # the bits of a word's bytes other than the lowest
# 8 MiB of masks per block. On one thread the size hardly matters (3.3-3.6 ms a scene from 512 KiB to
# 8 MiB); on two, each block's dozen NumPy calls hand the GIL over between the reading threads: 512 KiB
# blocks made 19,000 context switches on 50 scenes x 8 aspects, 8 MiB ones 5,000, and 2.74 -> 2.52 s.
_BLOCK_WORDS = 1 << 20


def check_kind(arr: np.ndarray, kinds: str, loc: str, field_name: str) -> np.ndarray:
    if arr.dtype.kind not in kinds:
        expected = "numbers" if kinds == MASK_KINDS else "integer or float numbers (not bool)"
        raise PredictionFormatError(f"{loc}: Expected `{field_name}` to hold {expected}, but got dtype {arr.dtype}")
    return arr


def check_shape(arr: np.ndarray, loc: str, field_name: str, shape: tuple[int, ...]) -> np.ndarray:
    if arr.shape != shape:
        raise PredictionFormatError(f"{loc}: Expected `{field_name}` to have shape {shape}, but got {arr.shape}")
    return arr


def check_scores(scores: np.ndarray, loc: str, field_name: str = "pred_scores") -> np.ndarray:
    check_kind(scores, ID_KINDS, loc, field_name)
    scores = scores.astype(np.float64)
    bad = ~np.isfinite(scores)
    if bad.any():
        i = int(np.argmax(bad))
        raise PredictionFormatError(f"{loc}: Expected `{field_name}` to be finite, but got {scores[i]} at mask {i}")
    return scores


def check_ids(values: np.ndarray, loc: str, field_name: str) -> np.ndarray:
    """(N,) int64 of integer-valued numbers (any integer; the caller decides what is in range)."""
    check_kind(values, ID_KINDS, loc, field_name)
    if values.dtype.kind == "f":
        ok = np.isfinite(values) & (values == np.round(values))
        if not ok.all():
            i = int(np.argmax(~ok))
            raise PredictionFormatError(f"{loc}: Expected `{field_name}` to hold integers, but got {values[i]} at {i}")
        if np.abs(values).max(initial=0) > 2**62:
            raise PredictionFormatError(f"{loc}: Expected `{field_name}` to hold ids, but got {np.abs(values).max()}")
    elif values.dtype.kind == "u" and values.dtype.itemsize == 8 and values.max(initial=0) > 2**62:
        raise PredictionFormatError(f"{loc}: Expected `{field_name}` to hold ids, but got {values.max()}")
    return values.astype(np.int64)


def known_classes(classes: np.ndarray, n_classes: int) -> np.ndarray:
    """(N,) bool: which predictions carry an attribute id 1..K (the others are dropped)."""
    result: np.ndarray = (classes >= 1) & (classes <= n_classes)
    return result


def scene_prediction(
    proposals: Proposals,
    rows: np.ndarray,
    scores: np.ndarray,
    classes: np.ndarray,
    sem_pred: np.ndarray | None,
    n_classes: int,
    dropped: Dropped,
    aspect: str,
) -> ScenePrediction:
    """The prediction with masks of unknown class ids dropped (and counted)."""
    keep = known_classes(classes, n_classes)
    if not keep.all():
        dropped.add(aspect, int((~keep).sum()))
        rows, scores, classes = rows[keep], scores[keep], classes[keep]
    return ScenePrediction(proposals, rows, scores, classes, sem_pred)


def split_prefix(parts: list[tuple[str, ...]], aspects: Any) -> tuple[str, list[tuple[str, ...]]]:
    """Strip one top folder shared by every member (zips made of a folder), unless it is an aspect."""
    heads = {p[0] for p in parts}
    if len(heads) == 1 and all(len(p) >= 3 for p in parts) and next(iter(heads)) not in aspects:
        return next(iter(heads)) + "/", [p[1:] for p in parts]
    return "", parts


def ignorable(parts: tuple[str, ...]) -> bool:
    """macOS metadata and hidden files that archivers add."""
    return parts[0] == "__MACOSX" or any(p.startswith(".") for p in parts)
