"""Per-unit outcomes of scored submissions, kept where only scoring workers read them.

A paired significance test needs, for both submissions, each unit's outcome
(a question right or wrong, a prompt's TP flags, a scene's PR-curve entries):
per-unit correctness on a hidden split, which must never reach the site. The
scoring task writes them after scoring (``save``); the paired-test task and the
deferred intervals read them back (``load``), on whichever worker host takes
the request. Keys come from ``contracts.outcomes_key`` (track, labels checksum,
predictions checksum, scorer version), so a re-score with the same scorer
overwrites the same object.

Where (``where``):

- **a bucket**, with ``EVAL_OUTCOMES_S3_BUCKET``: objects
  ``<EVAL_OUTCOMES_S3_PREFIX><key>`` in the same S3-compatible store as the
  labels. Endpoint, region and keys are ``EVAL_OUTCOMES_S3_*``, each defaulting
  to the labels' ``EVAL_LABELS_S3_*``, then to the uploads' ``EVAL_S3_*``. The
  workers' keys read, write, list and delete there; the site holds none. Every
  worker host shares it: set it wherever more than one host scores.
- **a folder**, without it: ``EVAL_OUTCOMES_DIR``, default ``outcomes`` in the
  worker's cache folder (``EVAL_CACHE_DIR``, ``~/.cache/lb-eval``), never the
  current folder. Only the host that scored a result finds its outcomes there.

Retention: the site tells workers which keys are still wanted
(``contracts.PRUNE_OUTCOMES``, ``leaderboard/submissions/retention.py``), and
``prune`` deletes the others that are older than the site's list.

Errors: a store that cannot be read or written raises ``StoreError`` (logged
with the detail; its text names no key or value); outcomes that are not there
are ``None``. The callers tell the two apart: a missing object is final, a
store error is worth trying again.

Format: one ``.npz`` (no pickle) per result; a nested ``{aspect: {name: array}}``
is stored under ``"<aspect>/<name>"``. Integer arrays are stored in the
narrowest integer type that holds them and read back as int64 (MMScan's full
test split pools tens of millions of boxes: prompt ids fit int32, categories int8);
float64 arrays whose every value is a float32 (the scores of MMScan's binary
form) are stored as float32 and read back as float64, the same values.
"""

from __future__ import annotations

import logging
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from evaluation_workers.parsed_cache import user_cache_dir
from evaluation_workers.storage import checked_key, s3_client, safe_join

log = logging.getLogger(__name__)


class StoreError(Exception):
    """The outcomes store could not be read or written (the detail is in the log)."""


def bucket() -> str:
    return os.environ.get("EVAL_OUTCOMES_S3_BUCKET", "")


def _prefix() -> str:
    return os.environ.get("EVAL_OUTCOMES_S3_PREFIX", "")


def root() -> Path:
    """The folder of the single-host store (absolute: a worker's current folder is nobody's store)."""
    return Path(os.environ.get("EVAL_OUTCOMES_DIR") or user_cache_dir("outcomes")).expanduser().absolute()


def where() -> str:
    """The store, in words for logs and the worker's announcement."""
    return f"s3://{bucket()}/{_prefix()}" if bucket() else str(root())


def _client() -> Any:
    return s3_client("outcomes", "labels")


def _s3_errors() -> tuple[type[BaseException], ...]:
    from boto3.exceptions import Boto3Error  # upload_file's S3UploadFailedError is one, not a ClientError
    from botocore.exceptions import BotoCoreError, ClientError

    return (Boto3Error, BotoCoreError, ClientError, OSError)


def _missing(exc: BaseException) -> bool:
    error = getattr(exc, "response", {}).get("Error", {})
    return str(error.get("Code")) in {"404", "NoSuchKey", "NotFound"}


def _narrow(value: Any) -> np.ndarray:
    array: np.ndarray = np.asarray(value)
    if array.dtype == np.float64 and array.size:
        single = array.astype(np.float32)
        # Lossless only: every value comes back the same (NaN as NaN).
        return single if np.array_equal(single.astype(np.float64), array, equal_nan=True) else array
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
    if array.dtype == np.float32:
        return array.astype(np.float64)
    return array.astype(np.int64) if array.dtype.kind in "iu" else array


