"""Where the worker finds predictions and labels from the keys it is given.

Keys are relative paths. Uploads live under ``EVAL_UPLOADS_DIR`` (local
storage) or in the S3 bucket ``EVAL_S3_BUCKET`` (any S3-compatible store,
``EVAL_S3_ENDPOINT_URL``, the same keys the site wrote); labels live under ``EVAL_LABELS_DIR``, a
folder only workers read, or in a bucket (``labels_cache``); per-unit outcomes in ``outcomes``.
``s3_client`` makes the client of each store from its own ``EVAL_<STORE>_S3_*`` settings.
"""

from __future__ import annotations

import contextlib
import logging
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path, PurePosixPath
from typing import Any

from evaluation_workers.errors import PlatformError

log = logging.getLogger(__name__)


def checked_key(key: str) -> PurePosixPath:
    """``key`` as a relative path; ``ValueError`` for an absolute one, one with ``..``, or an empty one."""
    rel = PurePosixPath(key)
    if rel.is_absolute() or ".." in rel.parts or not rel.parts:
        raise ValueError(f"Expected a relative storage key without '..', but got {key!r}")
    return rel


def safe_join(root: Path, key: str) -> Path:
    return root.joinpath(*checked_key(key).parts)


def labels_path(key: str) -> Path:
    root = Path(os.environ.get("EVAL_LABELS_DIR", "data/labels"))
    return safe_join(root, key)


# Each store's settings, spelled out so that they can be found: endpoint, region, access key, secret.
S3_SETTINGS = {
    "uploads": ("EVAL_S3_ENDPOINT_URL", "EVAL_S3_REGION", "EVAL_S3_ACCESS_KEY_ID", "EVAL_S3_SECRET_ACCESS_KEY"),
    "labels": ("EVAL_LABELS_S3_ENDPOINT_URL", "EVAL_LABELS_S3_REGION", "EVAL_LABELS_S3_ACCESS_KEY_ID",
               "EVAL_LABELS_S3_SECRET_ACCESS_KEY"),
    "outcomes": ("EVAL_OUTCOMES_S3_ENDPOINT_URL", "EVAL_OUTCOMES_S3_REGION", "EVAL_OUTCOMES_S3_ACCESS_KEY_ID",
                 "EVAL_OUTCOMES_S3_SECRET_ACCESS_KEY"),
}


def s3_client(*stores: str) -> Any:
    """A boto3 client for the first of ``stores`` (keys of ``S3_SETTINGS``): each setting is taken from
    the first of them that sets it, then from the uploads' ``EVAL_S3_*``, then from boto3's own chain
    (AWS_* variables, instance roles)."""
    import boto3  # only S3-backed workers need it loaded
    from botocore.config import Config

    lines = [S3_SETTINGS[store] for store in (*stores, "uploads")]

    def setting(i: int) -> str | None:
        return next((os.environ[names[i]] for names in lines if os.environ.get(names[i])), None)

    return boto3.client(
        "s3", endpoint_url=setting(0), region_name=setting(1), aws_access_key_id=setting(2),
        aws_secret_access_key=setting(3),
        config=Config(signature_version="s3v4",
                      s3={"addressing_style": os.environ.get("EVAL_S3_ADDRESSING_STYLE", "path")}))


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
        yield _readable(safe_join(Path(os.environ.get("EVAL_UPLOADS_DIR", "data/uploads")), key))
        return
    client = s3_client()  # read-only access to the bucket is enough
    from botocore.exceptions import BotoCoreError, ClientError

    with tempfile.TemporaryDirectory(prefix="eval-") as tmp:
        path = Path(tmp) / PurePosixPath(key).name
        try:
            client.download_file(bucket, key, str(path))
        except (BotoCoreError, ClientError, OSError) as exc:
            log.error("Could not fetch predictions %s from bucket %s: %s", key, bucket, exc)
            raise PlatformError(UNREADABLE) from None
        yield _readable(path)
