"""Site fixtures: isolated storage, users (owner/member/outsider/maintainer), an
SQA3D split with synthetic labels, and the real pipeline (Redis + workers)."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import _reachable, free_port, stop

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def storage_dirs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("storage")
    return {"uploads": base / "uploads", "labels": base / "labels", "outcomes": base / "outcomes"}


@pytest.fixture(autouse=True)
def _isolated_storage(settings: Any, storage_dirs: dict[str, Path], redis_url: str) -> None:
    settings.UPLOADS_DIR = storage_dirs["uploads"]
    settings.LABELS_DIR = storage_dirs["labels"]
    # What the site notes in the broker beside Celery's messages goes to the test session's Redis.
    settings.CELERY_BROKER_URL = redis_url


def _user(django_user_model: Any, username: str, **extra: Any) -> Any:
    from leaderboard.accounts.services import personal_team

    user = django_user_model.objects.create_user(username, password="correct horse battery", **extra)
    personal_team(user)
    return user


@pytest.fixture
def owner(db: None, django_user_model: Any) -> Any:
    return _user(django_user_model, "alice")


@pytest.fixture
def member(owner: Any, django_user_model: Any) -> Any:
    """A second member of the owner's personal team."""
    from leaderboard.accounts.models import Membership
    from leaderboard.accounts.services import personal_team

    user = _user(django_user_model, "bob")
    Membership.objects.create(team=personal_team(owner), user=user)
    return user


@pytest.fixture
def outsider(db: None, django_user_model: Any) -> Any:
    return _user(django_user_model, "charlie")


@pytest.fixture
def maintainer(db: None, django_user_model: Any) -> Any:
    return _user(django_user_model, "mallory", is_staff=True)


@pytest.fixture
def track_maintainer(db: None, django_user_model: Any) -> Any:
    """A member of the group ``maintainers:sqa3d`` (not staff): maintains that track only."""
    from django.contrib.auth.models import Group

    user = _user(django_user_model, "trackie")
    group, _ = Group.objects.get_or_create(name="maintainers:sqa3d")
    user.groups.add(group)
    return user


@pytest.fixture(scope="session")
def sqa3d_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Synthetic SQA3D labels (300 questions) and predictions of 60 % exact match."""
    from evaluation_workers.synthetic import sqa3d

    base = tmp_path_factory.mktemp("sqa3d")
    sqa3d.write_labels(base / "labels", 300, seed=1, split="test")
    predictions = base / "predictions.json"
    sqa3d.write_predictions(base / "labels", predictions, accuracy=0.6, seed=2)
    return {"labels": base / "labels", "predictions": predictions}


@pytest.fixture
def sqa3d_split(db: None, sqa3d_files: dict[str, Path]) -> Any:
    from leaderboard.benchmarks.bundle_apply import load_bundled_benchmarks
    from leaderboard.benchmarks.models import Split
    from leaderboard.benchmarks.services import do_load_labels

    load_bundled_benchmarks()
    split = Split.objects.select_related("benchmark").get(benchmark__track="sqa3d", name="test")
    do_load_labels(split, sqa3d_files["labels"])
    return split


@pytest.fixture
def error_track(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """The fixture plugin's ``example-error`` track (lower is better, in cm) installed in this process."""
    from tests.leaderboard.metric_tracks import installed_error_track

    yield from installed_error_track(monkeypatch)


