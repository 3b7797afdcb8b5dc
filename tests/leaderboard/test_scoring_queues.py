"""Queues carry the scorer version; bulk re-scoring waits behind new work; retention deletes what it says.

Real Redis, real scoring worker processes, a site worker in this process.
"""

from __future__ import annotations

import io
import sys
import time
import uuid
from datetime import timedelta

import pytest
from django.utils import timezone

from evaluation_workers.tracks import get_track
from tests.leaderboard.conftest import scoring_worker
from tests.leaderboard.test_multihost import site_worker, wait_done

pytestmark = pytest.mark.live

# A worker whose sqa3d scorer is another version: the same checkout with TRACK replaced.
OTHER_VERSION = "0.0.0-other"
OTHER_WORKER = [sys.executable, "-c", (
    "import dataclasses, runpy, sys; import evaluation_workers.tracks.sqa3d as m; "
    f"m.TRACK = dataclasses.replace(m.TRACK, scorer_version={OTHER_VERSION!r}); "
    "runpy.run_module('evaluation_workers', run_name='__main__')")]


@pytest.fixture
def pipeline(transactional_db, settings, redis_url):
    tag = uuid.uuid4().hex[:6]
    settings.SITE_QUEUE, settings.EVAL_QUEUE_CPU, settings.EVAL_GPU_TRACKS = f"site-{tag}", f"eval-{tag}", []
    settings.QUOTA_IN_FLIGHT = settings.QUOTA_PER_DAY = 50
    with site_worker(redis_url, settings.SITE_QUEUE):
        yield settings.EVAL_QUEUE_CPU


def submit(owner, sqa3d_files, method="QNet"):
    from leaderboard.submissions import services

    return services.check_create_submission(user=owner, track="sqa3d", split="test", method_name=method,
                                            file=io.BytesIO(sqa3d_files["predictions"].read_bytes()),
                                            file_name="predictions.json")


def test_a_worker_with_another_scorer_version_does_not_score_and_the_desk_says_what_waits(
        pipeline, redis_url, storage_dirs, tmp_path, owner, maintainer, client, sqa3d_split, sqa3d_files):
    from leaderboard.submissions.models import Result, Submission

    version = get_track("sqa3d").scorer_version
    with scoring_worker(redis_url, storage_dirs, pipeline, tmp_path / "other.log", name="other@%h",
                        command=OTHER_WORKER, EVAL_TRACKS="sqa3d", EVAL_ANNOUNCE_SECONDS="1"):
        sub = submit(owner, sqa3d_files)
        assert sub.queue == f"{pipeline}-sqa3d-v{version}"
        time.sleep(4)
        assert Submission.objects.get(pk=sub.pk).status == "queued"
        client.force_login(maintainer)
        health = client.get("/moderation/health/").content.decode()
        assert f"sqa3d {OTHER_VERSION}" in health and f"{pipeline}-sqa3d-v{OTHER_VERSION}" in health
        desk = client.get("/moderation/").content.decode()
        assert "Waiting for a worker that does not run" in desk and sub.queue in desk
        with scoring_worker(redis_url, storage_dirs, pipeline, tmp_path / "match.log", name="match@%h",
                            EVAL_TRACKS="sqa3d"):
            [done] = wait_done([sub.pk])
    assert done.status == "finished", done.status_detail
    result = Result.objects.get(submission=done)
    assert result.scorer_version == version and result.worker.startswith("match@")
    assert "Scored submission" not in (tmp_path / "other.log").read_text()
    assert "Waiting for a worker" not in client.get("/moderation/").content.decode()


