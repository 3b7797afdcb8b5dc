"""Per-unit outcomes of scored submissions, kept beside the result where only workers read them.

A paired significance test needs, for both submissions, each unit's outcome
(a question right or wrong, a prompt's TP flags, a scene's PR-curve entries):
per-unit correctness on a hidden split, which must never reach the site. The
scoring task writes them here after scoring (``save``); the paired-test task
reads them back (``load``). Keys come from ``contracts.outcomes_key`` (track,
labels checksum, predictions checksum, scorer version), so a re-score with the
same scorer overwrites the same file.

Root: ``EVAL_OUTCOMES_DIR`` (default ``data/outcomes``), a folder of the
workers like ``EVAL_LABELS_DIR``. Several worker hosts must share it (a
network folder) for a test to find outcomes another host wrote; a test whose
outcomes are missing is answered "unavailable", never guessed.

Format: one ``.npz`` (no pickle) per result; a nested ``{aspect: {name: array}}``
is stored under ``"<aspect>/<name>"``. Integer arrays are stored in the
narrowest integer type that holds them and read back as int64 (MMScan's full
test split pools tens of millions of boxes: prompt ids fit int32, categories int8).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from evaluation_workers.storage import _safe_join


def root() -> Path:
    return Path(os.environ.get("EVAL_OUTCOMES_DIR") or "data/outcomes")


def _narrow(value: Any) -> np.ndarray:
    array: np.ndarray = np.asarray(value)
    if array.dtype.kind not in "iu" or not array.size:
        return array
    lo, hi = int(array.min()), int(array.max())
    for dtype in (np.int8, np.int16, np.int32):
        if np.iinfo(dtype).min <= lo and hi <= np.iinfo(dtype).max:
            narrow: np.ndarray = array.astype(dtype)
            return narrow
    return array


def _flatten(outcomes: dict[str, Any]) -> dict[str, np.ndarray]:
    flat: dict[str, np.ndarray] = {}
    for name, value in outcomes.items():
        if isinstance(value, dict):
            for inner, array in value.items():
                if array is not None:
                    flat[f"{name}/{inner}"] = _narrow(array)
        elif value is not None:
            flat[name] = _narrow(value)
    return flat


def _unflatten(flat: dict[str, np.ndarray]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, array in flat.items():
        if "/" in name:
            outer, inner = name.split("/", 1)
            out.setdefault(outer, {})[inner] = array
        else:
            out[name] = array
    return out


def _widen(array: np.ndarray) -> np.ndarray:
    return array.astype(np.int64) if array.dtype.kind in "iu" else array


def save(key: str, outcomes: dict[str, Any]) -> None:
    """Write ``outcomes`` under ``key``, whole or not at all (a temporary name, then a rename)."""
    path = _safe_join(root(), key)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".part-", suffix=".npz")
    try:
        with os.fdopen(fd, "wb") as f:
            np.savez(f, **_flatten(outcomes))  # type: ignore[arg-type]  # numpy's stub reads the 2nd as allow_pickle
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def load(key: str) -> dict[str, Any] | None:
    """The outcomes under ``key``; None when there are none (never scored here, or removed)."""
    path = _safe_join(root(), key)
    try:
        with np.load(path, allow_pickle=False) as data:
            return _unflatten({name: _widen(data[name]) for name in data.files})
    except FileNotFoundError:
        return None
