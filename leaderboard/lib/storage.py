"""Where uploaded predictions are kept: files under ``UPLOADS_DIR`` or an S3-compatible bucket.

``STORAGE_BACKEND`` picks one. Keys are relative paths (``<team>/<id>/<name>``)
and are the same in both: the bucket's object key, or the path under
``UPLOADS_DIR``; scoring workers read the same keys (``evaluation_workers.storage``).
Neither place is ever served by the web server.

Large files arrive in numbered parts. On S3 the client PUTs each part to a
presigned ``UploadPart`` URL, so the bytes never pass through the site; on
local storage the parts are PUT to the site itself (``write_part``) and kept
under ``UPLOADS_DIR/.multipart/<upload id>/`` until ``complete_multipart``
joins them. Either way ``list_parts`` says what has arrived, which is what
resuming an interrupted upload needs.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import shutil
import tempfile
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import IO, Any

from django.conf import settings

from leaderboard.lib.files import make_dirs, open_private

_CHUNK = 1 << 20
_MULTIPART_DIR = ".multipart"


class TooLarge(ValueError):
    """More bytes arrived than allowed; nothing was kept."""


class StorageError(OSError):
    """The store could not be written or read (disk, permissions, an S3 error); nothing was kept."""


def _s3_errors() -> tuple[type[BaseException], ...]:
    from botocore.exceptions import BotoCoreError, ClientError

    return (BotoCoreError, ClientError)


@dataclass(frozen=True)
class Part:
    number: int
    size: int
    etag: str  # md5 of the part's bytes, quoted, as S3 reports it


def is_s3() -> bool:
    return settings.STORAGE_BACKEND == "s3"


def read_chunks(f: IO[bytes]) -> Iterable[bytes]:
    while chunk := f.read(_CHUNK):
        yield chunk


def _safe_key(key: str) -> PurePosixPath:
    rel = PurePosixPath(key)
    if rel.is_absolute() or ".." in rel.parts or not rel.parts or rel.parts[0].startswith("."):
        raise ValueError(f"Expected a relative storage key, but got {key!r}")
    return rel


def path_for(key: str) -> Path:
    """The local file of ``key`` (local backend only)."""
    return Path(settings.UPLOADS_DIR).joinpath(*_safe_key(key).parts)


def _write_limited(chunks: Iterable[bytes], out: IO[bytes], max_bytes: int, *digests: Any) -> int:
    size = 0
    for chunk in chunks:
        size += len(chunk)
        if size > max_bytes:
            raise TooLarge(f"larger than {max_bytes} bytes")
        for digest in digests:
            digest.update(chunk)
        out.write(chunk)
    return size


# The S3 client is built once per configuration (tests switch configurations).
@functools.lru_cache(maxsize=4)
def _client(endpoint_url: str, region: str, access_key: str, secret_key: str) -> Any:
    import boto3
    from botocore.config import Config

    return boto3.client(
        "s3", endpoint_url=endpoint_url or None, region_name=region or None,
        aws_access_key_id=access_key or None, aws_secret_access_key=secret_key or None,
        config=Config(signature_version="s3v4", s3={"addressing_style": settings.S3_ADDRESSING_STYLE},
                      retries={"max_attempts": 3, "mode": "standard"}))


def s3_client(public: bool = False) -> Any:
    """The site's S3 client; ``public`` signs URLs for the endpoint clients reach."""
    endpoint = (settings.S3_PUBLIC_ENDPOINT_URL if public else "") or settings.S3_ENDPOINT_URL
    return _client(endpoint, settings.S3_REGION, settings.S3_ACCESS_KEY_ID, settings.S3_SECRET_ACCESS_KEY)


def store(chunks: Iterable[bytes], key: str, max_bytes: int) -> tuple[int, str]:
    """Write ``chunks`` under ``key``; return (size, sha256).

    Stops and raises ``TooLarge`` as soon as more than ``max_bytes`` arrive, so
    an oversized upload never fills the disk. Written to a temporary name first,
    so a broken upload never leaves a partial file under the key. A failure of
    the store (or of the upload stream) raises ``StorageError``.
    """
    try:
        return _store(chunks, key, max_bytes)
    except TooLarge:
        raise
    except (OSError, *_s3_errors()) as exc:
        raise StorageError(f"could not store {key}: {exc}") from exc


def _store(chunks: Iterable[bytes], key: str, max_bytes: int) -> tuple[int, str]:
    if is_s3():
        with tempfile.TemporaryFile(prefix="upload-") as spool:
            digest = hashlib.sha256()
            size = _write_limited(chunks, spool, max_bytes, digest)
            spool.seek(0)
            s3_client().upload_fileobj(spool, settings.S3_BUCKET, key)
        return size, digest.hexdigest()
    path = path_for(key)
    make_dirs(Path(settings.UPLOADS_DIR), path.parent)
    partial = path.with_name(path.name + ".partial")
    digest = hashlib.sha256()
    try:
        with open_private(partial) as out:
            size = _write_limited(chunks, out, max_bytes, digest)
        os.replace(partial, path)
    finally:
        partial.unlink(missing_ok=True)
    return size, digest.hexdigest()


