"""Hidden labels on a worker: a local folder, or fetched from a bucket into a cache on first use.

Without ``EVAL_LABELS_S3_BUCKET`` a labels key is a folder under
``EVAL_LABELS_DIR`` (the embedded default, ``storage.labels_path``).

With it, ``load_labels`` on the site has uploaded each version (the prepared
folder, caches such as OpenScan's ``.cache`` included) as
``<EVAL_LABELS_S3_PREFIX><key>/<path>`` and, last, an index
``<prefix><key>.index.json`` listing every file's path, size, sha256 and mtime
(so a version without its index is incomplete and never used). The key ends
in the version's checksum (``<track>/<split>/<sha256>``). A worker fetches a
version into ``EVAL_LABELS_CACHE_DIR/<sha256>`` the first time it needs it:

- into a temporary sibling, each file checked against the index, mtimes set
  as recorded (OpenScan's cache checks them), then the whole folder checked
  with ``results.sha256_tree`` against the checksum in the key, and renamed
  into place, so no process ever reads a half-fetched version;
- under ``<sha256>.lock`` (``flock``): one process on the host fetches, the
  others wait for it; a process scoring holds the lock shared, so eviction
  never removes a version in use;
- least recently used versions (the lock file's mtime) are removed once the
  cache holds more than ``EVAL_LABELS_CACHE_MAX_BYTES`` (default 50 GiB); the
  version just used always stays.

Credentials: ``EVAL_LABELS_S3_ACCESS_KEY_ID``/``..._SECRET_ACCESS_KEY`` (read
access to the labels bucket or prefix; only workers hold them), endpoint and
region ``EVAL_LABELS_S3_ENDPOINT_URL``/``EVAL_LABELS_S3_REGION``, each
defaulting to the uploads' ``EVAL_S3_*``.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path, PurePosixPath
from typing import IO, Any

from evaluation_workers.errors import PlatformError
from evaluation_workers.results import sha256_file, sha256_tree
from evaluation_workers.storage import labels_path, s3_client

log = logging.getLogger(__name__)

DEFAULT_MAX_BYTES = 50 * 2**30
_SHA = re.compile(r"[0-9a-f]{64}")
UNAVAILABLE = ("The hidden labels of this split could not be fetched (a fault of the service, not of your "
               "file). It does not count against your quota; the maintainers have been told.")


def _client() -> Any:
    return s3_client("labels")


def cache_dir() -> Path:
    return Path(os.environ.get("EVAL_LABELS_CACHE_DIR") or "data/labels-cache")


@contextlib.contextmanager
def labels_for(key: str) -> Iterator[Path]:
    """The labels folder of ``key`` for the duration of the block (fetched first if need be)."""
    bucket = os.environ.get("EVAL_LABELS_S3_BUCKET")
    if not bucket:
        yield labels_path(key)
        return
    sha = PurePosixPath(key).name
    if not _SHA.fullmatch(sha):
        raise ValueError(f"Expected a labels key ending in a sha256, but got {key!r}")
    root = cache_dir()
    root.mkdir(parents=True, exist_ok=True)
    entry = root / sha
    with open(root / f"{sha}.lock", "a+") as lock:
        while True:
            fcntl.flock(lock, fcntl.LOCK_SH)
            if entry.is_dir():
                break
            # Not here yet: take the lock alone, and fetch unless another process just did.
            fcntl.flock(lock, fcntl.LOCK_UN)
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not entry.is_dir():
                fetch(bucket, key, entry)
            fcntl.flock(lock, fcntl.LOCK_UN)
        os.utime(lock.fileno())  # the least recently used go first
        try:
            evict(root, _max_bytes())
            yield entry
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _max_bytes() -> int:
    return int(os.environ.get("EVAL_LABELS_CACHE_MAX_BYTES") or DEFAULT_MAX_BYTES)


def fetch(bucket: str, key: str, entry: Path) -> None:
    """Download version ``key`` into ``entry`` (which must not exist), verified; ``PlatformError`` if not."""
    from botocore.exceptions import BotoCoreError, ClientError

    prefix = os.environ.get("EVAL_LABELS_S3_PREFIX", "")
    staging = entry.with_name(f".fetching-{entry.name}-{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    client = _client()
    try:
        index = json.loads(client.get_object(Bucket=bucket, Key=f"{prefix}{key}.index.json")["Body"].read())
        size = 0
        for item in index["files"]:
            rel = PurePosixPath(item["path"])
            if rel.is_absolute() or ".." in rel.parts or not rel.parts:
                raise ValueError(f"unexpected path {item['path']!r} in the index")
            path = staging.joinpath(*rel.parts)
            path.parent.mkdir(parents=True, exist_ok=True)
            client.download_file(bucket, f"{prefix}{key}/{rel.as_posix()}", str(path))
            if path.stat().st_size != item["size"] or sha256_file(path) != item["sha256"]:
                raise ValueError(f"{item['path']} differs from the index")
            os.utime(path, ns=(item["mtime_ns"], item["mtime_ns"]))
            size += item["size"]
        if sha256_tree(staging) != entry.name:
            raise ValueError("the folder's sha256 differs from its version")
        staging.rename(entry)
    except (BotoCoreError, ClientError, OSError, ValueError, KeyError, TypeError) as exc:
        log.error("Could not fetch labels %s from bucket %s: %s", key, bucket, exc)
        shutil.rmtree(staging, ignore_errors=True)
        raise PlatformError(UNAVAILABLE) from None
    log.info("Fetched labels %s from bucket %s (%d files, %d bytes) into %s", key, bucket,
             len(index["files"]), size, entry)


def _tree_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def _try_lock(f: IO[str]) -> bool:
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False


def evict(root: Path, max_bytes: int) -> list[str]:
    """Remove least recently used versions until the cache holds at most ``max_bytes``.

    A version that some process holds (scoring with it, or fetching it, the
    caller's own included) is skipped. Returns the removed versions.
    """
    entries = [p for p in root.iterdir() if p.is_dir() and _SHA.fullmatch(p.name)]
    sizes = {p.name: _tree_bytes(p) for p in entries}
    total = sum(sizes.values())
    removed: list[str] = []
    lock_time = {p.name: (root / f"{p.name}.lock").stat().st_mtime if (root / f"{p.name}.lock").exists() else 0.0
                 for p in entries}
    for sha in sorted(sizes, key=lambda s: lock_time[s]):
        if total <= max_bytes:
            break
        with open(root / f"{sha}.lock", "a+") as lock:
            if not _try_lock(lock):
                continue
            doomed = root / f".evicting-{sha}-{os.getpid()}"
            try:
                (root / sha).rename(doomed)
            except FileNotFoundError:  # another process evicted it first
                continue
            shutil.rmtree(doomed, ignore_errors=True)
        total -= sizes[sha]
        removed.append(sha)
        log.info("Evicted labels %s from the cache (%d bytes; %d bytes left)", sha, sizes[sha], total)
    return removed