def _write(path: Path, outcomes: dict[str, Any]) -> None:
    """``outcomes`` as one .npz at ``path``, whole or not at all (a temporary name, then a rename)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".part-", suffix=".npz")
    try:
        with os.fdopen(fd, "wb") as f:
            np.savez(f, **_flatten(outcomes))  # type: ignore[arg-type]  # numpy's stub reads the 2nd as allow_pickle
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _read(path: Path) -> dict[str, Any]:
    with np.load(path, allow_pickle=False) as data:
        return _unflatten({name: _widen(data[name]) for name in data.files})


def save(key: str, outcomes: dict[str, Any]) -> None:
    """Keep ``outcomes`` under ``key`` (an object appears whole or not at all); ``StoreError`` if the store fails."""
    checked_key(key)
    if not bucket():
        try:
            _write(safe_join(root(), key), outcomes)
        except OSError as exc:
            log.error("Could not keep the outcomes %s in %s: %s", key, root(), exc)
            raise StoreError("the outcomes store could not be written") from None
        return
    with tempfile.TemporaryDirectory(prefix="outcomes-") as tmp:
        path = Path(tmp) / "outcomes.npz"
        try:
            _write(path, outcomes)
            _client().upload_file(str(path), bucket(), _prefix() + key)
        except _s3_errors() as exc:
            log.error("Could not keep the outcomes %s in %s: %s", key, where(), exc)
            raise StoreError("the outcomes store could not be written") from None


def load(key: str) -> dict[str, Any] | None:
    """The outcomes under ``key``; None when there are none (never kept, or removed); ``StoreError``
    when the store cannot be read."""
    checked_key(key)
    if not bucket():
        try:
            return _read(safe_join(root(), key))
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:  # a truncated or unreadable file
            log.error("Could not read the outcomes %s in %s: %s", key, root(), exc)
            raise StoreError("the outcomes store could not be read") from None
    with tempfile.TemporaryDirectory(prefix="outcomes-") as tmp:
        path = Path(tmp) / "outcomes.npz"
        try:
            _client().download_file(bucket(), _prefix() + key, str(path))
            return _read(path)
        except _s3_errors() as exc:
            if _missing(exc):
                return None
            log.error("Could not read the outcomes %s in %s: %s", key, where(), exc)
            raise StoreError("the outcomes store could not be read") from None
        except ValueError as exc:
            log.error("Could not read the outcomes %s in %s: %s", key, where(), exc)
            raise StoreError("the outcomes store could not be read") from None


def prune(folder: str, keep: set[str], before: float) -> int:
    """Delete every outcome under ``folder`` (a track's, ``"<track>/"``) whose key is not in ``keep``
    and that was last written before ``before`` (seconds since the epoch); returns how many.

    ``before`` is when the site listed ``keep``: outcomes written since (a result the site had not
    recorded yet) are never deleted, whatever the list says. ``StoreError`` if the store fails.
    """
    checked_key(folder)
    folder = folder.rstrip("/") + "/"
    doomed: list[str] = []
    if not bucket():
        base = safe_join(root(), folder)
        try:
            for path in base.rglob("*.npz"):
                key = path.relative_to(root()).as_posix()
                if key not in keep and not path.name.startswith(".") and path.stat().st_mtime < before:
                    path.unlink(missing_ok=True)
                    doomed.append(key)
        except OSError as exc:
            log.error("Could not prune the outcomes under %s in %s: %s", folder, root(), exc)
            raise StoreError("the outcomes store could not be pruned") from None
    else:
        client, prefix = _client(), _prefix()
        try:
            pages = client.get_paginator("list_objects_v2").paginate(Bucket=bucket(), Prefix=prefix + folder)
            for page in pages:
                for item in page.get("Contents", []):
                    key = item["Key"][len(prefix):]
                    if key not in keep and item["LastModified"].timestamp() < before:
                        doomed.append(key)
            for start in range(0, len(doomed), 1000):  # DeleteObjects takes at most 1,000 keys
                batch = [{"Key": prefix + key} for key in doomed[start:start + 1000]]
                client.delete_objects(Bucket=bucket(), Delete={"Objects": batch, "Quiet": True})
        except _s3_errors() as exc:
            log.error("Could not prune the outcomes under %s in %s: %s", folder, where(), exc)
            raise StoreError("the outcomes store could not be pruned") from None
    if doomed:
        log.info("Pruned %d outcomes under %s in %s (kept %d wanted; listed at %s)", len(doomed), folder, where(),
                 len(keep), time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(before)))
    return len(doomed)
