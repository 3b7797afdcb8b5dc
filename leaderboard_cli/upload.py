"""Uploads: small files in one request, large ones in parts that survive interruptions.

A large file is announced (``POST /uploads``), then each part is PUT to the URL
the server hands out: presigned by the object store, or signed by the site
with local storage; no token is sent along with a part. The upload's id is
remembered in ``uploads.json`` next to the config file, keyed by the file
(path, size, mtime) and the submission's target, so that running the same
``lb submit`` again after an interruption asks the server which parts arrived
(``GET /uploads/<id>``), compares their md5 with the local bytes, and sends
only the rest.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import requests
from tqdm import tqdm

from leaderboard_cli import config
from leaderboard_cli.client import ApiError, Client, error_message

URL_BATCH = 16
PART_ATTEMPTS = 4
_READ = 1 << 20


class _PartReader:
    """File-like view of one part that reports progress; ``len`` lets requests send Content-Length."""

    def __init__(self, path: Path, offset: int, size: int, progress: Callable[[int], Any]) -> None:
        self.f = open(path, "rb")
        self.f.seek(offset)
        self.left = size
        self.size = size
        self.progress = progress

    def __len__(self) -> int:
        return self.size

    def read(self, n: int = -1) -> bytes:
        n = self.left if n is None or n < 0 else min(n, self.left, _READ)
        data = self.f.read(n)
        self.left -= len(data)
        self.progress(len(data))
        return data

    def close(self) -> None:
        self.f.close()


def _md5(path: Path, offset: int, size: int) -> str:
    md5 = hashlib.md5(usedforsecurity=False)
    with open(path, "rb") as f:
        f.seek(offset)
        while size > 0:
            chunk = f.read(min(_READ, size))
            if not chunk:
                break
            md5.update(chunk)
            size -= len(chunk)
    return f'"{md5.hexdigest()}"'


def _state_file() -> Path:
    return config.state_dir() / "uploads.json"


def _state_key(client: Client, path: Path, target: dict[str, Any]) -> str:
    stat = path.stat()
    fields = [client.server, str(path.resolve()), str(stat.st_size), str(stat.st_mtime_ns),
              *(str(target.get(k) or "") for k in ("track", "split", "method_name", "team"))]
    return "|".join(fields)


def _remember(key: str, upload_id: int | None) -> None:
    state = config.read_json(_state_file())
    if upload_id is None:
        state.pop(key, None)
    else:
        state[key] = upload_id
    config.write_json(_state_file(), state)


def _put_part(url: str, path: Path, offset: int, size: int, bar: tqdm) -> None:
    for attempt in range(1, PART_ATTEMPTS + 1):
        sent = 0

        def step(n: int) -> None:
            nonlocal sent
            sent += n
            bar.update(n)

        reader = _PartReader(path, offset, size, step)
        try:
            # A plain request: the API token must never travel to the object store.
            response = requests.put(url, data=reader, timeout=600)
            if response.status_code < 300:
                return
            try:
                detail = error_message(response.json())
            except ValueError:  # the object store answers in XML
                detail = None
            problem = f"HTTP {response.status_code}: {detail or response.text[:300]}"
            if response.status_code in (400, 403, 404):
                raise ApiError(f"The store refused a part ({problem}); run the same command again to resume "
                               f"with fresh URLs.", response.status_code)
        except requests.RequestException as exc:
            problem = str(exc)
        finally:
            reader.close()
        bar.update(-sent)
        if attempt == PART_ATTEMPTS:
            raise ApiError(f"Uploading a part failed {PART_ATTEMPTS} times ({problem}); run the same command "
                           f"again to resume.")
        time.sleep(min(2 ** attempt, 10))


def upload_in_parts(client: Client, path: Path, target: dict[str, Any], *, resume: bool = True,
                    quiet: bool = False, stop_after_parts: int | None = None) -> dict[str, Any]:
    """Upload ``path`` in parts and complete it; returns the submission (JSON of the API).

    ``stop_after_parts`` interrupts the upload after that many parts (tests of resuming).
    """
    size = path.stat().st_size
    key = _state_key(client, path, target)
    upload, done = None, {}
    upload_id = config.read_json(_state_file()).get(key) if resume else None
    if upload_id:
        try:
            upload = client.get(f"uploads/{upload_id}")
        except ApiError:
            upload = None
        if upload and upload["status"] == "open":
            for part in upload.get("parts", []):
                offset = (part["part_number"] - 1) * upload["part_size"]
                if _md5(path, offset, part["size"]) == part["etag"]:
                    done[part["part_number"]] = part["size"]
            if not quiet:
                print(f"Resuming upload of #{upload['id']}: {len(done)} of {upload['part_count']} parts there.")
        else:
            upload = None
    if upload is None:
        upload = client.post("uploads", json={**target, "file_name": path.name, "size": size})
        _remember(key, upload["id"])
    todo = [n for n in range(1, upload["part_count"] + 1) if n not in done]
    with tqdm(total=size, initial=sum(done.values()), unit="B", unit_scale=True, unit_divisor=1024,
              desc=f"Uploading {path.name}", disable=quiet, dynamic_ncols=True) as bar:
        sent = 0
        for first in range(0, len(todo), URL_BATCH):
            batch = todo[first:first + URL_BATCH]
            urls = client.post(f"uploads/{upload['id']}/urls", json={"parts": batch})["urls"]
            for item in urls:
                if stop_after_parts is not None and sent >= stop_after_parts:
                    raise KeyboardInterrupt
                number = item["part_number"]
                offset = (number - 1) * upload["part_size"]
                _put_part(item["url"], path, offset, min(upload["part_size"], size - offset), bar)
                sent += 1
    submission = _submission(client.post(f"uploads/{upload['id']}/complete", ok=(200, 400)))
    _remember(key, None)
    return submission


def _submission(body: dict[str, Any]) -> dict[str, Any]:
    """The answer of a submitting request: a submission, also with HTTP 400 when its file failed the
    checks (it has an id and its error); a request the server refused (an unknown split, an expired
    upload: no id) is raised with the server's message."""
    if "id" not in body:
        raise ApiError(error_message(body) or "The server refused the submission.", 400, body)
    return body


def upload_direct(client: Client, path: Path, target: dict[str, Any], *, quiet: bool = False) -> dict[str, Any]:
    """Send a small file in one request (``POST /submissions``)."""
    size = path.stat().st_size
    with tqdm(total=size, unit="B", unit_scale=True, unit_divisor=1024, desc=f"Uploading {path.name}",
              disable=quiet, dynamic_ncols=True) as bar, open(path, "rb") as f:
        data = {k: v for k, v in target.items() if v}
        submission = _submission(client.post("submissions", data=data, files={"file": (path.name, f)}, ok=(201, 400)))
        bar.update(size)
    return submission


def check_file(path: Path) -> None:
    """A predictions file to read: a folder (a codebase's output, unzipped) is told apart from a typo."""
    if path.is_dir():
        raise ApiError(f"{path} is a folder: give the predictions file itself")
    if not path.is_file():
        raise ApiError(f"No such file: {path}")


def submit_file(client: Client, path: Path, target: dict[str, Any], *, resume: bool = True,
                quiet: bool = False) -> dict[str, Any]:
    check_file(path)
    settings = client.get("uploads")
    if os.path.getsize(path) <= settings["direct_max_bytes"]:
        return upload_direct(client, path, target, quiet=quiet)
    return upload_in_parts(client, path, target, resume=resume, quiet=quiet)