@pytest.fixture
def sent_tasks(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """Replace the site's task dispatch with a recorder (narrow unit tests only)."""
    from leaderboard.celery import app

    calls: list[dict[str, Any]] = []
    monkeypatch.setattr(app, "send_task", lambda name, **kw: calls.append({"name": name, **kw}))
    return calls


# The real pipeline: a Redis server, a scoring worker process, a site worker thread.


@pytest.fixture(autouse=True)
def page_cache(settings: Any, redis_url: str) -> str:
    """Each test caches pages in the session's Redis under a key prefix of its own, so
    that no test sees another's pages (the database is rolled back, Redis is not)."""
    from leaderboard.lib import pagecache

    prefix = f"test-{uuid.uuid4().hex[:12]}"
    settings.CACHES = {"default": {**settings.CACHES["default"], "LOCATION": redis_url, "KEY_PREFIX": prefix}}
    pagecache.reset_after_outage()
    return prefix


@pytest.fixture(scope="session")
def queues() -> dict[str, str]:
    """Queue names of this test session, so parallel runs on one Redis never meet."""
    tag = uuid.uuid4().hex[:8]
    return {"site": f"site-test-{tag}", "eval": f"eval-cpu-test-{tag}"}


@contextlib.contextmanager
def scoring_worker(redis_url: str, storage_dirs: dict[str, Path], queue: str, log: Path, *,
                   name: str | None = None, command: list[str] | None = None, pool: str = "solo",
                   **env_extra: str) -> Iterator[subprocess.Popen[bytes]]:
    """A real scoring worker process (``python -m evaluation_workers worker``) serving every track's
    queues under the base name ``queue`` (the site's ``EVAL_QUEUE_CPU``), without the site's
    settings; ``env_extra`` adds EVAL_* variables (e.g. S3, ``EVAL_TRACKS``). ``name`` is its node
    name; ``command`` replaces ``python -m evaluation_workers`` (a wrapper, another namespace); ``pool``
    is Celery's pool (``prefork`` scores in child processes, ``EVAL_CONCURRENCY`` of them)."""
    env = {**os.environ, "REDIS_URL": redis_url, "EVAL_UPLOADS_DIR": str(storage_dirs["uploads"]),
           "EVAL_LABELS_DIR": str(storage_dirs["labels"]), "EVAL_OUTCOMES_DIR": str(storage_dirs.get("outcomes") or Path(storage_dirs["labels"]).parent / "outcomes"),
           "EVAL_DEVICE": "cpu", "EVAL_QUEUE_CPU": queue,
           "EVAL_QUEUE_DEVICES": "cpu", **env_extra}
    env.pop("DJANGO_SETTINGS_MODULE", None)
    command = command or [sys.executable, "-m", "evaluation_workers"]
    with open(log, "wb") as out:
        proc = subprocess.Popen([*command, "worker", "-P", pool, "-n", name or f"{queue}@%h", "-l", "info",
                                 "--without-mingle", "--without-gossip"],
                                cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    while b" ready." not in log.read_bytes():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise RuntimeError(f"Scoring worker did not start:\n{log.read_text()[-3000:]}")
        time.sleep(0.2)
    try:
        yield proc
    finally:
        stop(proc)


@pytest.fixture(scope="session")
def eval_worker(redis_url: str, storage_dirs: dict[str, Path], queues: dict[str, str],
                tmp_path_factory: pytest.TempPathFactory) -> Iterator[subprocess.Popen[bytes]]:
    """The session's scoring worker, reading uploads from local storage."""
    log = tmp_path_factory.mktemp("worker") / "eval-worker.log"
    with scoring_worker(redis_url, storage_dirs, queues["eval"], log) as proc:
        yield proc


@pytest.fixture
def live_pipeline(transactional_db: None, settings: Any, redis_url: str, queues: dict[str, str],
                  eval_worker: subprocess.Popen[bytes]) -> Iterator[None]:
    """Submissions are really queued in Redis, scored by the worker process and
    recorded by a site worker consuming the site queue in this process."""
    from celery.contrib.testing.worker import start_worker

    from leaderboard.celery import app

    settings.SITE_QUEUE, settings.EVAL_QUEUE_CPU = queues["site"], queues["eval"]
    settings.EVAL_GPU_TRACKS = []
    # The Django-namespaced key wins over broker_url once the app read its settings.
    app.conf.CELERY_BROKER_URL = app.conf.broker_url = redis_url
    with start_worker(app, pool="solo", perform_ping_check=False, queues=[queues["site"]],
                      shutdown_timeout=20):
        yield


# Fixtures of the researcher's workflow (issue 5): method details, S3 storage.


@pytest.fixture
def method_details(settings: Any) -> dict[str, Any]:
    """Enforce the method-details rule; the values that satisfy it."""
    settings.PUBLISH_NEEDS_METHOD_DETAILS = True
    return {"description": "A test method.", "authors": "A. Researcher", "uses_extra_data": False}


def describe_method(method: Any) -> None:
    type(method).objects.filter(pk=method.pk).update(
        description="A test method.", authors="A. Researcher", uses_extra_data=False)


def scored_submission(owner: Any, sqa3d_files: dict[str, Path], capture: Any, method_name: str) -> Any:
    """A finished, described, unpublished SQA3D submission of ``method_name``, beside the paper rows
    (needs the ``sqa3d_split`` and ``sent_tasks`` fixtures)."""
    import io

    from evaluation_workers.tracks import get_track
    from leaderboard.benchmarks.bundle_apply import load_bundled_paper_rows
    from leaderboard.submissions import lifecycle, services

    submission = services.check_create_submission(
        user=owner, track="sqa3d", split="test", method_name=method_name,
        file=io.BytesIO(sqa3d_files["predictions"].read_bytes()), file_name="p.json")
    result = get_track("sqa3d").score(sqa3d_files["labels"], sqa3d_files["predictions"], lambda f, m="": None)
    with capture(execute=True):
        lifecycle.record_result(submission_id=submission.pk, attempt=1, result=result)
        load_bundled_paper_rows("sqa3d")
    describe_method(submission.method)
    return submission


@pytest.fixture
def scored(owner: Any, sqa3d_split: Any, sqa3d_files: dict[str, Path], sent_tasks: Any,
           django_capture_on_commit_callbacks: Any) -> Any:
    """A finished, described, unpublished submission of the method CacheNet (the page cache's tests)."""
    return scored_submission(owner, sqa3d_files, django_capture_on_commit_callbacks, "CacheNet")


def publish(owner: Any, submission: Any, capture: Any, on: bool = True) -> None:
    from leaderboard.submissions import services

    with capture(execute=True):
        services.check_publish(owner, submission, publish=on)
    submission.refresh_from_db()


@contextlib.contextmanager
def rclone_s3(tmp_path_factory: pytest.TempPathFactory, name: str,
              allow_origin: str | None = None) -> Iterator[dict[str, str]]:
    """A real S3-compatible server on loopback (``rclone serve s3``, from requirements-dev.txt):
    it checks request signatures, presigned URLs included, and supports multipart uploads.
    ``allow_origin`` makes it answer CORS for that origin (browser uploads)."""
    import shutil

    rclone = shutil.which("rclone", path=str(Path(sys.executable).parent)) or shutil.which("rclone")
    if rclone is None:
        pytest.skip("rclone is not installed (pip install -r requirements-dev.txt)")
    root = tmp_path_factory.mktemp(name)
    (root / "predictions").mkdir()
    port = free_port()
    creds = {"access_key": f"{name}-access", "secret_key": f"{name}-secret-" + uuid.uuid4().hex}
    log = root.parent / f"{name}-rclone.log"
    cors = ["--allow-origin", allow_origin] if allow_origin else []
    with open(log, "wb") as out:
        proc = subprocess.Popen([rclone, "serve", "s3", "--addr", f"127.0.0.1:{port}", "--config", "/dev/null",
                                 "--auth-key", f"{creds['access_key']},{creds['secret_key']}", *cors, str(root)],
                                stdout=out, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 30
    while not _reachable(f"http://127.0.0.1:{port}"):
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise RuntimeError(f"rclone serve s3 did not start:\n{log.read_text()[-2000:]}")
        time.sleep(0.1)
    try:
        yield {"endpoint": f"http://127.0.0.1:{port}", "bucket": "predictions", "root": str(root), **creds}
    finally:
        proc.terminate()
        proc.wait(10)


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """The shared S3 server of the test session (no CORS: browsers cannot PUT to it)."""
    with rclone_s3(tmp_path_factory, "s3") as server:
        yield server


def s3_bucket(s3_server: dict[str, str], name: str) -> str:
    """The bucket ``name`` of the test S3 server, made through the server if it is not there yet: a
    folder made beside the server is not seen while rclone keeps its listing of the buckets (a test
    that listed them earlier in the session would make the next one's bucket missing)."""
    import boto3

    if not Path(s3_server["root"], name).is_dir():
        client = boto3.client("s3", endpoint_url=s3_server["endpoint"], aws_access_key_id=s3_server["access_key"],
                              aws_secret_access_key=s3_server["secret_key"], region_name="us-east-1")
        client.create_bucket(Bucket=name)
    return name


@pytest.fixture
def s3_storage(settings: Any, s3_server: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """The site stores predictions in the test S3 server; workers started later read them there."""
    settings.STORAGE_BACKEND = "s3"
    settings.S3_BUCKET, settings.S3_ENDPOINT_URL = s3_server["bucket"], s3_server["endpoint"]
    settings.S3_PUBLIC_ENDPOINT_URL = ""
    settings.S3_ACCESS_KEY_ID, settings.S3_SECRET_ACCESS_KEY = s3_server["access_key"], s3_server["secret_key"]
    for name, value in {"EVAL_S3_BUCKET": s3_server["bucket"], "EVAL_S3_ENDPOINT_URL": s3_server["endpoint"],
                        "EVAL_S3_ACCESS_KEY_ID": s3_server["access_key"],
                        "EVAL_S3_SECRET_ACCESS_KEY": s3_server["secret_key"]}.items():
        monkeypatch.setenv(name, value)
    return s3_server


@pytest.fixture
def small_parts(settings: Any) -> int:
    """Uploads above 1 KiB go in parts of 4 KiB, so that tests see many parts."""
    settings.UPLOAD_DIRECT_MAX_BYTES = 1024
    settings.UPLOAD_PART_BYTES = 4096
    return 4096


@pytest.fixture
def lb_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An isolated config folder for the ``lb`` client."""
    path = tmp_path / "lb" / "config.json"
    monkeypatch.setenv("LB_CONFIG", str(path))
    monkeypatch.delenv("LB_SERVER", raising=False)
    monkeypatch.delenv("LB_TOKEN", raising=False)
    return path
