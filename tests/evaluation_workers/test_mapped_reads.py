"""Files read through a read-only mapping (the same bytes and results as read ones), and file checksums."""

from __future__ import annotations

import hashlib
import mmap
import os
import threading
import zipfile
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from evaluation_workers import mapped, results
from evaluation_workers.limits import Budget
from evaluation_workers.tracks.openscan import members, score

GOLDEN = Path(__file__).resolve().parents[1] / "fixtures" / "openscan" / "golden"


def _stored_copy(tmp_path: Path) -> Path:
    stored = tmp_path / "stored.zip"
    with zipfile.ZipFile(GOLDEN / "predictions.zip") as src, zipfile.ZipFile(stored, "w", zipfile.ZIP_STORED) as out:
        for name in src.namelist():
            out.writestr(name, src.read(name))
    return stored


def test_a_stored_zip_is_read_from_its_mapping_without_copies_and_scores_as_a_read_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stored = _stored_copy(tmp_path)
    spilled: list[object] = []
    original = members.Archive.spill

    def spill(self, name, cap, what):  # type: ignore[no-untyped-def]
        spilled.append(got := original(self, name, cap, what))
        return got

    monkeypatch.setattr(members.Archive, "spill", spill)
    from_mapping = score(GOLDEN / "labels", stored)
    # every scene's .npz is a view of the mapped file, not a copy
    assert spilled and all(isinstance(s, memoryview) and s.readonly for s in spilled)

    monkeypatch.setattr(members, "map_file", lambda path: None)
    spilled.clear()
    read = score(GOLDEN / "labels", stored)
    assert spilled and not any(isinstance(getattr(s, "obj", s), mmap.mmap) for s in spilled)  # read
    assert read["metrics"] == from_mapping["metrics"] and read["breakdown"] == from_mapping["breakdown"]
    assert read["predictions_sha256"] == from_mapping["predictions_sha256"] == hashlib.sha256(stored.read_bytes()).hexdigest()


def test_arrays_read_before_their_pages_are_given_back_keep_their_values(tmp_path: Path) -> None:
    path = tmp_path / "arrays.zip"
    want = np.random.default_rng(0).integers(0, 2, (3000, 40), dtype=np.uint8)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as zf:
        with zf.open("a.npy", "w") as f:
            np.save(f, want)
    archive = members.Archive(path, "arrays.zip", Budget(1 << 30, "arrays.zip"), max_members=4)
    got = archive.npy("a.npy", "arrays.zip: a", want.size)
    assert not got.flags.writeable  # a view of the mapping
    archive.release("a.npy")
    archive.close()
    assert np.array_equal(got, want)  # its pages are mapped again from the file


def test_files_that_cannot_be_mapped_are_read(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.write_bytes(b"")
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    assert mapped.map_file(empty) is None
    payload = os.urandom(3 << 20)
    writer = threading.Thread(target=lambda: fifo.write_bytes(payload))
    writer.start()
    try:
        assert results.sha256_file(fifo) == hashlib.sha256(payload).hexdigest()
    finally:
        writer.join()


@pytest.mark.parametrize("size", [(1 << 14) + 1, 3 << 15, (3 << 15) + 5, 5 << 20])
def test_the_checksum_is_the_sha256_of_the_file_at_every_chunk_boundary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, size: int
) -> None:
    monkeypatch.setattr(results, "_CHUNK", 1 << 14)  # one reused buffer of 16 KiB (read: a pipe)
    monkeypatch.setattr(results, "_SLICE", 1 << 14)  # 16 KiB per call through the mapping
    path = tmp_path / "file"
    data = os.urandom(size)
    path.write_bytes(data)
    assert results.sha256_file(path) == hashlib.sha256(data).hexdigest()


def test_hashing_a_mapped_file_gives_its_pages_back_as_it_goes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Resident memory does not grow with the file hashed: its pages are given back behind the hash
    (measured after each slice, while the mapping is open)."""
    statm = Path("/proc/self/statm")
    if not statm.exists():
        pytest.skip("needs /proc/self/statm (Linux)")

    def resident_mib() -> int:
        return int(statm.read_text().split()[1]) * mmap.PAGESIZE >> 20

    class Watched:
        def __init__(self) -> None:
            self.digest, self.peak = hashlib.sha256(), 0

        def update(self, data: memoryview) -> None:
            self.digest.update(data)
            self.peak = max(self.peak, resident_mib())

        def hexdigest(self) -> str:
            return self.digest.hexdigest()

    path = tmp_path / "big"
    data = os.urandom(1 << 20) * 96  # 96 MiB
    path.write_bytes(data)
    watched = Watched()
    monkeypatch.setattr(results, "_SLICE", 1 << 20)
    monkeypatch.setattr(results, "hashlib", SimpleNamespace(sha256=lambda: watched))
    before = resident_mib()
    assert results.sha256_file(path) == hashlib.sha256(data).hexdigest()
    assert watched.peak - before < 16, f"resident memory grew by {watched.peak - before} MiB hashing 96 MiB"


def test_a_checksum_stopped_midway_gives_nothing(tmp_path: Path) -> None:
    """A scorer that refused the file stops hashing it (its error is not kept waiting) and keeps no value."""
    path = tmp_path / "file"
    path.write_bytes(os.urandom(3 << 20))
    stop = threading.Event()
    stop.set()
    assert results.sha256_file(path, stop) == ""
    assert results.sha256_file(path, threading.Event()) == hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_checksum_started_ahead_is_the_files_and_a_changed_file_is_hashed_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``python -m evaluation_workers score`` hashes the predictions before its imports
    (``results.hash_ahead``); the scorer's ``sha256_file`` of that file takes the value from it."""
    monkeypatch.setattr(results, "_ahead", {})
    path = tmp_path / "predictions.zip"
    first = os.urandom(5 << 20)
    path.write_bytes(first)
    results.hash_ahead(path)
    results.hash_ahead(str(path))  # the same file: one thread
    assert len(results._ahead) == 1
    done = threading.Event()
    value: list[str] = []
    waiter = threading.Thread(target=lambda: (value.append(results.sha256_file(path)), done.set()), daemon=True)
    waiter.start()
    assert done.wait(30), "sha256_file waited for a checksum that never came"
    assert value == [hashlib.sha256(first).hexdigest()]
    stop = threading.Event()
    stop.set()
    assert results.sha256_file(path, stop) in ("", value[0])  # a refused file gives up waiting
    second = os.urandom(5 << 20)
    path.write_bytes(second)  # same path and size, a new modification time: not the ahead value
    os.utime(path, ns=(os.stat(path).st_atime_ns, os.stat(path).st_mtime_ns + 1_000_000))
    assert results.sha256_file(path) == hashlib.sha256(second).hexdigest()
    results.hash_ahead(tmp_path / "missing.zip")  # nothing to hash: nothing started
    results.hash_ahead(tmp_path)  # a folder neither
    assert len(results._ahead) == 1
