"""Submissions from upload to result, with task dispatch recorded (no broker)."""

from __future__ import annotations

import io
import json

import pytest

from evaluation_workers import contracts
from evaluation_workers.tracks import get_track
from leaderboard.rankings.models import LeaderboardEntry
from leaderboard.submissions import lifecycle, services
from leaderboard.submissions.models import Result, Submission
from tests.leaderboard.conftest import describe_method


def create(owner, content: bytes, name: str = "predictions.json", method: str = "MyNet") -> Submission:
    return services.check_create_submission(user=owner, track="sqa3d", split="test", method_name=method,
                                            file=io.BytesIO(content), file_name=name)


def score_offline(sqa3d_files, path) -> dict:
    return get_track("sqa3d").score(sqa3d_files["labels"], path, lambda f, m="": None)


def test_it_queues_a_valid_upload_with_keys_not_data(owner, sqa3d_split, sqa3d_files, sent_tasks,
                                                     django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        submission = create(owner, sqa3d_files["predictions"].read_bytes())
    assert submission.status == Submission.Status.QUEUED
    assert submission.attempt == 1 and submission.labels.is_active
    [call] = sent_tasks
    assert call["name"] == contracts.SCORE_SUBMISSION
    assert call["queue"] == "eval-cpu-sqa3d-v" + get_track("sqa3d").scorer_version
    kwargs = call["kwargs"]
    assert kwargs == {"schema": 1, "submission_id": submission.pk, "attempt": 1, "track": "sqa3d",
                      "predictions_key": submission.file_key, "labels_key": submission.labels.storage_key,
                      "reply_queue": "site", "predictions_sha256": submission.predictions_sha256}


def test_it_sends_the_task_only_after_commit(owner, sqa3d_split, sqa3d_files, sent_tasks,
                                             django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        create(owner, sqa3d_files["predictions"].read_bytes())
    assert sent_tasks == [] and len(callbacks) == 1


def test_it_routes_gpu_tracks_to_the_gpu_queue(owner, sqa3d_split, sqa3d_files, sent_tasks, settings,
                                               django_capture_on_commit_callbacks):
    settings.EVAL_GPU_TRACKS = ["sqa3d"]
    with django_capture_on_commit_callbacks(execute=True):
        create(owner, sqa3d_files["predictions"].read_bytes())
    assert sent_tasks[0]["queue"] == "eval-gpu-sqa3d-v" + get_track("sqa3d").scorer_version


@pytest.mark.parametrize("content, name, message", [
    (b"", "p.json", "the file is empty (0 bytes)"),
    (b"not json at all", "p.json", "p.json"),
    (b'[{"question_id": 1, "answer": 3}]', "p.json", "answer"),
])
def test_it_fails_bad_uploads_with_a_specific_message(owner, sqa3d_split, sent_tasks, content, name, message):
    submission = create(owner, content, name=name)
    assert submission.status == Submission.Status.FAILED
    assert submission.failure_kind == Submission.FailureKind.INVALID_INPUT
    assert message in submission.status_detail
    assert sent_tasks == []


def test_it_refuses_a_file_over_the_tracks_size_limit_without_storing_it(owner, sqa3d_split, monkeypatch):
    from dataclasses import replace

    from leaderboard.benchmarks.models import Benchmark

    small = replace(get_track("sqa3d"), max_upload_bytes=1000)
    monkeypatch.setattr(Benchmark, "spec", property(lambda self: small))
    with pytest.raises(services.FileRefused, match=r"^predictions.json: expected at most 1,000 bytes for SQA3D, but got 5,002 bytes.$"):
        create(owner, b"[" + b" " * 5000 + b"]")
    assert not Submission.objects.exists()


def test_a_file_refused_for_its_name_makes_no_method_but_counts_as_rejected(owner, sqa3d_split, sent_tasks):
    """Issue 27: an upload refused for its extension left an empty method behind. It is refused before
    anything is stored: no submission, no method; the team's rejection cap still counts it."""
    from leaderboard.submissions import quotas
    from leaderboard.submissions.models import Method, RefusedUpload

    team = owner.teams.get(is_personal=True)
    with pytest.raises(services.FileRefused, match=r"^p.txt: expected a file ending in .json or .jsonl.$") as refused:
        create(owner, b"{}", name="p.txt", method="TypoNet")
    assert refused.value.status == 400 and refused.value.code == "invalid_file"
    assert not Method.objects.filter(name="TypoNet").exists() and not Submission.objects.exists()
    assert RefusedUpload.objects.get().method_name == "TypoNet"
    used = quotas.usage(team, sqa3d_split)
    assert (used.rejected_today, used.today, used.total) == (1, 0, 0)


def test_refused_files_spend_the_rejection_cap_like_invalid_ones(owner, sqa3d_split, sent_tasks, settings):
    settings.QUOTA_REJECTED_PER_DAY = 2
    create(owner, b"not json", name="p.json")  # refused by its content: a failed submission
    with pytest.raises(services.FileRefused):
        create(owner, b"{}", name="p.txt")
    with pytest.raises(services.QuotaExceeded, match="2 files rejected today"):
        create(owner, b"{}", name="q.txt")


def test_it_names_unknown_question_ids_without_revealing_answers(owner, sqa3d_split, sqa3d_files):
    submission = create(owner, json.dumps([{"question_id": 999999999, "answer": "left"}]).encode())
    assert submission.status == Submission.Status.FAILED
    assert "999999999" in submission.status_detail


def test_it_refuses_more_answers_than_the_split_has_questions_by_their_count(owner, sqa3d_split, sent_tasks):
    """Issue 26: counted before the file is parsed whole, in a child process (the 2.5-million-key file's
    memory is measured in tests/hostile/test_isolated_validation.py)."""
    submission = create(owner, json.dumps({str(q): "x" for q in range(10**6, 10**6 + 2_000)}).encode())
    assert submission.status == Submission.Status.FAILED
    assert submission.failure_kind == Submission.FailureKind.INVALID_INPUT
    assert submission.status_detail == ("predictions.json: Expected at most 300 answers (one per question of "
                                        "this split), but got more than 1,600 keys")
    assert sent_tasks == []


def test_a_file_too_costly_to_validate_at_upload_is_left_to_the_worker(owner, sqa3d_split, sent_tasks, settings,
                                                                      django_capture_on_commit_callbacks):
    settings.VALIDATE_AT_UPLOAD_MAX_MEMORY = 2**20  # the child cannot even read the file's 4 MiB
    with django_capture_on_commit_callbacks(execute=True):  # an unknown id, found by the worker
        submission = create(owner, json.dumps([{"question_id": 999999999, "answer": "x" * 4 * 2**20}]).encode())
    assert submission.status == Submission.Status.QUEUED
    assert len(sent_tasks) == 1


def test_it_records_a_result_and_ignores_stale_reports(owner, sqa3d_split, sqa3d_files, sent_tasks):
    submission = create(owner, sqa3d_files["predictions"].read_bytes())
    result = score_offline(sqa3d_files, sqa3d_files["predictions"])
    lifecycle.record_progress(submission_id=submission.pk, attempt=1, fraction=0.5, message="half")
    submission.refresh_from_db()
    assert (submission.status, submission.progress, submission.status_detail) == ("running", 0.5, "half")

    lifecycle.record_result(submission_id=submission.pk, attempt=1, result=result, seconds=0.1, device="cpu")
    submission.refresh_from_db()
    assert submission.status == "finished" and submission.progress == 1.0
    stored = Result.objects.get(submission=submission)
    assert stored.metrics == result["metrics"] and stored.labels_sha256 == sqa3d_split.active_labels.sha256

    # A late failure report of the same attempt cannot undo a finished result.
    lifecycle.record_failure(submission_id=submission.pk, attempt=1, kind="platform_error", message="x")
    submission.refresh_from_db()
    assert submission.status == "finished"


def test_rescoring_overwrites_the_same_scorer_version_and_keeps_older_ones(owner, sqa3d_split, sqa3d_files,
                                                                           sent_tasks):
    submission = create(owner, sqa3d_files["predictions"].read_bytes())
    result = score_offline(sqa3d_files, sqa3d_files["predictions"])
    lifecycle.record_result(submission_id=submission.pk, attempt=1, result=result)
    lifecycle.do_enqueue(submission.pk)  # re-score: attempt 2
    lifecycle.record_result(submission_id=submission.pk, attempt=1, result={**result, "scorer_version": "0.9"})
    assert Result.objects.filter(submission=submission).count() == 1, "attempt 1 is stale now"
    lifecycle.record_result(submission_id=submission.pk, attempt=2, result=result)
    assert Result.objects.filter(submission=submission).count() == 1
    lifecycle.do_enqueue(submission.pk)
    lifecycle.record_result(submission_id=submission.pk, attempt=3, result={**result, "scorer_version": "9.9.9"})
    assert sorted(Result.objects.filter(submission=submission).values_list("scorer_version", flat=True)) == \
        [result["scorer_version"], "9.9.9"]


def test_a_platform_failure_keeps_the_earlier_result(owner, sqa3d_split, sqa3d_files, sent_tasks):
    submission = create(owner, sqa3d_files["predictions"].read_bytes())
    result = score_offline(sqa3d_files, sqa3d_files["predictions"])
    lifecycle.record_result(submission_id=submission.pk, attempt=1, result=result)
    lifecycle.do_enqueue(submission.pk)
    lifecycle.record_failure(submission_id=submission.pk, attempt=2, kind="platform_error",
                            message="Internal evaluation error.")
    submission.refresh_from_db()
    assert submission.status == "failed" and submission.failure_kind == "platform_error"
    assert submission.results.get().metrics == result["metrics"]


def test_publishing_puts_one_row_per_method_on_the_leaderboard(owner, sqa3d_split, sqa3d_files, sent_tasks):
    result = score_offline(sqa3d_files, sqa3d_files["predictions"])
    first, second = (create(owner, sqa3d_files["predictions"].read_bytes()) for _ in range(2))
    for s in (first, second):
        lifecycle.record_result(submission_id=s.pk, attempt=1, result=result)
    with pytest.raises(services.SubmissionRejected):
        services.check_publish(owner, create(owner, b""))
    with pytest.raises(services.SubmissionRejected, match="Describe the method"):
        services.check_publish(owner, first)
    describe_method(first.method)
    services.check_publish(owner, first)
    services.check_publish(owner, second)
    [entry] = LeaderboardEntry.objects.filter(split=sqa3d_split, is_paper=False)
    assert entry.submission_id == second.pk
    assert entry.primary_score == result["metrics"]["EM"]
    assert entry.scores["What/EM"] == result["breakdown"]["What"]["EM"]
    services.check_publish(owner, second, publish=False)
    assert not LeaderboardEntry.objects.filter(split=sqa3d_split, is_paper=False).exists()


def test_a_cancelled_submission_ignores_late_worker_reports(owner, sqa3d_split, sqa3d_files, sent_tasks):
    submission = create(owner, sqa3d_files["predictions"].read_bytes())
    services.check_cancel(owner, submission)
    lifecycle.record_result(submission_id=submission.pk, attempt=1,
                           result=score_offline(sqa3d_files, sqa3d_files["predictions"]))
    submission.refresh_from_db()
    assert submission.status == "cancelled" and not submission.results.exists()


def test_a_split_without_labels_refuses_submissions_until_they_are_loaded(owner, db, sent_tasks, sqa3d_files):
    """Issue 27: it failed them as the platform's fault (``submission_failed``); it is not open yet."""
    from leaderboard.benchmarks.bundle_apply import load_bundled_benchmarks
    from leaderboard.benchmarks.models import Split
    from leaderboard.benchmarks.services import do_load_labels
    from leaderboard.submissions.models import Method

    load_bundled_benchmarks()
    with pytest.raises(services.LabelsNotLoaded) as refused:
        create(owner, sqa3d_files["predictions"].read_bytes())
    assert (refused.value.status, refused.value.code) == (409, "labels_not_loaded")
    assert str(refused.value) == ("sqa3d/test is not open yet (labels not loaded yet: opens when they are). "
                                  "No split of sqa3d takes submissions now.")
    assert not Submission.objects.exists() and not Method.objects.exists() and sent_tasks == []
    do_load_labels(Split.objects.get(benchmark__track="sqa3d", name="test"), sqa3d_files["labels"])
    assert create(owner, sqa3d_files["predictions"].read_bytes()).status == "queued"
