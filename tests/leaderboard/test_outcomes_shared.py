"""Per-unit outcomes shared by worker hosts through the outcomes bucket (``evaluation_workers.outcomes``).

One worker scores; another, with a folder of its own and only Redis and the S3 server in common,
runs the paired test and the deferred intervals from what the first kept. A worker without the
bucket finds nothing, and says so: the test answers "outcomes unavailable", the result says that
its intervals could not be computed. The site never touches the outcomes bucket.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from evaluation_workers import contracts
from evaluation_workers.worker import significance
from tests.leaderboard.conftest import describe_method, s3_bucket, scoring_worker
from tests.leaderboard.test_multihost import site_worker, submit, wait_done

pytestmark = pytest.mark.live


@pytest.fixture
def outcomes_bucket(s3_server: dict[str, str]) -> dict[str, str]:
    """The workers' settings for a prefix of their own in the ``outcomes`` bucket of the test S3 server."""
    return {"EVAL_OUTCOMES_S3_BUCKET": s3_bucket(s3_server, "outcomes"), "EVAL_OUTCOMES_S3_PREFIX": f"t{uuid.uuid4().hex[:6]}/",
            "EVAL_OUTCOMES_S3_ENDPOINT_URL": s3_server["endpoint"],
            "EVAL_OUTCOMES_S3_ACCESS_KEY_ID": s3_server["access_key"],
            "EVAL_OUTCOMES_S3_SECRET_ACCESS_KEY": s3_server["secret_key"]}


@pytest.fixture
def hosts(transactional_db, settings, tmp_path, storage_dirs):
    """Queues of this test; each "host" gets its own outcomes folder and log."""
    tag = uuid.uuid4().hex[:6]
    settings.SITE_QUEUE, settings.EVAL_QUEUE_CPU, settings.EVAL_GPU_TRACKS = f"site-{tag}", f"eval-{tag}", []
    settings.QUOTA_IN_FLIGHT = 10

    def host(name: str, **env: str) -> Any:
        folder = tmp_path / f"{name}-outcomes"
        return scoring_worker(settings.CELERY_BROKER_URL, storage_dirs, settings.EVAL_QUEUE_CPU,
                              tmp_path / f"{name}.log", name=f"{name}-{tag}@%h", EVAL_TRACKS="sqa3d",
                              EVAL_OUTCOMES_DIR=str(folder), EVAL_SITE_QUEUE=settings.SITE_QUEUE, **env)
    return host


def scored(owner: Any, sqa3d_files: dict[str, Path], tmp_path: Path, name: str, flip: int) -> Any:
    """An SQA3D submission of the synthetic predictions with ``flip`` answers made wrong."""
    import json

    answers = json.loads(sqa3d_files["predictions"].read_text())
    for row in answers[:flip]:
        row["answer"] = "definitely not the answer"
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(answers))
    return submit(owner, "sqa3d", "test", path, method=name)


def publish(owner: Any, submission: Any) -> None:
    from leaderboard.submissions import services

    describe_method(submission.method)
    services.check_publish(owner, submission)


def wait_for(condition: Any, what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.2)


def kept_in_bucket(s3_server: dict[str, str], bucket: dict[str, str], key: str) -> dict[str, np.ndarray]:
    path = Path(s3_server["root"], "outcomes", bucket["EVAL_OUTCOMES_S3_PREFIX"].rstrip("/"), key)
    with np.load(path) as data:
        return {k: data[k] for k in data.files}


def test_one_host_scores_and_another_runs_the_paired_test_and_the_deferred_intervals(
        hosts, redis_url, settings, tmp_path, owner, sqa3d_split, sqa3d_files, s3_server, outcomes_bucket):
    from leaderboard.rankings.models import PairedTest
    from leaderboard.submissions import sweeper
    from leaderboard.submissions.models import Result

    with site_worker(redis_url, settings.SITE_QUEUE):
        with hosts("a", **outcomes_bucket):
            subs = [scored(owner, sqa3d_files, tmp_path, "Better", 0), scored(owner, sqa3d_files, tmp_path, "Worse", 15)]
            done = wait_done([s.pk for s in subs])
        assert [s.status for s in done] == ["finished", "finished"], [s.status_detail for s in done]
        results = [Result.objects.get(submission=s) for s in done]
        keys = [contracts.outcomes_key("sqa3d", r.labels_sha256, r.predictions_sha256, r.scorer_version)
                for r in results]
        kept = [kept_in_bucket(s3_server, outcomes_bucket, key) for key in keys]  # in the bucket, and nowhere else
        assert not any((tmp_path / "a-outcomes").rglob("*.npz"))

        # Host a is gone. Host b, with an empty folder of its own, answers the test and the intervals.
        inline = {"intervals": results[0].intervals, "bootstrap": results[0].bootstrap}
        Result.objects.filter(pk=results[0].pk).update(
            intervals={}, bootstrap={"deferred": True, "resamples": inline["bootstrap"]["resamples"], "unit": "scene"})
        with hosts("b", **outcomes_bucket):
            for sub in done:
                publish(owner, sub)
            wait_for(lambda: PairedTest.objects.filter(computed_at__isnull=False).exists(), "no paired test answer")
            assert sweeper.do_ask_intervals(Result.objects.select_related("submission__split__benchmark")
                                            .get(pk=results[0].pk))
            wait_for(lambda: not Result.objects.get(pk=results[0].pk).bootstrap.get("deferred"), "no intervals")
        assert not any((tmp_path / "b-outcomes").rglob("*.npz"))
        b_log = (tmp_path / "b.log").read_text()
        assert "Paired test" not in b_log and "No intervals" not in b_log, b_log[-2000:]

    test = PairedTest.objects.get()
    assert test.error == "" and test.resamples == 1000
    a_first = test.result_a_id == results[0].pk
    want = significance.compare("sqa3d", *(kept if a_first else kept[::-1]))
    assert test.findings["EM"]["p_value"] == pytest.approx(want["findings"]["EM"]["p_value"])
    assert test.findings["EM"]["difference"] == pytest.approx(want["findings"]["EM"]["difference"])
    again = Result.objects.get(pk=results[0].pk)
    assert again.intervals == inline["intervals"] and again.bootstrap == inline["bootstrap"]
    assert again.warnings == results[0].warnings


