"""Hostile files uploaded through the API: a 4xx with a specific message, never a 500, and the
row left behind counts against the rejection cap only (never against the submission quota).

The cost of each file is measured per decoder in tests/hostile/ (VmHWM of a fresh process); here
the web path is checked end to end."""

from __future__ import annotations

import argparse
import gzip
import io
from pathlib import Path

import pytest

from leaderboard.accounts.services import do_create_token
from leaderboard.submissions import quotas
from leaderboard.submissions.models import Submission
from tests.hostile.files import deep, gzip_bomb, npy_bytes, write_npz


@pytest.fixture(scope="module")
def mmscan_labels(tmp_path_factory):
    from evaluation_workers.synthetic import mmscan_vg

    out = tmp_path_factory.mktemp("mmscan-hostile")
    files = mmscan_vg.generate(argparse.Namespace(out=out, samples=20, seed=1, min_preds=1, max_preds=3, max_gt=2,
                                                  empty_fraction=0.0, tilted_fraction=0.0, gzip=False))
    return Path(files["labels"])


@pytest.fixture
def mmscan_split(db, mmscan_labels):
    from leaderboard.benchmarks.bundle_apply import load_bundled_benchmarks
    from leaderboard.benchmarks.models import Split
    from leaderboard.benchmarks.services import do_load_labels

    load_bundled_benchmarks()
    split = Split.objects.select_related("benchmark").get(benchmark__track="mmscan-vg", name="val")
    do_load_labels(split, mmscan_labels)
    return split


def post(client, owner, track, split, name, data: bytes):
    headers = {"Authorization": f"Token {do_create_token(owner)}"}
    return client.post("/api/v1/submissions", {"track": track, "split": split, "method_name": "Hostile",
                                              "file": _named(data, name)}, headers=headers)


def _named(data: bytes, name: str):
    from django.core.files.uploadedfile import SimpleUploadedFile

    return SimpleUploadedFile(name, data, content_type="application/octet-stream")


def assert_refused(response, message: str) -> None:
    assert response.status_code == 400, response.content[:500]
    error = response.json()["error"]
    assert error["code"] == "invalid_file" and error["kind"] == "invalid_input"
    assert message in error["message"], error["message"]
    [submission] = Submission.objects.all()
    assert submission.status == "failed" and submission.quota == "rejected"
    used = quotas.usage(submission.team, submission.split)
    assert (used.today, used.in_flight, used.rejected_today) == (0, 0, 1)


@pytest.mark.parametrize("name, data, message", [
    ("deep.json", deep("[", "]"), "nested at most"),
    ("latin1.json", '[{"question_id": 1, "answer": "caf\xe9"}]'.encode("latin-1"), "UTF-8"),
    ("nan.json", b'[{"question_id": NaN, "answer": "x"}]', "question_id"),
])
def test_hostile_sqa3d_files_are_refused_with_their_message(client, owner, sqa3d_split, name, data, message):
    assert_refused(post(client, owner, "sqa3d", "test", name, data), message)


def test_an_mmscan_gzip_bomb_is_refused_at_upload(client, owner, mmscan_split, tmp_path):
    bomb = gzip_bomb(tmp_path / "bomb.json.gz", inflated=512 * 2**20)
    assert_refused(post(client, owner, "mmscan-vg", "val", "bomb.json.gz", bomb.read_bytes()), "compression ratio")


def test_an_mmscan_array_nested_10000_deep_is_refused_not_a_500(client, owner, mmscan_split):
    data = gzip.compress(deep("[", "]"))
    assert_refused(post(client, owner, "mmscan-vg", "val", "deep.json.gz", data), "nested at most")


@pytest.mark.parametrize("header, message", [
    ("{'descr': '<i8', 'fortran_order': False, 'shape': (-1,), }", "non-negative"),
    ("{'descr': '<f8', 'fortran_order': False, 'shape': (4294967296, 4294967296), }", "elements"),
])
def test_mmscan_npz_headers_that_lie_are_refused_before_any_read(client, owner, mmscan_split, tmp_path, header,
                                                                  message):
    members = {"sample_id": npy_bytes(header=header), "offsets": npy_bytes(header=header),
               "pred_bboxes": npy_bytes(header=header), "pred_scores": npy_bytes(header=header)}
    path = write_npz(tmp_path / "lying.npz", members)
    assert_refused(post(client, owner, "mmscan-vg", "val", "lying.npz", path.read_bytes()), message)


def test_a_pickled_npz_is_refused(client, owner, mmscan_split, tmp_path):
    import numpy as np

    buf = io.BytesIO()
    np.savez(buf, sample_id=np.array([{"x": 1}], dtype=object))
    assert_refused(post(client, owner, "mmscan-vg", "val", "pickled.npz", buf.getvalue()), "pickled")
