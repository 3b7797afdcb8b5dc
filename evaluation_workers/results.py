"""The result JSON of METRICS.md, and the checksums that make it reproducible."""

from __future__ import annotations

import hashlib
import math
import os
import stat
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from evaluation_workers.mapped import give_back, map_open
from evaluation_workers.threads import side_job

# Files under these names inside a labels folder are derived (caches, the
# public manifest); the checksum covers the official files only, so the same
# labels hash alike offline and on the server.
DERIVED_NAMES = frozenset({".cache", "manifest.json"})
_CHUNK = 1 << 20  # read, where a file cannot be mapped
_SLICE = 1 << 24  # hashed per call (and GIL release) through a mapping


def sha256_file(path: Path, stop: threading.Event | None = None) -> str:
    """The file's sha256 (or the value ``hash_ahead`` is computing for this very file: same path,
    inode, size and modification time).

    A regular file is hashed through a read-only mapping, ``_SLICE`` bytes per
    call, each slice's pages given back once hashed (``mapped.give_back``), so
    that memory does not grow with the file. Beside the scorer's threads a read
    loop was slow: each 1 MiB chunk copied, and the GIL taken again after each
    of them, behind the scoring threads' turns (a 715 MiB stored zip, the
    scoring's longest single job: hashed by 0.89-0.99 s into the run with 1 MiB
    reads, 0.66-0.76 s mapped, 0.42 s alone). Anything else (a pipe) is read.
    ``stop``: when set (the file was refused meanwhile), give up and return "".
    """
    key = _identity(path)
    ahead = _ahead.get(key) if key is not None else None
    if ahead is not None:
        return ahead.value(stop)
    return _read_sha256(path, stop)


def _read_sha256(path: Path, stop: threading.Event | None = None) -> str:
    digest = hashlib.sha256()
    with open(path, "rb", buffering=0) as f:  # opened once: a pipe's data is read only once
        mapped = map_open(f)
        if mapped is not None:
            with side_job(), mapped, memoryview(mapped) as view:  # a core taken (threads.side_job)
                for start in range(0, len(view), _SLICE):
                    if stop is not None and stop.is_set():
                        return ""
                    digest.update(view[start : start + _SLICE])
                    give_back(mapped, start, start + _SLICE)
            return digest.hexdigest()
        buffer = bytearray(_CHUNK)
        with side_job(), memoryview(buffer) as chunk:
            while n := f.readinto(buffer):
                if stop is not None and stop.is_set():
                    return ""
                digest.update(chunk[:n])
    return digest.hexdigest()


class _Ahead:
    """A checksum being computed on a daemon thread (``hash_ahead``)."""

    def __init__(self, path: Path) -> None:
        self.done = threading.Event()
        self.digest = ""
        self.error: OSError | None = None
        threading.Thread(target=self._run, args=(path,), name="sha256-ahead", daemon=True).start()

    def _run(self, path: Path) -> None:
        try:
            self.digest = _read_sha256(path)
        except OSError as exc:
            self.error = exc
        finally:
            self.done.set()

    def value(self, stop: threading.Event | None) -> str:
        while not self.done.wait(0.05):
            if stop is not None and stop.is_set():
                return ""
        if self.error is not None:
            raise self.error
        return self.digest


_ahead: dict[tuple[str, int, int, int, int], _Ahead] = {}


def _identity(path: Path | str) -> tuple[str, int, int, int, int] | None:
    """What names one version of a regular file; None for anything else (missing, a pipe, a folder)."""
    try:
        info = os.stat(path)
    except OSError:
        return None
    if not stat.S_ISREG(info.st_mode):
        return None
    return (os.path.abspath(path), info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns)


def hash_ahead(path: Path | str) -> None:
    """Start computing ``sha256_file(path)`` on a daemon thread now, for the scorer to pick up: the
    command line starts it before its imports (0.1-0.2 s on one core, while the other idles), and
    hashlib releases the GIL. Not a regular file, or none: nothing is started."""
    key = _identity(path)
    if key is not None and key not in _ahead:
        _ahead[key] = _Ahead(Path(path))


def forget_ahead(path: Path | str) -> None:
    """Drop what ``hash_ahead`` computed for ``path``, whichever version of it: a worker hashes file
    after file (kept, they would add up), and a later scoring of the same path must read it again."""
    name = os.path.abspath(path)
    for key in [key for key in _ahead if key[0] == name]:
        del _ahead[key]


