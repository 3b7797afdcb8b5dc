"""Presigned multipart uploads to a real S3-compatible server (``rclone serve s3``, which
checks signatures), driven by the ``lb`` client's uploader through a live site."""

from __future__ import annotations

import hashlib
from datetime import timedelta

import pytest
import requests
from django.utils import timezone

from leaderboard.accounts.services import do_create_token
from leaderboard.lib import storage
from leaderboard.submissions.models import Submission, Upload
from leaderboard.submissions.uploads import do_expire_uploads
from leaderboard_cli import upload as lb_upload
from leaderboard_cli.client import ApiError, Client

TARGET = {"track": "sqa3d", "split": "test", "method_name": "S3Net", "team": None}


@pytest.fixture
def lb(live_server, owner, lb_config):
    return Client(live_server.url, do_create_token(owner))


@pytest.fixture
def big_file(sqa3d_files, tmp_path):
    """The synthetic predictions, padded with whitespace past a few parts (still valid JSON)."""
    path = tmp_path / "predictions.json"
    path.write_bytes(sqa3d_files["predictions"].read_bytes() + b" " * 9000)
    return path


def s3_object(key: str) -> bytes:
    return storage.s3_client().get_object(Bucket=storage.settings.S3_BUCKET, Key=key)["Body"].read()


def test_a_presigned_multipart_upload_lands_in_the_bucket_and_is_queued(lb, s3_storage, small_parts, big_file,
                                                                       sqa3d_split, sent_tasks):
    submission = lb_upload.upload_in_parts(lb, big_file, TARGET, quiet=True)
    assert submission["status"] == "queued", submission
    stored = Submission.objects.get(pk=submission["id"])
    assert s3_object(stored.file_key) == big_file.read_bytes()
    assert stored.upload.part_count == -(-big_file.stat().st_size // small_parts) > 5
    assert stored.file_size == big_file.stat().st_size
    # The bytes never passed through the site: the worker's result supplies the checksum.
    assert stored.predictions_sha256 == ""
    [task] = sent_tasks
    assert task["kwargs"]["predictions_key"] == stored.file_key


def test_an_interrupted_upload_resumes_with_the_missing_parts_only(lb, s3_storage, small_parts, big_file,
                                                                  sqa3d_split, sent_tasks, monkeypatch):
    with pytest.raises(KeyboardInterrupt):
        lb_upload.upload_in_parts(lb, big_file, TARGET, quiet=True, stop_after_parts=3)
    [upload] = Upload.objects.all()
    assert len(storage.list_parts(upload.submission.file_key, upload.storage_upload_id)) == 3

    puts = []
    real_put = requests.put
    monkeypatch.setattr(lb_upload.requests, "put", lambda url, **kw: puts.append(url) or real_put(url, **kw))
    submission = lb_upload.upload_in_parts(lb, big_file, TARGET, quiet=True)
    assert submission["id"] == upload.submission_id and submission["status"] == "queued"
    assert len(puts) == upload.part_count - 3
    assert s3_object(upload.submission.file_key) == big_file.read_bytes()


def test_the_store_refuses_a_tampered_presigned_url(lb, s3_storage, small_parts, big_file, sqa3d_split):
    upload = lb.post("uploads", json={**TARGET, "file_name": big_file.name, "size": big_file.stat().st_size})
    url = lb.post(f"uploads/{upload['id']}/urls", json={"parts": [1]})["urls"][0]["url"]
    assert requests.put(url.replace("partNumber=1", "partNumber=2"), data=b"x" * 4096).status_code == 403
    assert requests.put(url, data=b"x" * 4096).status_code == 200


def test_parts_of_the_wrong_size_are_refused_at_completion(lb, s3_storage, small_parts, big_file, sqa3d_split):
    upload = lb.post("uploads", json={**TARGET, "file_name": big_file.name, "size": 5000})
    for item in lb.post(f"uploads/{upload['id']}/urls", json={"parts": [1, 2]})["urls"]:
        assert requests.put(item["url"], data=b" " * 4096).status_code == 200
    with pytest.raises(ApiError, match="Parts of the wrong size: 2") as refused:
        lb.post(f"uploads/{upload['id']}/complete")
    assert refused.value.status == 409


def test_an_upload_that_never_completes_is_aborted_in_the_store(lb, s3_storage, small_parts, big_file, sqa3d_split):
    with pytest.raises(KeyboardInterrupt):
        lb_upload.upload_in_parts(lb, big_file, TARGET, quiet=True, stop_after_parts=2)
    [upload] = Upload.objects.all()
    client, bucket = storage.s3_client(), s3_storage["bucket"]
    def open_ids() -> set[str]:
        return {u["UploadId"] for u in client.list_multipart_uploads(Bucket=bucket).get("Uploads", [])}

    assert upload.storage_upload_id in open_ids()
    Upload.objects.update(expires_at=timezone.now() - timedelta(minutes=1))
    assert do_expire_uploads() == 1
    assert upload.storage_upload_id not in open_ids()
    submission = Submission.objects.get(pk=upload.submission_id)
    assert (submission.status, submission.quota) == ("cancelled", "refunded")


def test_the_worker_reads_the_uploaded_file_from_the_bucket(lb, s3_storage, small_parts, big_file, sqa3d_split,
                                                           sent_tasks):
    from evaluation_workers.storage import fetched_predictions

    submission = lb_upload.upload_in_parts(lb, big_file, TARGET, quiet=True)
    with fetched_predictions(sent_tasks[0]["kwargs"]["predictions_key"]) as path:
        assert hashlib.sha256(path.read_bytes()).hexdigest() == hashlib.sha256(big_file.read_bytes()).hexdigest()
    assert submission["file_size"] == big_file.stat().st_size


def test_a_small_file_sent_in_one_request_is_stored_in_the_bucket(lb, s3_storage, sqa3d_files, sqa3d_split,
                                                                 sent_tasks):
    submission = lb_upload.submit_file(lb, sqa3d_files["predictions"], TARGET, quiet=True)
    assert submission["status"] == "queued"
    stored = Submission.objects.get(pk=submission["id"])
    assert s3_object(stored.file_key) == sqa3d_files["predictions"].read_bytes()
    assert stored.predictions_sha256 == hashlib.sha256(sqa3d_files["predictions"].read_bytes()).hexdigest()
