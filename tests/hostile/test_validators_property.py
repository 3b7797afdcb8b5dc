"""Random mutations of valid small submissions either validate or raise PredictionFormatError."""

from __future__ import annotations

import gzip
import io
import json
from pathlib import Path

import numpy as np
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from evaluation_workers.errors import PredictionFormatError
from evaluation_workers.tracks import mmscan_vg, sqa3d
from tests.hostile.files import BOX, npz_members, write_npz

MMSCAN_IDS = [f"s{i}" for i in range(4)]
MMSCAN_MANIFEST = {"sample_ids": MMSCAN_IDS}
SQA3D_MANIFEST = {"question_ids": [11, 12, 13]}
_JSON = json.dumps([{"sample_id": s, "pred_bboxes": [BOX, [1, 2, 0.5, 0.3, 0.4, 0.5, 0.1, 0.2, 0.3]],
                     "pred_scores": [0.9, [0.1]][: 1] + [0.2], "scan_id": "x"} for s in MMSCAN_IDS]).encode()
_SQA3D = json.dumps([{"question_id": q, "answer": "left", "scene_id": "x"} for q in (11, 12, 13)]).encode()


def _npz_bytes(tmp: Path) -> bytes:
    return write_npz(tmp / "seed.npz", npz_members(MMSCAN_IDS, [2, 0, 1, 3])).read_bytes()


def _mutate(data: bytes, cut: int, flips: list[tuple[int, int]], insert: bytes) -> bytes:
    out = bytearray(data[: max(1, cut)] if cut < len(data) else data)
    for at, value in flips:
        if out:
            out[at % len(out)] = value
    if insert:
        at = flips[0][0] % (len(out) + 1) if flips else len(out)
        out[at:at] = insert
    return bytes(out)


MUTATION = st.tuples(
    st.integers(0, 4000),
    st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)), max_size=4),
    st.binary(max_size=8) | st.sampled_from([b"[", b"{", b"NaN", b"true", b'"', b"1e999", b"-", b"[[[[", b"}"]),
)
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def _check(call: object) -> None:
    try:
        call()  # type: ignore[operator]
    except PredictionFormatError:
        pass


@SETTINGS
@given(mutation=MUTATION, compressed=st.booleans())
def test_mmscan_json_mutations_validate_or_are_refused(tmp_path: Path, mutation: tuple, compressed: bool) -> None:
    data = _mutate(_JSON, *mutation)
    path = tmp_path / "p.json"
    path.write_bytes(gzip.compress(data) if compressed else data)
    _check(lambda: mmscan_vg.validate(path, MMSCAN_MANIFEST))


@SETTINGS
@given(mutation=MUTATION)
def test_mmscan_gzip_byte_mutations_validate_or_are_refused(tmp_path: Path, mutation: tuple) -> None:
    path = tmp_path / "p.json.gz"
    path.write_bytes(_mutate(gzip.compress(_JSON), *mutation))
    _check(lambda: mmscan_vg.validate(path, MMSCAN_MANIFEST))


@SETTINGS
@given(mutation=MUTATION)
@example(mutation=(1498, [(2742, 64)], b""))  # "zip file version 6.4": zipfile's NotImplementedError
def test_mmscan_npz_mutations_validate_or_are_refused(tmp_path: Path, mutation: tuple) -> None:
    path = tmp_path / "p.npz"
    path.write_bytes(_mutate(_npz_bytes(tmp_path), *mutation))
    _check(lambda: mmscan_vg.validate(path, MMSCAN_MANIFEST))


@SETTINGS
@given(values=st.lists(st.one_of(st.floats(allow_nan=True), st.integers(-2**70, 2**70), st.booleans(),
                                 st.none(), st.text(max_size=3)), min_size=1, max_size=12),
       field=st.sampled_from(["pred_bboxes", "pred_scores", "sample_id", "offsets"]))
def test_mmscan_value_mutations_validate_or_are_refused(tmp_path: Path, values: list, field: str) -> None:
    items = json.loads(_JSON)
    if field == "offsets":
        members = npz_members(MMSCAN_IDS, [2, 0, 1, 3])
        buf = io.BytesIO()
        ints = [v for v in values if isinstance(v, int) and not isinstance(v, bool)][:5] or [0]
        np.save(buf, np.array([v % 7 for v in ints], dtype=np.int64))  # reduced in Python: no int64 overflow
        members["offsets"] = buf.getvalue()
        path = write_npz(tmp_path / "p.npz", members)
    else:
        items[1][field] = values if field != "pred_bboxes" else [values]
        path = tmp_path / "p.json"
        path.write_text(json.dumps(items))
    _check(lambda: mmscan_vg.validate(path, MMSCAN_MANIFEST))


@SETTINGS
@given(mutation=MUTATION, jsonl=st.booleans())
def test_sqa3d_mutations_validate_or_are_refused(tmp_path: Path, mutation: tuple, jsonl: bool) -> None:
    seed = b"\n".join(json.dumps(x).encode() for x in json.loads(_SQA3D)) if jsonl else _SQA3D
    path = tmp_path / ("p.jsonl" if jsonl else "p.json")
    path.write_bytes(_mutate(seed, *mutation))
    _check(lambda: sqa3d.validate(path, SQA3D_MANIFEST))
