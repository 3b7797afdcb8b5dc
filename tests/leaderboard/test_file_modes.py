"""Uploads and labels on disk are private to the site (and the workers' group): FILE_MODE, DIR_MODE."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from django.core.management import call_command

from leaderboard.accounts.services import do_create_token
from leaderboard.benchmarks.models import LabelSet
from leaderboard.submissions.models import Submission


@pytest.fixture(autouse=True)
def usual_umask():
    """A server's usual umask (022), under which plain open() writes world-readable files."""
    old = os.umask(0o022)
    yield
    os.umask(old)


def modes_below(root: Path, leaf: Path) -> dict[str, str]:
    """The mode of ``leaf`` and of every folder between ``root`` and it, as octal strings."""
    modes, path = {}, leaf
    while path != root:
        modes[str(path.relative_to(root))] = oct(stat.S_IMODE(path.stat().st_mode))
        path = path.parent
    return modes


def expected(root: Path, leaf: Path, file_mode: str = "0o640") -> dict[str, str]:
    return {k: (file_mode if Path(root, k).is_file() else "0o750") for k in modes_below(root, leaf)}


def test_a_one_request_upload_is_written_0640_in_0750_folders(client, owner, sqa3d_split, sqa3d_files, settings,
                                                              sent_tasks):
    with open(sqa3d_files["predictions"], "rb") as f:
        response = client.post("/api/v1/submissions", {"track": "sqa3d", "split": "test", "method_name": "M",
                                                       "file": f},
                               headers={"Authorization": f"Token {do_create_token(owner)}"})
    assert response.status_code == 201, response.content
    root = Path(settings.UPLOADS_DIR)
    path = root / Submission.objects.get().file_key
    assert modes_below(root, path) == expected(root, path)


def test_parts_and_the_joined_file_are_0640(client, owner, sqa3d_split, sqa3d_files, small_parts, settings,
                                           sent_tasks):
    headers = {"Authorization": f"Token {do_create_token(owner)}"}
    data = sqa3d_files["predictions"].read_bytes()
    upload = client.post("/api/v1/uploads", {"track": "sqa3d", "split": "test", "method_name": "M",
                                             "file_name": "p.json", "size": len(data)},
                         content_type="application/json", headers=headers).json()
    numbers = list(range(1, upload["part_count"] + 1))
    urls = client.post(f"/api/v1/uploads/{upload['id']}/urls", json.dumps({"parts": numbers}),
                       content_type="application/json", headers=headers).json()["urls"]
    root = Path(settings.UPLOADS_DIR)
    for item in urls:
        n, url = item["part_number"], urlsplit(item["url"])
        chunk = data[(n - 1) * small_parts:n * small_parts]
        assert client.put(f"{url.path}?{url.query}", chunk, content_type="application/octet-stream").status_code == 200
    submission = Submission.objects.get(pk=upload["id"])
    part = root / ".multipart" / submission.upload.storage_upload_id / "00001"
    assert modes_below(root, part) == expected(root, part)
    done = client.post(f"/api/v1/uploads/{upload['id']}/complete", headers=headers)
    assert done.status_code == 200, done.content
    joined = root / submission.file_key
    assert joined.read_bytes() == data
    assert modes_below(root, joined) == expected(root, joined)


def test_loaded_labels_are_0640_in_0750_folders(db, sqa3d_files, settings, tmp_path):
    from leaderboard.benchmarks.bundle_apply import load_bundled_benchmarks

    settings.LABELS_DIR = tmp_path / "labels"
    load_bundled_benchmarks()
    call_command("load_labels", "--track", "sqa3d", "--split", "test", str(sqa3d_files["labels"]))
    root = Path(settings.LABELS_DIR)
    stored = root / LabelSet.objects.get().storage_key
    files = [p for p in stored.rglob("*") if p.is_file()]
    assert files
    for path in files:
        assert modes_below(root, path) == expected(root, path), path
    assert oct(stat.S_IMODE(root.stat().st_mode)) == "0o750"


def test_file_mode_is_a_setting(client, owner, sqa3d_split, sqa3d_files, settings, sent_tasks):
    settings.FILE_MODE, settings.DIR_MODE = 0o600, 0o700
    with open(sqa3d_files["predictions"], "rb") as f:
        client.post("/api/v1/submissions", {"track": "sqa3d", "split": "test", "method_name": "M", "file": f},
                    headers={"Authorization": f"Token {do_create_token(owner)}"})
    path = Path(settings.UPLOADS_DIR) / Submission.objects.get().file_key
    assert oct(stat.S_IMODE(path.stat().st_mode)) == "0o600"
    assert oct(stat.S_IMODE(path.parent.stat().st_mode)) == "0o700"
