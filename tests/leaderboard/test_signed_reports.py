"""Results only workers can write: reports over the real Redis to a real site worker process.

Anyone who can reach the broker can publish ``submissions.record_result`` by
name. The site worker runs a report only when it is signed with the key the
workers hold (``evaluation_workers.signing``): a forged one changes nothing,
is logged without its payload, and is acknowledged (not delivered again); a
signed one delivered twice is recorded once. Below: where the key comes from.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
import redis
from celery import Celery
from django.db import connection

from evaluation_workers import contracts, signing
from evaluation_workers.tracks import get_track
from evaluation_workers.worker.app import SigningCelery
from leaderboard.submissions import services
from leaderboard.submissions.models import Submission
from tests.conftest import stop

ROOT = Path(__file__).resolve().parents[2]
FORGED_EM = 0.987654321  # a value no real report has: it must never reach the database or the log


def database_url() -> str:
    """The test database, for another process."""
    db = connection.settings_dict
    if connection.vendor == "sqlite":
        return f"sqlite:///{db['NAME']}"
    return (f"postgres://{quote(db['USER'] or '')}:{quote(db['PASSWORD'] or '')}@{db['HOST'] or 'localhost'}:"
            f"{db['PORT'] or 5432}/{db['NAME']}")


@pytest.fixture
def site_worker(transactional_db: None, redis_url: str, tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """``celery -A leaderboard worker`` on a site queue of this test, on the test database; (queue, its log)."""
    queue, log = f"site-signed-{uuid.uuid4().hex[:8]}", tmp_path / "site-worker.log"
    env = {**os.environ, "DATABASE_URL": database_url(), "REDIS_URL": redis_url, "SITE_QUEUE": queue,
           "CONN_MAX_AGE": "0", "DJANGO_SETTINGS_MODULE": "leaderboard.settings", "PYTHONUNBUFFERED": "1"}
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "celery", "-A", "leaderboard", "worker", "-Q", queue,
                                 "-P", "solo", "-n", f"{queue}@%h", "-l", "info", "--without-mingle",
                                 "--without-gossip"], cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        wait_for(lambda: b" ready." in log.read_bytes(), "the site worker to start", log, proc)
        yield queue, log
    finally:
        stop(proc, 20)
        redis.Redis.from_url(redis_url).delete(queue)


def wait_for(done: Any, what: str, log: Path, proc: subprocess.Popen[bytes] | None = None,
             timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        if (proc is not None and proc.poll() is not None) or time.monotonic() > deadline:
            raise AssertionError(f"Waited in vain for {what}:\n{log.read_text(errors='replace')[-3000:]}")
        time.sleep(0.2)


@contextlib.contextmanager
def app_on(broker_url: str, cls: type[Celery] = Celery) -> Iterator[Celery]:
    """A Celery app of its own on the test broker: plain (what anyone with the broker URL has), or the
    workers' signing one."""
    app = cls(f"sender-{uuid.uuid4().hex[:6]}", broker=broker_url, set_as_current=False)
    try:
        yield app
    finally:
        app.close()


def report_of(submission: Submission, em: float) -> dict[str, Any]:
    track = get_track("sqa3d")
    result = {"track": "sqa3d", "scorer_version": track.scorer_version,
              "labels_sha256": submission.labels.sha256, "predictions_sha256": submission.predictions_sha256,
              "metrics": {"EM": em, "EM_R": em}, "breakdown": {}, "details": {}, "warnings": []}
    return {"submission_id": submission.pk, "attempt": submission.attempt, "result": result, "seconds": 1.0,
            "device": "cpu", "worker": "eval@host:1"}


def pending(client: redis.Redis, queue: str) -> int:
    """Messages of ``queue`` still in it or delivered and not acknowledged."""
    unacked = sum(1 for _, raw in client.hscan_iter("unacked") if json.loads(raw)[-1] == queue)
    return int(client.llen(queue)) + unacked


