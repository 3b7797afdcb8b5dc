"""A scoring worker's metrics (issue 26): its prefork pool's processes summed on EVAL_METRICS_PORT."""

from __future__ import annotations

import io
import time
import uuid

import pytest
import requests

from leaderboard.submissions import services
from leaderboard.submissions.models import Submission
from tests.conftest import free_port
from tests.leaderboard.conftest import scoring_worker
from tests.leaderboard.test_ops import samples

pytestmark = pytest.mark.live


@pytest.fixture
def prefork_pipeline(transactional_db, settings, redis_url, storage_dirs, tmp_path):
    """A scoring worker of two pool processes serving its metrics, and a site worker in this process."""
    from celery.contrib.testing.worker import start_worker

    from leaderboard.celery import app

    tag = uuid.uuid4().hex[:8]
    settings.SITE_QUEUE, settings.EVAL_QUEUE_CPU, settings.EVAL_GPU_TRACKS = f"site-wm{tag}", f"eval-cpu-wm{tag}", []
    settings.VALIDATE_AT_UPLOAD_MAX_BYTES = 0  # the worker finds the bad file, so that it reports it
    settings.QUOTA_IN_FLIGHT = settings.QUOTA_PER_DAY = 10
    port = free_port()
    with scoring_worker(redis_url, storage_dirs, settings.EVAL_QUEUE_CPU, tmp_path / "worker.log", pool="prefork",
                        EVAL_CONCURRENCY="2", EVAL_METRICS_PORT=str(port), EVAL_TRACKS="sqa3d"):
        app.conf.CELERY_BROKER_URL = app.conf.broker_url = redis_url
        with start_worker(app, pool="solo", perform_ping_check=False, queues=[settings.SITE_QUEUE],
                          shutdown_timeout=20):
            yield f"http://127.0.0.1:{port}/metrics"


def test_the_scoring_duration_of_every_pool_process_is_served_per_track_and_outcome(
        prefork_pipeline, owner, sqa3d_split, sqa3d_files):
    files = [sqa3d_files["predictions"].read_bytes()] * 3 + [b'[{"question_id": "x", "answer": 1}]']
    made = [services.check_create_submission(user=owner, track="sqa3d", split="test", method_name=f"M{i}",
                                             file=io.BytesIO(content), file_name="p.json").pk
            for i, content in enumerate(files)]
    deadline = time.monotonic() + 120
    while Submission.objects.filter(pk__in=made, status__in=["queued", "running", "submitted"]).exists():
        assert time.monotonic() < deadline, list(Submission.objects.filter(pk__in=made).values("status"))
        time.sleep(0.3)
    assert sorted(Submission.objects.filter(pk__in=made).values_list("status", flat=True)) == \
        ["failed", "finished", "finished", "finished"]
    scraped = samples(requests.get(prefork_pipeline, timeout=10).text)
    count = {outcome: scraped.get(("eval_scoring_duration_seconds_count",
                                   (("outcome", outcome), ("track", "sqa3d"))), 0.0)
             for outcome in ("scored", "invalid_input", "platform_error")}
    assert count == {"scored": 3.0, "invalid_input": 1.0, "platform_error": 0.0}
    assert scraped[("eval_scoring_duration_seconds_sum", (("outcome", "scored"), ("track", "sqa3d")))] > 0
