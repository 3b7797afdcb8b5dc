"""The scored bytes are the accepted bytes, from the upload to the submission's page: a stored file that
changed after it was accepted gets no score and no format rejection; it fails as the platform's fault,
refunded. The site sends the checksum it recorded; the scoring task (in this process) checks it; its
reports are recorded as the site worker records them."""

from __future__ import annotations

import io
import logging
from typing import Any

import pytest

from evaluation_workers import contracts
from evaluation_workers.synthetic import sqa3d
from evaluation_workers.worker import tasks
from leaderboard.lib import storage
from leaderboard.submissions import lifecycle, services
from leaderboard.submissions.models import Submission

RECORD = {contracts.RECORD_PROGRESS: lifecycle.record_progress, contracts.RECORD_HEARTBEAT: lifecycle.record_heartbeat,
          contracts.RECORD_RESULT: lifecycle.record_result, contracts.RECORD_FAILURE: lifecycle.record_failure}


@pytest.fixture
def scoring_here(monkeypatch, storage_dirs) -> list[tuple[str, dict[str, Any]]]:
    """The scoring task runs in this process on the site's folders; its reports are kept in order."""
    monkeypatch.setenv("EVAL_UPLOADS_DIR", str(storage_dirs["uploads"]))
    monkeypatch.setenv("EVAL_LABELS_DIR", str(storage_dirs["labels"]))
    monkeypatch.setattr(tasks.app.conf, "broker_url", "memory://")  # no attempt keys to read
    sent: list[tuple[str, dict[str, Any]]] = []
    monkeypatch.setattr(tasks.app, "send_task", lambda name, kwargs, queue, **options: sent.append((name, kwargs)))
    return sent


def edit(path, sqa3d_files) -> None:
    """Other answers, still a valid file (it would score about 0.3 instead of 0.6)."""
    sqa3d.write_predictions(sqa3d_files["labels"], path, accuracy=0.3, seed=11)


def truncate(path, sqa3d_files) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


@pytest.mark.parametrize("change", [edit, truncate])
def test_a_stored_file_changed_after_acceptance_fails_as_the_platforms_fault_and_is_refunded(
        change, owner, sqa3d_split, sqa3d_files, sent_tasks, scoring_here, django_capture_on_commit_callbacks,
        caplog):
    with django_capture_on_commit_callbacks(execute=True):
        submission = services.check_create_submission(
            user=owner, track="sqa3d", split="test", method_name="MyNet", file_name="predictions.json",
            file=io.BytesIO(sqa3d_files["predictions"].read_bytes()))
    [request] = [t["kwargs"] for t in sent_tasks if t["name"] == contracts.SCORE_SUBMISSION]
    assert request["predictions_sha256"] == submission.predictions_sha256 != ""

    change(storage.path_for(submission.file_key), sqa3d_files)
    tasks.run_score(request)
    with caplog.at_level(logging.ERROR, logger="leaderboard.submissions.lifecycle"):
        for name, report in scoring_here:
            RECORD[name](**report)

    assert contracts.RECORD_RESULT not in [name for name, _ in scoring_here]
    submission.refresh_from_db()
    assert (submission.status, submission.failure_kind, submission.quota) == ("failed", "platform_error", "refunded")
    assert submission.status_detail == tasks.CHANGED and not submission.results.exists()
    assert f"Submission {submission.pk} attempt 1 failed as a platform error" in caplog.text


def test_a_submission_whose_file_the_site_never_read_is_scored_without_a_checksum(
        owner, sqa3d_split, sqa3d_files, sent_tasks, scoring_here, django_capture_on_commit_callbacks):
    """Parts joined by the object store leave no checksum at acceptance: the request has none, and the
    first result records the file's."""
    with django_capture_on_commit_callbacks(execute=True):
        submission = services.check_create_submission(
            user=owner, track="sqa3d", split="test", method_name="MyNet", file_name="predictions.json",
            file=io.BytesIO(sqa3d_files["predictions"].read_bytes()))
    accepted = submission.predictions_sha256
    Submission.objects.filter(pk=submission.pk).update(predictions_sha256="")
    sent_tasks.clear()
    assert lifecycle.do_send(submission.pk, submission.attempt)
    [request] = [t["kwargs"] for t in sent_tasks if t["name"] == contracts.SCORE_SUBMISSION]
    assert "predictions_sha256" not in request

    tasks.run_score(request)
    for name, report in scoring_here:
        RECORD[name](**report)
    submission.refresh_from_db()
    assert submission.status == "finished" and submission.predictions_sha256 == accepted
