"""Where the worker finds predictions and labels from the keys it is given.

Keys are relative paths. Uploads live under ``EVAL_UPLOADS_DIR`` (local
storage) or in the S3 bucket ``EVAL_S3_BUCKET`` (any S3-compatible store,
``EVAL_S3_ENDPOINT_URL``, the same keys the site wrote); labels always live under ``EVAL_LABELS_DIR``, a
folder only workers read.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path, PurePosixPath


def _safe_join(root: Path, key: str) -> Path:
    rel = PurePosixPath(key)
    if rel.is_absolute() or ".." in rel.parts or not rel.parts:
        raise ValueError(f"Expected a relative storage key without '..', but got {key!r}")
    return root.joinpath(*rel.parts)


def labels_path(key: str) -> Path:
    root = Path(os.environ.get("EVAL_LABELS_DIR", "data/labels"))
    return _safe_join(root, key)


@contextlib.contextmanager
def fetched_predictions(key: str) -> Iterator[Path]:
    """A local path holding the predictions under ``key`` for the duration of the block."""
    bucket = os.environ.get("EVAL_S3_BUCKET")
    if not bucket:
        yield _safe_join(Path(os.environ.get("EVAL_UPLOADS_DIR", "data/uploads")), key)
        return
    import boto3  # only S3-backed workers need it loaded
    from botocore.config import Config

    # Credentials: EVAL_S3_ACCESS_KEY_ID/EVAL_S3_SECRET_ACCESS_KEY, else boto3's own
    # chain (AWS_* variables, instance roles). Read-only access to the bucket is enough.
    client = boto3.client(
        "s3", endpoint_url=os.environ.get("EVAL_S3_ENDPOINT_URL") or None,
        region_name=os.environ.get("EVAL_S3_REGION") or None,
        aws_access_key_id=os.environ.get("EVAL_S3_ACCESS_KEY_ID") or None,
        aws_secret_access_key=os.environ.get("EVAL_S3_SECRET_ACCESS_KEY") or None,
        config=Config(signature_version="s3v4",
                      s3={"addressing_style": os.environ.get("EVAL_S3_ADDRESSING_STYLE", "path")}))
    with tempfile.TemporaryDirectory(prefix="eval-") as tmp:
        path = Path(tmp) / PurePosixPath(key).name
        client.download_file(bucket, key, str(path))
        yield path
