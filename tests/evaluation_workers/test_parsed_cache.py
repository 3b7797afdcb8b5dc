"""A parsed labels cache is read through a mapping: the same arrays as written, read-only views of the
file, and a damaged one is refused (then rebuilt by the caller)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from evaluation_workers import parsed_cache

STATS = [["gt/a.txt", 10, 123]]


def _arrays() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return {
        "a.gt_local": rng.integers(0, 60000, 1001).astype(np.uint16),  # odd sizes: later members unaligned
        "a.vertex_offsets": np.arange(7, dtype=np.int64),
        "a.scene_ids": np.array(["scene0000_00", "scene0011_01"]),
        "a.fortran": np.asfortranarray(rng.random((3, 5))),
        "a.empty": np.zeros((0, 9), dtype=np.float32),
        "aspects": np.array(["a"]),
    }


def test_a_cache_reads_back_as_read_only_views_of_the_file(tmp_path: Path) -> None:
    path = tmp_path / "c.npz"
    parsed_cache.write(path, _arrays(), "ab" * 32, STATS, version=3)
    found = parsed_cache.read(path, 3, stats=STATS)
    assert found is not None
    arrays, sha = found
    assert sha == "ab" * 32 and arrays.keys() == _arrays().keys()
    for key, want in _arrays().items():
        got = arrays[key]
        assert got.dtype == want.dtype and got.shape == want.shape and np.array_equal(got, want), key
        if want.size:
            assert not got.flags.writeable and not got.flags.owndata, key  # the mapping's pages, not a copy
    assert parsed_cache.read(path, 4, stats=STATS) is None  # another layout version
    assert parsed_cache.read(path, 3, stats=[["gt/a.txt", 11, 123]]) is None  # other files


def test_a_damaged_byte_in_an_array_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "c.npz"
    parsed_cache.write(path, _arrays(), "ab" * 32, STATS, version=3)
    raw = bytearray(path.read_bytes())
    at = raw.index(_arrays()["a.gt_local"].tobytes()[:64]) + 100
    raw[at] ^= 0x01  # one bit of the labels, as a failing disk might flip it
    path.write_bytes(bytes(raw))
    assert parsed_cache.read(path, 3, stats=STATS) is None


def test_a_compressed_cache_is_read_as_numpy_reads_it(tmp_path: Path) -> None:
    path = tmp_path / "c.npz"
    meta = {"version": 3, "labels_sha256": "cd" * 32, "files": STATS}
    np.savez_compressed(path, meta=np.array(json.dumps(meta)), **_arrays())  # type: ignore[arg-type]
    found = parsed_cache.read(path, 3, stats=STATS)
    assert found is not None and found[1] == "cd" * 32
    assert all(np.array_equal(found[0][k], v) for k, v in _arrays().items())