@contextlib.contextmanager
def local_copy(key: str) -> Iterator[Path]:
    """A local path holding ``key`` for the duration of the block (downloaded from S3)."""
    if not is_s3():
        yield path_for(key)
        return
    with tempfile.TemporaryDirectory(prefix="upload-") as tmp:
        path = Path(tmp) / PurePosixPath(key).name
        s3_client().download_file(settings.S3_BUCKET, key, str(path))
        yield path


def delete(key: str) -> None:
    if is_s3():
        s3_client().delete_object(Bucket=settings.S3_BUCKET, Key=key)
    else:
        path_for(key).unlink(missing_ok=True)


def sha256_of(key: str) -> str:
    digest = hashlib.sha256()
    with local_copy(key) as path, open(path, "rb") as f:
        for chunk in read_chunks(f):
            digest.update(chunk)
    return digest.hexdigest()


# Multipart uploads.


def _parts_dir(upload_id: str) -> Path:
    if not upload_id or not all(c.isalnum() for c in upload_id):
        raise ValueError(f"Unexpected upload id {upload_id!r}")
    return Path(settings.UPLOADS_DIR) / _MULTIPART_DIR / upload_id


def start_multipart(key: str) -> str:
    """Open a multipart upload for ``key``; returns its upload id."""
    _safe_key(key)
    if is_s3():
        return str(s3_client().create_multipart_upload(Bucket=settings.S3_BUCKET, Key=key)["UploadId"])
    upload_id = uuid.uuid4().hex
    make_dirs(Path(settings.UPLOADS_DIR), _parts_dir(upload_id))
    return upload_id


def presigned_part_url(key: str, upload_id: str, number: int, expires: int) -> str:
    """A URL that accepts ``PUT`` of part ``number`` for ``expires`` seconds (S3 only)."""
    return str(s3_client(public=True).generate_presigned_url(
        "upload_part", Params={"Bucket": settings.S3_BUCKET, "Key": key, "UploadId": upload_id,
                               "PartNumber": number}, ExpiresIn=expires, HttpMethod="PUT"))


def write_part(upload_id: str, number: int, chunks: Iterable[bytes], max_bytes: int) -> Part:
    """Store part ``number`` of a local upload (replacing an earlier try of it)."""
    folder = _parts_dir(upload_id)
    if not folder.is_dir():
        raise FileNotFoundError(upload_id)
    final = folder / f"{number:05d}"
    partial = folder / f"{number:05d}.partial"
    md5 = hashlib.md5(usedforsecurity=False)
    try:
        with open_private(partial) as out:
            size = _write_limited(chunks, out, max_bytes, md5)
        os.replace(partial, final)
    finally:
        partial.unlink(missing_ok=True)
    return Part(number, size, f'"{md5.hexdigest()}"')


def _md5_file(path: Path) -> str:
    md5 = hashlib.md5(usedforsecurity=False)
    with open(path, "rb") as f:
        for chunk in read_chunks(f):
            md5.update(chunk)
    return f'"{md5.hexdigest()}"'


def list_parts(key: str, upload_id: str) -> list[Part]:
    """The parts that have arrived, by number."""
    if is_s3():
        client, parts, marker = s3_client(), [], 0
        while True:
            page = client.list_parts(Bucket=settings.S3_BUCKET, Key=key, UploadId=upload_id,
                                     PartNumberMarker=marker)
            parts += [Part(p["PartNumber"], p["Size"], p["ETag"]) for p in page.get("Parts", [])]
            if not page.get("IsTruncated"):
                return parts
            marker = page["NextPartNumberMarker"]
    folder = _parts_dir(upload_id)
    if not folder.is_dir():
        return []
    # The md5 is computed on demand: parts are small next to the time a resume saves.
    return [Part(int(p.name), p.stat().st_size, _md5_file(p))
            for p in sorted(folder.iterdir()) if p.name.isdigit()]


def complete_multipart(key: str, upload_id: str, parts: list[Part], max_bytes: int) -> tuple[int, str]:
    """Join ``parts`` into ``key``; returns (size, sha256), the sha256 empty on S3.

    On S3 the bytes are joined by the store and never pass through the site, so
    the worker computes the checksum when it scores (the result records it).
    """
    if is_s3():
        client = s3_client()
        client.complete_multipart_upload(
            Bucket=settings.S3_BUCKET, Key=key, UploadId=upload_id,
            MultipartUpload={"Parts": [{"PartNumber": p.number, "ETag": p.etag} for p in parts]})
        size = int(client.head_object(Bucket=settings.S3_BUCKET, Key=key)["ContentLength"])
        if size > max_bytes:
            delete(key)
            raise TooLarge(f"larger than {max_bytes} bytes")
        return size, ""
    folder = _parts_dir(upload_id)

    def chunks() -> Iterator[bytes]:
        for part in parts:
            with open(folder / f"{part.number:05d}", "rb") as f:
                yield from read_chunks(f)

    size, sha = store(chunks(), key, max_bytes)
    shutil.rmtree(folder, ignore_errors=True)
    return size, sha


def abort_multipart(key: str, upload_id: str) -> None:
    """Drop an unfinished upload and every part of it (no error if already gone)."""
    if is_s3():
        from botocore.exceptions import ClientError

        try:
            s3_client().abort_multipart_upload(Bucket=settings.S3_BUCKET, Key=key, UploadId=upload_id)
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") not in {"NoSuchUpload", "404"}:
                raise
        return
    shutil.rmtree(_parts_dir(upload_id), ignore_errors=True)
