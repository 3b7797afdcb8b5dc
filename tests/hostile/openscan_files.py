"""Hostile OpenScan prediction files, built at run time (each under ~3 MB).

``CASES`` maps a case name to (builder, expected message regex). A builder
writes the file into a folder and returns its path. ``MANIFEST`` is the small
public manifest they are checked against: three scenes, two aspects.
"""

from __future__ import annotations

import io
import json
import stat
import struct
import warnings
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from evaluation_workers.tracks.openscan.compact import COMPACT_FORMAT
from evaluation_workers.tracks.openscan.labels import DEFAULT_VOCABULARY

VERTICES = {"scene0000_00": 1500, "scene0001_00": 2000, "scene0002_00": 1200}
ASPECTS = ("material", "synonym")
_VOCAB = json.loads(DEFAULT_VOCABULARY.read_text())
MANIFEST: dict[str, Any] = {
    "track": "openscan",
    "vocabulary": {a: _VOCAB[a] for a in ASPECTS},
    "aspects": {a: sorted(VERTICES) for a in ASPECTS},
    "scenes": dict(VERTICES),
}
S0, V0 = "scene0000_00", 1500


def npy(arr: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, arr, allow_pickle=True)
    return buf.getvalue()


def npy_header_only(shape: tuple[int, ...], descr: str = "|u1", tail: bytes = b"") -> bytes:
    """An .npy whose header announces ``shape`` (numpy refuses to write such shapes itself)."""
    header = repr({"descr": descr, "fortran_order": False, "shape": shape}).encode()
    header += b" " * (63 - (len(header) + 10) % 64) + b"\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header + tail


def npz(members: dict[str, bytes], deflate: bool = True) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED if deflate else zipfile.ZIP_STORED) as zf:
        for name, blob in members.items():
            zf.writestr(name, blob)
    return buf.getvalue()


def scene_npz(n: int = 2, v: int = V0, **override: bytes | None) -> bytes:
    masks = np.zeros((v, n), np.uint8)
    masks[: min(v, 300)] = 1
    members: dict[str, bytes | None] = {
        "pred_masks.npy": npy(masks),
        "pred_scores.npy": npy(np.linspace(0.9, 0.1, n)),
        "pred_classes.npy": npy(np.arange(1, n + 1)),
    }
    members.update({k + ".npy": b for k, b in override.items()})
    return npz({k: b for k, b in members.items() if b is not None})


def write_zip(path: Path, members: dict[str, bytes], deflate: bool = False) -> Path:
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED if deflate else zipfile.ZIP_STORED) as zf:
        for name, blob in members.items():
            zf.writestr(name, blob)
    return path


def official(path: Path, **override: bytes | None) -> Path:
    return write_zip(path / "p.zip", {f"material/{S0}.npz": scene_npz(**override)})


def valid_official(path: Path, deflate: bool = False) -> Path:
    members = {f"{a}/{s}.npz": scene_npz(v=v) for a in ASPECTS for s, v in VERTICES.items()}
    return write_zip(path / "p.zip", members, deflate)


def _halved(path: Path) -> bytes:
    data = path.read_bytes()
    return data[: len(data) // 2]


def compact_arrays() -> dict[str, np.ndarray]:
    scenes = sorted(VERTICES)
    return {
        "format": np.array(COMPACT_FORMAT),
        "scene_ids": np.array(scenes),
        "vertex_counts": np.array([VERTICES[s] for s in scenes]),
        "proposal_offsets": np.array([0, 2, 3, 4]),
        "run_offsets": np.array([0, 1, 3, 4, 5]),
        "run_starts": np.array([0, 10, 500, 0, 100], np.uint32),
        "run_lengths": np.array([300, 200, 400, 150, 1000], np.uint32),
        "material.rows": np.array([0, 2, 3, 4]),
        "material.proposal": np.array([0, 1, 0, 0]),
        "material.scores": np.array([0.9, 0.5, 0.4, 0.3], np.float32),
        "material.classes": np.array([1, 2, 3, 0]),
    }


def compact(path: Path, members: dict[str, bytes] | None = None, drop: tuple[str, ...] = (),
            **arrays: np.ndarray) -> Path:
    base = {k + ".npy": npy(v) for k, v in {**compact_arrays(), **arrays}.items() if k not in drop}
    base.update(members or {})
    (path / "p.npz").write_bytes(npz(base))
    return path / "p.npz"


def text(path: Path, index: str, masks: dict[str, bytes], deflate: bool = True) -> Path:
    members = {f"material/{S0}.txt": index.encode(), **{f"material/{k}": v for k, v in masks.items()}}
    return write_zip(path / "p.zip", members, deflate)


def mask_text(v: int = V0, first: int = 300) -> bytes:
    return b"1\n" * first + b"0\n" * (v - first)


def _patch(path: Path, old: bytes, new: bytes) -> Path:
    path.write_bytes(path.read_bytes().replace(old, new))
    return path


def _symlink(path: Path) -> Path:
    info = zipfile.ZipInfo(f"material/{S0}.npz")
    info.external_attr = (stat.S_IFLNK | 0o777) << 16
    with zipfile.ZipFile(path / "p.zip", "w") as zf:
        zf.writestr(info, "/etc/passwd")
    return path / "p.zip"


def stored_zip(members: list[tuple[str, bytes]]) -> bytes:
    """A zip of stored members written byte by byte: zipfile refuses to write some names (an empty one)."""
    local, central = b"", b""
    for name, blob in members:
        raw = name.encode()
        crc = zipfile.crc32(blob)
        central += struct.pack("<4s6H3L5H2L", b"PK\x01\x02", 20, 20, 0, 0, 0, 0, crc, len(blob), len(blob),
                               len(raw), 0, 0, 0, 0, 0, len(local)) + raw
        local += struct.pack("<4s5H3L2H", b"PK\x03\x04", 20, 0, 0, 0, 0, crc, len(blob), len(blob), len(raw), 0)
        local += raw + blob
    return local + central + struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, len(members), len(members),
                                         len(central), len(local), 0)


