"""Uploads in parts with local storage: signed part URLs on the site, resume, expiry."""

from __future__ import annotations

import hashlib
import json
from datetime import timedelta
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from django.utils import timezone

from leaderboard.accounts.services import do_create_token
from leaderboard.submissions.models import Submission, Upload
from leaderboard.submissions.uploads import do_expire_uploads


@pytest.fixture
def api(client, owner):
    headers = {"Authorization": f"Token {do_create_token(owner)}"}

    def call(method, path, body=None):
        if method == "get":
            return client.get(f"/api/v1/{path}", headers=headers)
        return getattr(client, method)(f"/api/v1/{path}", json.dumps(body or {}), content_type="application/json",
                                       headers=headers)
    return call


def start(api, data: bytes, name="predictions.json", **extra):
    return api("post", "uploads", {"track": "sqa3d", "split": "test", "method_name": "PartNet",
                                   "file_name": name, "size": len(data), **extra})


def put_parts(client, api, upload, data: bytes, numbers):
    urls = api("post", f"uploads/{upload['id']}/urls", {"parts": numbers}).json()["urls"]
    for item in urls:
        n, url = item["part_number"], urlsplit(item["url"])
        chunk = data[(n - 1) * upload["part_size"]:n * upload["part_size"]]
        response = client.put(f"{url.path}?{url.query}", chunk, content_type="application/octet-stream")
        assert response.status_code == 200, response.content
        assert response["ETag"] == f'"{hashlib.md5(chunk).hexdigest()}"'


def test_it_uploads_in_signed_parts_to_the_site_and_queues(client, api, sqa3d_split, sqa3d_files, small_parts,
                                                          sent_tasks, settings):
    data = sqa3d_files["predictions"].read_bytes()
    upload = start(api, data).json()
    assert upload["part_count"] == -(-len(data) // small_parts) and upload["submission"]["status"] == "uploading"
    put_parts(client, api, upload, data, list(range(1, upload["part_count"] + 1)))
    done = api("post", f"uploads/{upload['id']}/complete")
    assert done.status_code == 200 and done.json()["status"] == "queued"
    submission = Submission.objects.get(pk=upload["id"])
    assert (Path(settings.UPLOADS_DIR) / submission.file_key).read_bytes() == data
    assert submission.predictions_sha256 == hashlib.sha256(data).hexdigest()
    assert not (Path(settings.UPLOADS_DIR) / ".multipart" / submission.upload.storage_upload_id).exists()


def test_a_part_url_with_a_bad_signature_is_refused(client, api, sqa3d_split, small_parts):
    upload = start(api, b"x" * 5000).json()
    url = urlsplit(api("post", f"uploads/{upload['id']}/urls", {"parts": [1]}).json()["urls"][0]["url"])
    assert client.put(f"{url.path}?{url.query}x", b"x" * 4096,
                      content_type="application/octet-stream").status_code == 403
    other = url.path.replace("/parts/1", "/parts/2")
    assert client.put(f"{other}?{url.query}", b"x", content_type="application/octet-stream").status_code == 403


def test_it_lists_arrived_parts_to_resume_and_names_the_missing_ones(client, api, sqa3d_split, sqa3d_files,
                                                                    small_parts, sent_tasks):
    data = sqa3d_files["predictions"].read_bytes()
    upload = start(api, data).json()
    put_parts(client, api, upload, data, [1, 3])
    state = api("get", f"uploads/{upload['id']}").json()
    assert [(p["part_number"], p["size"]) for p in state["parts"]] == [(1, 4096), (3, 4096)]
    refused = api("post", f"uploads/{upload['id']}/complete")
    assert refused.status_code == 409 and "Parts missing: 2, 4" in refused.json()["error"]["message"]
    put_parts(client, api, upload, data, [n for n in range(1, upload["part_count"] + 1) if n not in (1, 3)])
    assert api("post", f"uploads/{upload['id']}/complete").json()["status"] == "queued"


def test_it_refuses_a_declared_size_over_the_limit_before_anything_counts(api, sqa3d_split, settings):
    settings.UPLOAD_MAX_BYTES = {"sqa3d": 2000}
    response = start(api, b"x" * 2001)
    assert response.status_code == 400 and "expected at most" in response.json()["error"]["message"]
    assert start(api, b"x" * 10, name="p.txt").status_code == 400
    assert not Submission.objects.exists()


def test_a_part_larger_than_announced_is_refused(client, api, sqa3d_split, small_parts):
    upload = start(api, b"x" * 5000).json()
    url = urlsplit(api("post", f"uploads/{upload['id']}/urls", {"parts": [2]}).json()["urls"][0]["url"])
    response = client.put(f"{url.path}?{url.query}", b"x" * 1000, content_type="application/octet-stream")
    assert response.status_code == 400 and "larger than 904 bytes" in response.json()["error"]["message"]


def test_an_upload_that_never_completes_is_dropped_and_refunded(client, api, sqa3d_split, small_parts, settings):
    settings.QUOTA_IN_FLIGHT = 1
    upload = start(api, b"x" * 5000).json()
    put_parts(client, api, upload, b"x" * 5000, [1])
    assert start(api, b"x" * 5000).status_code == 429, "the open upload is in flight"
    assert do_expire_uploads() == 0
    Upload.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
    assert do_expire_uploads() == 1
    submission = Submission.objects.get(pk=upload["id"])
    assert (submission.status, submission.quota) == ("cancelled", "refunded")
    assert "did not complete" in submission.status_detail
    assert not (Path(settings.UPLOADS_DIR) / ".multipart" / submission.upload.storage_upload_id).exists()
    assert api("post", f"uploads/{upload['id']}/complete").status_code == 409
    assert start(api, b"x" * 5000).status_code == 201


def test_deleting_an_upload_cancels_it(api, sqa3d_split, small_parts):
    upload = start(api, b"x" * 5000).json()
    body = api("delete", f"uploads/{upload['id']}").json()
    assert body["status"] == "aborted" and body["submission"]["status"] == "cancelled"
    assert body["submission"]["quota"] == "refunded"


def test_an_outsider_cannot_see_or_complete_an_upload(client, api, outsider, sqa3d_split, small_parts):
    upload = start(api, b"x" * 5000).json()
    headers = {"Authorization": f"Token {do_create_token(outsider)}"}
    assert client.get(f"/api/v1/uploads/{upload['id']}", headers=headers).status_code == 404
    assert client.post(f"/api/v1/uploads/{upload['id']}/complete", headers=headers).status_code == 404
