"""Uploading hidden labels to object storage (``LABELS_S3_BUCKET``), once, from ``load_labels``.

This module can only write: the site never reads the labels bucket (workers
do, with their own credentials; ``evaluation_workers.labels_cache`` documents
the layout). A version's files go first and its index last, so a worker that
finds an index finds every file it lists.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from django.conf import settings


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def is_enabled() -> bool:
    return bool(settings.LABELS_S3_BUCKET)


def _client():
    from leaderboard.lib.storage import _client as cached_client

    return cached_client(settings.LABELS_S3_ENDPOINT_URL or settings.S3_ENDPOINT_URL,
                         settings.LABELS_S3_REGION or settings.S3_REGION,
                         settings.LABELS_S3_ACCESS_KEY_ID or settings.S3_ACCESS_KEY_ID,
                         settings.LABELS_S3_SECRET_ACCESS_KEY or settings.S3_SECRET_ACCESS_KEY)


def upload_version(folder: Path, key: str) -> int:
    """Upload every file under ``folder`` as ``<prefix><key>/<path>``, then the index; returns the file count."""
    client, bucket, prefix = _client(), settings.LABELS_S3_BUCKET, settings.LABELS_S3_PREFIX
    files = []
    for path in sorted(p for p in Path(folder).rglob("*") if p.is_file()):
        rel = path.relative_to(folder).as_posix()
        stat = path.stat()
        client.upload_file(str(path), bucket, f"{prefix}{key}/{rel}")
        files.append({"path": rel, "size": stat.st_size, "sha256": _sha256(path), "mtime_ns": stat.st_mtime_ns})
    index = json.dumps({"key": key, "files": files}, indent=1).encode()
    client.put_object(Bucket=bucket, Key=f"{prefix}{key}.index.json", Body=index)
    return len(files)