def test_bulk_rescoring_of_a_split_does_not_delay_a_new_submission(
        pipeline, redis_url, storage_dirs, tmp_path, owner, maintainer, sqa3d_split, sqa3d_files):
    from leaderboard.moderation.services import check_rescore_split
    from leaderboard.submissions.models import Submission

    holds = tmp_path / "faults"
    holds.mkdir()
    with scoring_worker(redis_url, storage_dirs, pipeline, tmp_path / "worker.log", EVAL_TRACKS="sqa3d",
                        EVAL_FAULT_DIR=str(holds)):
        old = [submit(owner, sqa3d_files, method=f"Old{i}").pk for i in range(5)]
        wait_done(old)
        (holds / "hold-scoring").write_text("1.0")  # every attempt now takes a second
        assert check_rescore_split(maintainer, sqa3d_split, "scorer fix") == 5
        assert Submission.objects.filter(pk__in=old, queue__endswith="-bulk").count() == 5
        deadline = time.monotonic() + 30
        while not Submission.objects.filter(pk__in=old, status="running").exists():
            assert time.monotonic() < deadline
            time.sleep(0.05)
        new = submit(owner, sqa3d_files, method="New")
        assert not new.queue.endswith("-bulk")
        [new] = wait_done([new.pk], timeout=60)
        bulk = wait_done(old, timeout=60)
    assert new.status == "finished"
    # Only the bulk attempt already running when it arrived went before it; four waited behind it.
    started_before = [s.pk for s in bulk if s.started_at < new.started_at]
    assert len(started_before) == 1, (started_before, new.started_at, [s.started_at for s in bulk])
    assert sum(s.finished_at > new.finished_at for s in bulk) == 4


def test_retention_deletes_exactly_what_the_policy_says_and_kept_files_still_rescore(
        live_pipeline, settings, owner, maintainer, sqa3d_split, sqa3d_files):
    from leaderboard.lib import storage
    from leaderboard.moderation.services import ModerationError, check_rescore
    from leaderboard.submissions import retention
    from leaderboard.submissions.models import Result, Submission

    settings.QUOTA_IN_FLIGHT = settings.QUOTA_PER_DAY = 50
    kept = [submit(owner, sqa3d_files, method="Kept") for _ in range(4)]
    broken = [submit(owner, sqa3d_files, method="Broken") for _ in range(2)]
    recent = submit(owner, sqa3d_files, method="Recent")
    wait_done([s.pk for s in [*kept, *broken, recent]])
    # The older Broken one failed without a score; Kept's first is published.
    Result.objects.filter(submission_id=broken[0].pk).delete()
    Submission.objects.filter(pk=broken[0].pk).update(status="failed")
    Submission.objects.filter(pk=kept[0].pk).update(is_published=True)
    for i, s in enumerate([*kept, *broken]):  # in upload order, all older than the policy's days
        Submission.objects.filter(pk=s.pk).update(created_at=timezone.now() - timedelta(days=100 - i))
    Submission.objects.filter(pk=recent.pk).update(created_at=timezone.now() - timedelta(days=3))

    assert retention.do_apply_retention() == 0  # off by default
    settings.RETENTION_DAYS, settings.RETENTION_KEEP_LAST = 30, 1
    # Scored files stay while a re-score may need them: only the unscored, not-latest Broken one goes.
    assert retention.do_apply_retention() == 1
    settings.RETENTION_DELETE_SCORED = True
    # Now the scored ones too, except Kept's published and latest ones, and anything newer than 30 days.
    assert retention.do_apply_retention() == 2
    expected = sorted([broken[0].pk, kept[1].pk, kept[2].pk])
    assert sorted(Submission.objects.filter(file_deleted_at__isnull=False).values_list("pk", flat=True)) == expected
    for s in Submission.objects.all():
        assert storage.path_for(s.file_key).exists() == (s.pk not in expected)
    assert retention.do_apply_retention() == 0

    with pytest.raises(ModerationError, match="predictions file was deleted on .* by the retention policy"):
        check_rescore(maintainer, Submission.objects.get(pk=kept[1].pk), "again")
    check_rescore(maintainer, Submission.objects.get(pk=kept[3].pk), "again")
    [again] = wait_done([kept[3].pk])
    assert again.status == "finished" and again.attempt == 2


def test_a_bulk_attempt_sent_again_stays_bulk(settings, owner, sqa3d_split, sqa3d_files, sent_tasks):
    from leaderboard.submissions import lifecycle

    sub = submit(owner, sqa3d_files)
    lifecycle.do_transition(sub.pk, "finished")
    bulk = lifecycle.do_enqueue(sub.pk, bulk=True)
    again = lifecycle.do_enqueue(sub.pk, requeue=True)
    assert bulk.queue.endswith("-bulk") and again.queue == bulk.queue