def test_a_host_without_the_shared_store_says_the_outcomes_are_missing(
        hosts, redis_url, settings, tmp_path, owner, sqa3d_split, sqa3d_files, s3_server, outcomes_bucket):
    """What every host did before the bucket: a folder of its own. Nothing is dropped silently."""
    from leaderboard.rankings.models import PairedTest
    from leaderboard.submissions import sweeper
    from leaderboard.submissions.models import Result

    with site_worker(redis_url, settings.SITE_QUEUE):
        with hosts("a"):
            subs = [scored(owner, sqa3d_files, tmp_path, "Better", 0), scored(owner, sqa3d_files, tmp_path, "Worse", 15)]
            done = wait_done([s.pk for s in subs])
        assert list((tmp_path / "a-outcomes").rglob("*.npz")), "kept in host a's own folder"
        first = Result.objects.get(submission=done[0])
        Result.objects.filter(pk=first.pk).update(intervals={}, bootstrap={"deferred": True, "resamples": 1000,
                                                                           "unit": "scene"})
        with hosts("b"):
            for sub in done:
                publish(owner, sub)
            wait_for(lambda: PairedTest.objects.filter(computed_at__isnull=False).exists(), "no paired test answer")
            assert sweeper.do_ask_intervals(Result.objects.select_related("submission__split__benchmark")
                                            .get(pk=first.pk))
            wait_for(lambda: not Result.objects.get(pk=first.pk).bootstrap.get("deferred"), "no answer on intervals")
    assert PairedTest.objects.get().error == "outcomes unavailable"
    failed = Result.objects.get(pk=first.pk)
    assert failed.intervals == {} and failed.bootstrap["unavailable"] == \
        "the per-unit outcomes of this result are no longer kept"
    assert any(w.startswith("No 95 % intervals: they could not be computed") for w in failed.warnings)


def test_the_bucket_keeps_outcomes_whole_prunes_what_is_not_wanted_and_fails_loudly_when_away(
        s3_server, outcomes_bucket, monkeypatch, tmp_path):
    from evaluation_workers import outcomes

    for name, value in outcomes_bucket.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("EVAL_OUTCOMES_DIR", str(tmp_path / "never"))
    kept = {"em": np.array([True, False]), "material": {"unit": np.array([0, 70_000])}}
    for key in ("sqa3d/l/wanted-v1.npz", "sqa3d/l/old-v1.npz", "openscan/l/old-v1.npz"):
        outcomes.save(key, kept)
    back = outcomes.load("sqa3d/l/old-v1.npz")
    assert back is not None and back["material"]["unit"].tolist() == [0, 70_000]
    assert outcomes.load("sqa3d/l/none-v1.npz") is None
    assert outcomes.where() == f"s3://outcomes/{outcomes_bucket['EVAL_OUTCOMES_S3_PREFIX']}"
    assert not (tmp_path / "never").exists()

    listed = time.time() + 2  # the objects above are older than the site's list
    assert outcomes.prune("sqa3d/", {"sqa3d/l/wanted-v1.npz"}, listed) == 1
    assert outcomes.load("sqa3d/l/old-v1.npz") is None
    assert outcomes.load("sqa3d/l/wanted-v1.npz") is not None and outcomes.load("openscan/l/old-v1.npz") is not None
    assert outcomes.prune("sqa3d/", set(), time.time() - 3600) == 0, "written within the grace: kept"

    monkeypatch.setenv("EVAL_OUTCOMES_S3_BUCKET", "no-such-bucket")  # refused by the store, not unreachable
    with pytest.raises(outcomes.StoreError):
        outcomes.save("sqa3d/l/more-v1.npz", kept)
    monkeypatch.setenv("EVAL_OUTCOMES_S3_BUCKET", "outcomes")
    monkeypatch.setenv("EVAL_OUTCOMES_S3_ENDPOINT_URL", "http://127.0.0.1:1")
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")  # boto3 would retry a refused connection for 8 s
    with pytest.raises(outcomes.StoreError):
        outcomes.load("sqa3d/l/wanted-v1.npz")
    with pytest.raises(outcomes.StoreError):
        outcomes.save("sqa3d/l/more-v1.npz", kept)
