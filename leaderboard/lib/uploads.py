"""Where uploaded predictions are kept: keys relative to ``UPLOADS_DIR``.

The folder is never served by the web server; the scoring workers read the
same keys under their ``EVAL_UPLOADS_DIR``.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import IO, Iterable

from django.conf import settings

_CHUNK = 1 << 20


def path_for(key: str) -> Path:
    return Path(settings.UPLOADS_DIR) / key


def store(chunks: Iterable[bytes], key: str, max_bytes: int) -> tuple[int, str]:
    """Write ``chunks`` under ``key``; return (size, sha256).

    Stops and raises ``ValueError`` as soon as more than ``max_bytes`` arrive, so
    an oversized upload never fills the disk. Written to a temporary name and
    renamed, so a broken upload never leaves a partial file under the key.
    """
    path = path_for(key)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    digest, size = hashlib.sha256(), 0
    try:
        with open(partial, "wb") as out:
            for chunk in chunks:
                size += len(chunk)
                if size > max_bytes:
                    raise ValueError(f"larger than {max_bytes} bytes")
                digest.update(chunk)
                out.write(chunk)
        os.replace(partial, path)
    finally:
        partial.unlink(missing_ok=True)
    return size, digest.hexdigest()


def read_chunks(f: IO[bytes]) -> Iterable[bytes]:
    while chunk := f.read(_CHUNK):
        yield chunk
