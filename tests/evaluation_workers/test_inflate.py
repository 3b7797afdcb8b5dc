"""The inflate module decodes deflate and gzip as zlib does, piece by piece, and words corrupt streams alike."""

from __future__ import annotations

import gzip
import os
import zlib

import pytest

from evaluation_workers import inflate


def test_the_faster_inflater_is_the_one_installed() -> None:
    assert inflate._decompressobj is not zlib.decompressobj  # zlib-ng, as requirements.txt pins it


@pytest.mark.parametrize("level", [1, 6, 9])
def test_raw_deflate_read_in_capped_pieces_is_the_original(level: int) -> None:
    data = os.urandom(1 << 16) + bytes(3 << 20) + os.urandom(777)  # noise, a long run of zeros, noise
    packer = zlib.compressobj(level, zlib.DEFLATED, -zlib.MAX_WBITS)
    stream = packer.compress(data) + packer.flush()
    d = inflate.decompressobj(-inflate.MAX_WBITS)
    view, pos, out = memoryview(stream), 0, []
    while not d.eof:
        piece = d.decompress(view[pos:], 1 << 16)
        assert len(piece) <= 1 << 16
        pos = len(stream) - len(d.unconsumed_tail)  # what MemberStream does
        out.append(piece)
    assert b"".join(out) == data


def test_gzip_and_corrupt_streams() -> None:
    data = os.urandom(5000) * 20
    d = inflate.decompressobj(16 + inflate.MAX_WBITS)
    assert d.decompress(gzip.compress(data)) == data and d.eof
    with pytest.raises(inflate.ERRORS, match="invalid block type"):
        inflate.decompressobj(-inflate.MAX_WBITS).decompress(b"\xff\xff\xff garbage", 100)
