"""Where the worker finds predictions and labels from the keys it is given.

Keys are relative paths. Uploads live under ``EVAL_UPLOADS_DIR`` (local
storage) or in the S3 bucket ``EVAL_S3_BUCKET`` (any S3-compatible store,
``EVAL_S3_ENDPOINT_URL``, the same keys the site wrote); labels always live under ``EVAL_LABELS_DIR``, a
folder only workers read.
"""

from __future__ import annotations

import contextlib
import logging
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path, PurePosixPath

from evaluation_workers.errors import PlatformError

log = logging.getLogger(__name__)


def _safe_join(root: Path, key: str) -> Path:
    rel = PurePosixPath(key)
    if rel.is_absolute() or ".." in rel.parts or not rel.parts:
        raise ValueError(f"Expected a relative storage key without '..', but got {key!r}")
    return root.joinpath(*rel.parts)


def labels_path(key: str) -> Path:
    root = Path(os.environ.get("EVAL_LABELS_DIR", "data/labels"))
    return _safe_join(root, key)


UNREADABLE = ("The uploaded file could not be read from storage (a fault of the service, not of your "
              "file). It does not count against your quota; the maintainers have been told.")


def _readable(path: Path) -> Path:
    """``path`` if it is a regular file we can open; ``PlatformError`` (no path shown) otherwise."""
    try:
        with open(path, "rb") as f:
            f.read(1)
        if not path.is_file():
            raise IsADirectoryError(str(path))
    except OSError as exc:
        log.error("Predictions unreadable at %s: %s", path, exc)
        raise PlatformError(UNREADABLE) from None
    return path


@contextlib.contextmanager
def fetched_predictions(key: str) -> Iterator[Path]:
    """A local path holding the predictions under ``key`` for the duration of the block.

    A missing or unreadable file, or a store that fails, raises ``PlatformError``:
    the submitter's file is never blamed for the store.
    """
    bucket = os.environ.get("EVAL_S3_BUCKET")
    if not bucket:
        yield _readable(_safe_join(Path(os.environ.get("EVAL_UPLOADS_DIR", "data/uploads")), key))
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
    from botocore.exceptions import BotoCoreError, ClientError

    with tempfile.TemporaryDirectory(prefix="eval-") as tmp:
        path = Path(tmp) / PurePosixPath(key).name
        try:
            client.download_file(bucket, key, str(path))
        except (BotoCoreError, ClientError, OSError) as exc:
            log.error("Could not fetch predictions %s from bucket %s: %s", key, bucket, exc)
            raise PlatformError(UNREADABLE) from None
        yield _readable(path)
