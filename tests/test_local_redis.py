"""The local Redis (deploy/local_redis.py) on a disk that fills up: it stays up, refuses writes, and takes
them again by itself once there is space (issue 26). Needs root to mount a small tmpfs; skipped otherwise."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from tests.conftest import ROOT, fill, small_tmpfs, stop

sys.path.insert(0, str(ROOT / "deploy"))
import local_redis  # noqa: E402


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    yield from small_tmpfs(tmp_path / "disk", "8m")


def test_a_full_disk_refuses_writes_without_stopping_redis_which_takes_them_again_once_space_is_back(small_disk):
    proc, url = local_redis.start(small_disk / "redis", persistent=True)
    try:
        client = redis.Redis.from_url(url, socket_timeout=5)
        client.rpush("queue", "before")
        filler = fill(small_disk)
        with pytest.raises(redis.exceptions.ResponseError, match="^MISCONF"):
            for _ in range(200):  # the first writes may still fit in the last free block
                client.rpush("queue", "x" * 1000)
        assert proc.poll() is None, "Redis exited on a full disk"
        assert client.lindex("queue", 0) == b"before"  # reads go on
        filler.unlink()
        deadline = time.monotonic() + 10
        while True:
            try:
                client.rpush("queue", "after")
                break
            except redis.exceptions.ResponseError:
                assert time.monotonic() < deadline, "Redis did not take writes again once there was space"
                time.sleep(0.2)
        written = client.llen("queue")
    finally:
        stop(proc)
    proc, url = local_redis.start(small_disk / "redis", persistent=True, port=int(url.rsplit(":", 1)[1].split("/")[0]))
    try:  # what it acknowledged survived the restart
        client = redis.Redis.from_url(url)
        assert client.llen("queue") == written and client.lindex("queue", -1) == b"after"
    finally:
        stop(proc)