@pytest.mark.live
def test_a_forged_report_changes_nothing_is_logged_and_acknowledged_and_a_signed_one_counts_once(
        site_worker, redis_url, owner, sqa3d_split, sqa3d_files, sent_tasks, django_capture_on_commit_callbacks):
    queue, log = site_worker
    with django_capture_on_commit_callbacks(execute=True):
        submission = services.check_create_submission(
            user=owner, track="sqa3d", split="test", method_name="MyNet", file_name="predictions.json",
            file=io.BytesIO(sqa3d_files["predictions"].read_bytes()))
    assert submission.status == "queued"
    forged = report_of(submission, FORGED_EM)
    other_key = signing.checked_key("not-the-workers-key-" + "x" * 32, "TEST")
    tampered = {**signing.signed(contracts.RECORD_RESULT, report_of(submission, 0.5),
                                 signing.key_from_environ("EVAL_RESULTS_SIGNING_KEY")),
                "result": forged["result"]}  # a worker's signature over other numbers
    with app_on(redis_url) as anyone:
        for kwargs in (forged, signing.signed(contracts.RECORD_RESULT, forged, other_key), tampered):
            anyone.send_task(contracts.RECORD_RESULT, kwargs=kwargs, queue=queue)
    client = redis.Redis.from_url(redis_url)
    refused = lambda: log.read_text(errors="replace").count(f"Refused {contracts.RECORD_RESULT}")  # noqa: E731
    wait_for(lambda: refused() == 3 and pending(client, queue) == 0, "three refusals, acknowledged", log)

    submission.refresh_from_db()
    assert (submission.status, submission.attempt) == ("queued", 1) and not submission.results.exists()
    text = log.read_text(errors="replace")
    assert f"for submission '{submission.pk}': it is unsigned" in text
    assert text.count(f"for submission '{submission.pk}': its signature is wrong") == 2
    assert str(FORGED_EM) not in text and submission.predictions_sha256 not in text

    # What a worker sends (its app signs), delivered twice as the broker may: recorded once.
    with app_on(redis_url, SigningCelery) as worker:
        for _ in range(2):
            worker.send_task(contracts.RECORD_RESULT, kwargs=report_of(submission, 0.6), queue=queue)
    done = re.compile(rf"Task {re.escape(contracts.RECORD_RESULT)}\[[^\]]+\] succeeded")
    succeeded = lambda: len(done.findall(log.read_text(errors="replace")))  # noqa: E731
    wait_for(lambda: succeeded() == 3 + 2 and pending(client, queue) == 0, "both deliveries recorded", log)
    submission.refresh_from_db()
    [result] = submission.results.all()
    assert submission.status == "finished" and result.metrics == {"EM": 0.6, "EM_R": 0.6}
    assert refused() == 3


# The key: given (or its file), or generated where nothing crosses hosts; never missing unnoticed.


