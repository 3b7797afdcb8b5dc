"""Labels in a bucket: the site only writes it (in load_labels); workers fetch, verify and share a cache."""

from __future__ import annotations

import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from tests.leaderboard.conftest import ROOT, s3_bucket, scoring_worker
from tests.leaderboard.test_multihost import site_worker, submit, wait_done

pytestmark = pytest.mark.live


@pytest.fixture
def labels_bucket(settings, s3_storage):
    settings.LABELS_S3_BUCKET, settings.LABELS_S3_PREFIX = s3_bucket(s3_storage, "labels"), f"t{uuid.uuid4().hex[:6]}/"
    return settings.LABELS_S3_PREFIX


@pytest.fixture
def s3_calls(monkeypatch):
    """Every S3 call this process makes: (operation, bucket, inside load_labels)."""
    import botocore.client

    from leaderboard.benchmarks import services

    calls, inside = [], []
    real_call, real_load = botocore.client.BaseClient._make_api_call, services.do_load_labels

    def record(self, operation, params):
        calls.append((operation, params.get("Bucket"), bool(inside)))
        return real_call(self, operation, params)

    def load(*args, **kwargs):
        inside.append(True)
        try:
            return real_load(*args, **kwargs)
        finally:
            inside.pop()

    monkeypatch.setattr(botocore.client.BaseClient, "_make_api_call", record)
    monkeypatch.setattr(services, "do_load_labels", load)
    return calls


def test_the_site_never_reads_the_labels_bucket_and_writes_it_only_in_load_labels(
        transactional_db, settings, redis_url, storage_dirs, tmp_path, s3_storage, labels_bucket, s3_calls,
        owner, maintainer, client, sqa3d_files):
    from leaderboard.benchmarks import services
    from leaderboard.benchmarks.bundle_apply import load_bundled_benchmarks
    from leaderboard.benchmarks.models import Split

    tag = uuid.uuid4().hex[:6]
    settings.LABELS_DIR = tmp_path / "site-labels"  # other tests loaded these labels into the shared folder
    settings.SITE_QUEUE, settings.EVAL_QUEUE_CPU, settings.EVAL_GPU_TRACKS = f"site-{tag}", f"eval-{tag}", []
    load_bundled_benchmarks()
    label_set, _ = services.do_load_labels(Split.objects.get(benchmark__track="sqa3d", name="test"),
                                           sqa3d_files["labels"])
    assert not Path(settings.LABELS_DIR, label_set.storage_key).exists()
    with site_worker(redis_url, settings.SITE_QUEUE), scoring_worker(
            redis_url, storage_dirs, settings.EVAL_QUEUE_CPU, tmp_path / "worker.log", EVAL_TRACKS="sqa3d",
            EVAL_LABELS_S3_BUCKET="labels", EVAL_LABELS_S3_PREFIX=labels_bucket,
            EVAL_LABELS_CACHE_DIR=str(tmp_path / "cache"), EVAL_LABELS_DIR=str(tmp_path / "nowhere")):
        sub = submit(owner, "sqa3d", "test", sqa3d_files["predictions"])
        [done] = wait_done([sub.pk])
        assert done.status == "finished", done.status_detail
        client.force_login(owner)
        for url in ("/benchmarks/sqa3d/", f"/submissions/{sub.pk}/", "/api/v1/leaderboards/sqa3d?split=test"):
            assert client.get(url).status_code == 200, url
        client.force_login(maintainer)
        for url in ("/moderation/", "/moderation/health/", f"/moderation/submissions/{sub.pk}/"):
            assert client.get(url).status_code == 200, url
    on_labels = [(op, inside) for op, bucket, inside in s3_calls if bucket == "labels"]
    assert on_labels and all(inside for _, inside in on_labels), on_labels
    assert {op for op, _ in on_labels} <= {"PutObject", "CreateMultipartUpload", "UploadPart",
                                          "CompleteMultipartUpload"}, on_labels
    assert any(bucket == "predictions" for _, bucket, _ in s3_calls)  # the recorder did see the site's calls
    assert "Fetched labels" in (tmp_path / "worker.log").read_text()


FETCH = """
import logging, sys
logging.basicConfig(level=logging.INFO, format="%(message)s")
from evaluation_workers.labels_cache import labels_for
with labels_for(sys.argv[1]) as path:
    print(sorted(p.name for p in path.iterdir()))
"""


def test_worker_processes_on_one_host_fetch_a_version_once_and_evict_the_least_recently_used(
        db, settings, tmp_path, s3_storage, labels_bucket, sqa3d_files):
    import os
    import shutil

    from evaluation_workers.results import sha256_tree
    from evaluation_workers.synthetic import sqa3d
    from leaderboard.lib import labels_store

    versions = []
    for seed in (1, 2):
        folder = tmp_path / f"labels-{seed}"
        sqa3d.write_labels(folder, 50, seed=seed, split="test")
        key = f"sqa3d/test/{sha256_tree(folder)}"
        labels_store.upload_version(folder, key)
        versions.append(key)
    env = {**os.environ, "EVAL_LABELS_S3_BUCKET": "labels", "EVAL_LABELS_S3_PREFIX": labels_bucket,
           "EVAL_LABELS_CACHE_DIR": str(tmp_path / "cache"), "PYTHONPATH": str(ROOT)}
    procs = [subprocess.Popen([sys.executable, "-c", FETCH, versions[0]], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(3)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert all(p.returncode == 0 for p in procs), outs
    assert len({out for out, _ in outs}) == 1  # all three saw the same, complete folder
    assert sum("Fetched labels" in err for _, err in outs) == 1
    # A second version past a cap that holds one: the first (least recently used) goes.
    size = sum(p.stat().st_size for p in (tmp_path / "cache" / versions[0].rsplit("/", 1)[1]).rglob("*"))
    env["EVAL_LABELS_CACHE_MAX_BYTES"] = str(size + size // 2)
    second = subprocess.run([sys.executable, "-c", FETCH, versions[1]], env=env, capture_output=True, text=True,
                            timeout=120)
    assert second.returncode == 0, second.stderr
    assert "Evicted labels" in second.stderr
    kept = sorted(p.name for p in (tmp_path / "cache").iterdir() if p.is_dir())
    assert kept == [versions[1].rsplit("/", 1)[1]]
    # A corrupted object in the bucket is refused, and nothing half-fetched is left behind.
    shutil.rmtree(tmp_path / "cache")
    bad = Path(s3_storage["root"], "labels", labels_bucket.rstrip("/"), versions[0])
    victim = next(p for p in bad.rglob("*") if p.is_file())
    victim.write_bytes(victim.read_bytes() + b" ")
    refused = subprocess.run([sys.executable, "-c", FETCH, versions[0]], env=env, capture_output=True, text=True,
                             timeout=120)
    assert refused.returncode != 0 and "differs from the index" in refused.stderr
    assert [p.name for p in (tmp_path / "cache").iterdir() if p.is_dir()] == []