def _lying_offset(path: Path) -> Path:
    p = valid_official(path)
    data = bytearray(p.read_bytes())
    cd = data.rfind(b"PK\x01\x02")  # the last central entry: move its local-header offset
    struct.pack_into("<L", data, cd + 42, 7)
    p.write_bytes(bytes(data))
    return p


def _lying_size(path: Path) -> Path:
    p = valid_official(path)
    data = bytearray(p.read_bytes())
    cd = data.find(b"PK\x01\x02")
    struct.pack_into("<L", data, cd + 20, 0x7FFFFFFF)  # compressed size
    p.write_bytes(bytes(data))
    return p


def _many_members(path: Path, lie: bool) -> Path:
    p = path / "p.zip"
    with zipfile.ZipFile(p, "w") as zf:
        for i in range(30_000):
            zf.writestr(f"m/{i}", b"")
    if lie:  # the end record says 10 entries; the directory holds 30,000
        data = bytearray(p.read_bytes())
        end = data.rfind(b"PK\x05\x06")
        struct.pack_into("<HH", data, end + 8, 10, 10)
        p.write_bytes(bytes(data))
    return p


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def _duplicate(path: Path) -> Path:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # zipfile warns about the duplicate name it writes
        return write_zip(path / "p.zip", {f"material/{S0}.npz": scene_npz()}) and _append(path / "p.zip")


def _append(path: Path) -> Path:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with zipfile.ZipFile(path, "a") as zf:
            zf.writestr(f"material/{S0}.npz", scene_npz())
    return path


def _nested_zip(path: Path) -> Path:
    return write_zip(path / "p.zip", {f"material/{S0}.zip": npz({"a.npy": npy(np.zeros(3))})})


def _budget_filler(path: Path) -> Path:
    # legitimate masks (2,000 per scene) that inflate to 2 x 4.7 MB: past an 8 MiB budget
    members = {f"{a}/{s}.npz": npz({"pred_masks.npy": npy(np.zeros((v, 2000), np.uint8)),
                                    "pred_scores.npy": npy(np.zeros(2000)),
                                    "pred_classes.npy": npy(np.ones(2000, int))})
               for a in ASPECTS for s, v in VERTICES.items()}
    return write_zip(path / "p.zip", members)