def manage_check(data_dir: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """``manage.py`` in a new terminal with nothing exported but ``env`` and where the data lives."""
    code = ("from django.conf import settings; "
            "print(','.join(f'{i}:{k.decode()}' for i, k in settings.RESULTS_SIGNING_KEYS.pairs))")
    return subprocess.run([sys.executable, "manage.py", "shell", "-c", code], cwd=ROOT, capture_output=True,
                          text=True, timeout=120, env={"PATH": os.environ["PATH"], "DATA_DIR": str(data_dir), **env})


def test_with_a_broker_set_and_no_key_the_site_refuses_to_start_and_says_which_variable(tmp_path):
    refused = manage_check(tmp_path, REDIS_URL="redis://:pw@broker.internal:6379/0")
    assert refused.returncode != 0 and "RESULTS_SIGNING_KEY (or RESULTS_SIGNING_KEY_FILE) is not set" in refused.stderr
    short = manage_check(tmp_path, REDIS_URL="redis://broker:6379/0", RESULTS_SIGNING_KEY="short")
    assert short.returncode != 0 and "Expected RESULTS_SIGNING_KEY to be at least 32 characters" in short.stderr
    (tmp_path / "key").write_text("k" * 40 + "\n")
    given = manage_check(tmp_path, REDIS_URL="redis://broker:6379/0", RESULTS_SIGNING_KEY_FILE=str(tmp_path / "key"))
    assert given.returncode == 0 and given.stdout.strip().splitlines()[-1] == "default:" + "k" * 40
    # Keys with ids, newest first (rotation), in the variable or a file; one way or the other, not both.
    (tmp_path / "keys").write_text(f"2026:{'n' * 40}\ndefault:{'k' * 40}\n")
    listed = manage_check(tmp_path, REDIS_URL="redis://broker:6379/0", RESULTS_SIGNING_KEYS_FILE=str(tmp_path / "keys"))
    assert listed.returncode == 0 and listed.stdout.strip().splitlines()[-1] == f"2026:{'n' * 40},default:{'k' * 40}"
    both = manage_check(tmp_path, REDIS_URL="redis://broker:6379/0", RESULTS_SIGNING_KEYS=f"2026:{'n' * 40}",
                        RESULTS_SIGNING_KEY="k" * 40)
    assert both.returncode != 0 and "Set RESULTS_SIGNING_KEYS or RESULTS_SIGNING_KEY, not both" in both.stderr
    assert not (tmp_path / "results_signing_key").exists()


def test_on_one_machine_the_key_is_generated_once_and_the_local_set_up_hands_it_to_its_worker(tmp_path):
    sys.path.insert(0, str(ROOT / "deploy"))
    try:
        from run_local import share_signing_key
    finally:
        sys.path.remove(str(ROOT / "deploy"))
    env: dict[str, str] = {}
    share_signing_key(env, tmp_path)
    key_file = tmp_path / "results_signing_key"
    assert env == {"RESULTS_SIGNING_KEY_FILE": str(key_file), "EVAL_RESULTS_SIGNING_KEY_FILE": str(key_file)}
    assert oct(key_file.stat().st_mode & 0o777) == "0o600"
    worker_key = signing.key_from_environ("EVAL_RESULTS_SIGNING_KEY", env)
    # manage.py in a fresh shell (no REDIS_URL, no key given) reads the same file, and so do later runs.
    fresh = manage_check(tmp_path)
    assert fresh.returncode == 0 and fresh.stdout.strip().splitlines()[-1] == f"default:{worker_key.decode()}"
    again: dict[str, str] = {}
    share_signing_key(again, tmp_path)
    assert signing.key_from_environ("EVAL_RESULTS_SIGNING_KEY", again) == worker_key
    given = {"RESULTS_SIGNING_KEY": "g" * 32}
    share_signing_key(given, tmp_path)
    assert given == {"RESULTS_SIGNING_KEY": "g" * 32, "EVAL_RESULTS_SIGNING_KEY": "g" * 32}
    listed = {"RESULTS_SIGNING_KEYS_FILE": "/etc/keys"}
    share_signing_key(listed, tmp_path)
    assert listed == {"RESULTS_SIGNING_KEYS_FILE": "/etc/keys", "EVAL_RESULTS_SIGNING_KEYS_FILE": "/etc/keys"}


def test_a_scoring_worker_without_the_key_refuses_to_start():
    env = {k: v for k, v in os.environ.items() if not k.startswith("EVAL_RESULTS_SIGNING_KEY")}
    started = subprocess.run([sys.executable, "-m", "evaluation_workers", "worker"], cwd=ROOT, env=env,
                             capture_output=True, text=True, timeout=120)
    assert started.returncode == 2
    assert ("error: EVAL_RESULTS_SIGNING_KEY (or EVAL_RESULTS_SIGNING_KEY_FILE) is not set, nor "
            "EVAL_RESULTS_SIGNING_KEYS (or EVAL_RESULTS_SIGNING_KEYS_FILE)") in started.stderr