def sha256_tree(path: Path) -> str:
    """Checksum of a file, or of a folder's official files.

    A folder hashes as the sha256 of its sorted ``"<sha256>  <relative path>\\n"``
    lines (the ``sha256sum`` listing), skipping derived files.
    """
    path = Path(path)
    if path.is_file():
        return sha256_file(path)
    lines = []
    for p in sorted(path.rglob("*")):
        rel = p.relative_to(path)
        if p.is_file() and not (set(rel.parts) & DERIVED_NAMES):
            lines.append(f"{sha256_file(p)}  {rel.as_posix()}\n")
    return hashlib.sha256("".join(lines).encode()).hexdigest()


def labels_sha256(loaded: Path) -> str:
    """The checksum the site records for labels ``manage.py load_labels`` was given (``loaded``: a file or
    a folder), which every result scored on them carries as ``labels_sha256``: ``sha256_tree`` of what was
    loaded, a folder's derived files (``manifest.json``, anything under ``.cache``: ``DERIVED_NAMES``) left out.

    A track that scores the folder its ``prepare_labels`` wrote gets the same value from that folder when it
    copies a loaded folder's files as they are and adds only derived ones; one that copies a loaded *file*
    into its folder hashes that file. Labels loaded with a public subset are the exception: the site then
    hashes the prepared folder, ``partition.txt`` included, so the track hashes that folder too.
    """
    return sha256_tree(loaded)


def clean_number(value: Any) -> float | None:
    """A metric as JSON allows it: a float, or None where undefined (never NaN)."""
    if value is None:
        return None
    value = float(value)
    return None if math.isnan(value) or math.isinf(value) else value


def _clean(obj: Any) -> Any:
    if isinstance(obj, Mapping):
        return {str(k): _clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_clean(v) for v in obj]
    if isinstance(obj, bool) or obj is None or isinstance(obj, str):
        return obj
    if isinstance(obj, int):
        return obj
    if hasattr(obj, "item"):  # numpy / cupy scalars
        return _clean(obj.item())
    return clean_number(obj)


def interval_notes(record: Mapping[str, Any] | None) -> list[str]:
    """The words for a result's ``warnings`` of what ``bootstrap.intervals`` withheld (its record's ``withheld``)."""
    withheld = (record or {}).get("withheld") or {}
    least = (record or {}).get("min_scenes")
    out = []
    if "" in withheld:
        scored = withheld[""]
        out.append(f"No confidence intervals: {scored} scene{'' if scored == 1 else 's'} scored, and an interval "
                   f"needs at least {least} (the bootstrap resamples scenes).")
    groups = [f"{g} ({k})" for g, k in withheld.items() if g]
    if groups:
        out.append(f"No confidence interval for groups with fewer than {least} scenes: {', '.join(groups)}.")
    return out


def make_result(
    *,
    track: str,
    scorer_version: str,
    labels_sha256: str,
    predictions_sha256: str,
    metrics: Mapping[str, Any],
    breakdown: Mapping[str, Mapping[str, Any]],
    details: Mapping[str, Any] | None = None,
    warnings: Sequence[str] = (),
    uncertainty: tuple[Mapping[str, Any], Mapping[str, Any]] | None = None,
    deferred: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Assemble the result JSON; NaN and inf become null, numpy scalars plain numbers.

    ``uncertainty`` is ``(intervals, bootstrap)`` from ``metrics.bootstrap.intervals``;
    when given the result also holds ``"intervals"`` ({"<metric>" or
    "<group>/<metric>": [lo, hi] or null}) and ``"bootstrap"`` (how they were drawn),
    and ``warnings`` say what had too few scenes for an interval.
    ``deferred`` (``{"resamples", "unit"}``) says instead that a follow-up task
    computes them (``"bootstrap": {"deferred": true, ...}``, no ``"intervals"``).
    """
    result = {
        "track": track,
        "scorer_version": scorer_version,
        "labels_sha256": labels_sha256,
        "predictions_sha256": predictions_sha256,
        "metrics": _clean(metrics),
        "breakdown": _clean(breakdown),
        "details": _clean(details or {}),
        "warnings": list(warnings),
    }
    if uncertainty is not None:
        result["intervals"] = _clean(uncertainty[0])
        result["bootstrap"] = _clean(uncertainty[1])
        result["warnings"] += interval_notes(uncertainty[1])
    elif deferred is not None:
        result["bootstrap"] = {"deferred": True, **_clean(deferred)}
    return result