Builder = Callable[[Path], Path]
_BIG = 2**32
CASES: dict[str, tuple[Builder, str]] = {
    "npy shape (-1,)": (lambda p: official(p, pred_masks=npy_header_only((-1,))),
                        r"pred_masks.*non-negative integers.*\(-1,\)"),
    "npy shape (2**32, 2**32)": (lambda p: official(p, pred_masks=npy_header_only((_BIG, _BIG))),
                                 r"`pred_masks` to have shape \(1500, M\).*\(4294967296, 4294967296\)"),
    "more masks than a scene may hold": (lambda p: official(p, pred_masks=npy_header_only((V0, 5000))),
                                         r"at most 2,000 masks per scene.*`pred_masks` announces 5,000"),
    "masks with the wrong vertex count": (lambda p: official(p, pred_masks=npy(np.ones((7, 2), np.uint8))),
                                          r"pred_masks.*shape \(1500, M\).*\(7, 2\)"),
    "deflate bomb scene file": (lambda p: write_zip(p / "p.zip", {f"material/{S0}.npz": bytes(64 * 2**20)}, True),
                                r"material/scene0000_00.npz: Expected at most [\d,]+ bytes once decompressed"),
    "truncated zip": (lambda p: _write(p / "t.zip", _halved(valid_official(p, deflate=True))),
                      r"t.zip: Expected a zip archive.*, but got no readable zip directory"),
    "smaller than a zip directory": (lambda p: _write(p / "t.zip", b"hello"),
                                     r"t.zip: Expected a zip archive.*, but got no readable zip directory"),
    "central directory lies about an offset": (_lying_offset, r"local file header.*lying directory"),
    "central directory lies about a size": (_lying_size, r"Expected at most [\d,]+ bytes, but the member stores"),
    "path ../x": (lambda p: write_zip(p / "p.zip", {"../material/x.npz": b"x"}), r"inside the archive.*'\.\./"),
    "absolute path": (lambda p: write_zip(p / "p.zip", {"/material/x.npz": b"x"}), r"inside the archive.*'/mat"),
    "backslash path": (lambda p: write_zip(p / "p.zip", {"material\\..\\x.npz": b"x"}), r"inside the archive"),
    "drive letter": (lambda p: write_zip(p / "p.zip", {"C:/material/x.npz": b"x"}), r"inside the archive.*'C:"),
    "symlink member": (_symlink, r"regular files.*symbolic link"),
    "zip inside the zip": (_nested_zip, r"<aspect>/<scene_id>\.npz, but got 'material/scene0000_00\.zip'"),
    "member without a name in the scene npz": (lambda p: write_zip(p / "p.zip", {f"material/{S0}.npz": stored_zip(
        [("pred_masks.npy", npy(np.zeros((V0, 1)))), ("", b"x")])}), r"scene0000_00.npz: Expected member paths.*''"),
    "member without a name": (lambda p: _write(p / "p.zip", stored_zip([("", b"x")])), r"Expected member paths.*''"),
    "zip inside the scene npz": (lambda p: write_zip(p / "p.zip", {f"material/{S0}.npz": npz(
        {"pred_masks.npy": npy(np.zeros((V0, 1))), "inner.npz": npz({"a.npy": npy(np.zeros(3))})})}),
        r"only \.npy arrays.*'inner\.npz'"),
    "pickled npz": (lambda p: official(p, pred_scores=npy(np.array([{"a": 1}, 2], dtype=object))),
                    r"pred_scores.*Python objects"),
    "NaN score": (lambda p: official(p, pred_scores=npy(np.array([0.5, np.nan]))), r"pred_scores.*finite.*nan"),
    "inf score": (lambda p: official(p, pred_scores=npy(np.array([np.inf, 0.5]))), r"pred_scores.*finite.*inf"),
    "string masks": (lambda p: official(p, pred_masks=npy(np.full((V0, 2), "1"))), r"pred_masks.*numbers.*<U1"),
    "complex classes": (lambda p: official(p, pred_classes=npy(np.array([1, 2], np.complex64))),
                        r"pred_classes.*not bool.*complex64"),
    "bool classes": (lambda p: official(p, pred_classes=npy(np.array([True, True]))), r"pred_classes.*not bool.*bool"),
    "string scores": (lambda p: official(p, pred_scores=npy(np.array(["a", "b"]))), r"pred_scores.*<U1"),
    "scores of the wrong shape": (lambda p: official(p, pred_scores=npy(np.zeros(3))), r"pred_scores.*\(2,\).*\(3,\)"),
    "duplicate scene": (_duplicate, r"unique member names.*'material/scene0000_00.npz' twice"),
    "unknown scene": (lambda p: write_zip(p / "p.zip", {"material/scene9999_00.npz": scene_npz()}),
                      r"material: .*unknown scene 'scene9999_00'"),
    "unknown aspect": (lambda p: write_zip(p / "p.zip", {f"colour/{S0}.npz": scene_npz()}), r"aspect.*'colour'"),
    "0 bytes": (lambda p: _write(p / "e.zip", b""), r"empty"),
    "0-byte scene file": (lambda p: write_zip(p / "p.zip", {f"material/{S0}.npz": b""}), r"0-byte"),
    "non-UTF-8 member name": (lambda p: _patch(write_zip(p / "p.zip", {"material/\u00e9.npz": b"x"}),
                                               "\u00e9".encode(), b"\xff\xfe"), r"not valid UTF-8"),
    "30,000 members": (lambda p: _many_members(p, lie=False), r"at most [\d,]+ members.*lists 30,000"),
    "30,000 members, end record lies": (lambda p: _many_members(p, lie=True), r"at most [\d,]+ members.*got 30,000"),
    "past the submission budget": (_budget_filler, r"at most 8,388,608 bytes once decompressed.*inflates to more"),
    "compact: unknown members": (lambda p: compact(p, {f"junk{i}.npy": npy(np.zeros(10**7, np.uint8))
                                                       for i in range(5)}), r"compact form's arrays.*'junk"),
    "compact: 8 aspects of huge sem_pred": (lambda p: compact(p, {"material.sem_pred.npy": npy_header_only(
        (2**31,), "<i8")}), r"material.sem_pred.*shape \(4700,\).*\(2147483648,\)"),
    "compact: too many proposals": (lambda p: compact(p, proposal_offsets=np.array([0, 5000, 5001, 5002])),
                                    r"proposal_offsets.*at most 2,000 proposals per scene.*5,000"),
    "compact: too many runs": (lambda p: compact(p, run_offsets=np.array([0, 10**6, 10**6, 10**6, 10**6])),
                               r"run_offsets.*at most 1,500 runs per proposal.*1,000,000"),
    "compact: run lengths bomb": (lambda p: compact(
        p, proposal_offsets=np.array([0, 2000, 4000, 6000]),
        run_offsets=np.concatenate([[0], np.cumsum(np.repeat([1500, 2000, 1200], 2000))]),
        run_lengths=np.zeros(9_400_000, np.uint8)), r"run_lengths.*>= 1, but got 0 at run 0"),
    "compact: run header shape lies": (lambda p: compact(p, {"run_starts.npy": npy_header_only((2**40,), "<u4")}),
                                       r"run_starts.*shape \(5,\).*\(1099511627776,\)"),
    "compact: overlapping runs": (lambda p: compact(p, run_starts=np.array([0, 10, 100, 0, 100], np.uint32)),
                                  r"scene0000_00: proposal 1.*non-overlapping.*start 100 length 400"),
    "compact: long scene ids": (lambda p: compact(p, scene_ids=np.array(["x" * 100_000] * 3)),
                                r"scene_ids.*at most 256 bytes per element.*<U100000"),
    "compact: duplicate scene ids": (lambda p: compact(p, scene_ids=np.array([S0, S0, "scene0002_00"])),
                                     r"scene_ids.*unique"),
    "compact: unknown aspect": (lambda p: compact(p, {"colour.rows.npy": npy(np.zeros(4, int))}), r"'colour'"),
    "compact: NaN scores": (lambda p: compact(p, **{"material.scores": np.array([0.9, np.nan, 0.1, 0.2])}),
                            r"material.scores.*finite"),
    "compact: bool classes": (lambda p: compact(p, **{"material.classes": np.ones(4, bool)}),
                              r"material.classes.*kind 'iuf'.*bool"),
    "text: ../ mask path": (lambda p: text(p, "../synonym/m.txt 1 0.5\n", {"m.txt": mask_text()}),
                            r"scene0000_00.txt: line 1: Expected a mask path relative to the material/.*'\.\./synonym"),
    "text: absolute mask path": (lambda p: text(p, "/etc/passwd 1 0.5\n", {"m.txt": mask_text()}),
                                 r"line 1: .*inside it, but got '/etc/passwd'"),
    "text: backslash mask path": (lambda p: text(p, "..\\m.txt 1 0.5\n", {"m.txt": mask_text()}), r"line 1: .*inside"),
    "text: missing mask file": (lambda p: text(p, "pred/none.txt 1 0.5\n", {"m.txt": mask_text()}),
                                r"mask file 'material/pred/none.txt' in the archive, but it is missing"),
    "text: mask of the wrong length": (lambda p: text(p, "m.txt 1 0.5\n", {"m.txt": mask_text(v=1000)}),
                                       r"material/m.txt: .*1500 vertices, but got 1000 lines"),
    "text: mask deflate bomb": (lambda p: text(p, "m.txt 1 0.5\n", {"m.txt": b"0\n" * (5 * 2**20)}),
                                r"material/m.txt: Expected at most 36,000 bytes once decompressed"),
    "text: NaN confidence": (lambda p: text(p, "m.txt 1 nan\n", {"m.txt": mask_text()}), r"line 1: .*finite confidence"),
    "text: words in a mask": (lambda p: text(p, "m.txt 1 0.5\n", {"m.txt": b"abc\n" + mask_text()[2:]}),
                              r"material/m.txt: Expected one integer per line, but got 'abc'"),
    "text: non-UTF-8 index": (lambda p: text_bytes(p, b"m.txt 1 0.5\n\xff\n"), r"UTF-8 text"),
    "text: fractional class id": (lambda p: text(p, "m.txt 1.5 0.5\n", {"m.txt": mask_text()}),
                                  r"line 1: Expected an integer class id, but got '1.5'"),
    "text and npz mixed": (lambda p: write_zip(p / "p.zip", {f"material/{S0}.npz": scene_npz(),
                                                             f"synonym/{S0}.txt": b""}), r"one layout"),
}


def text_bytes(path: Path, index: bytes) -> Path:
    return write_zip(path / "p.zip", {f"material/{S0}.txt": index, "material/m.txt": mask_text()})
