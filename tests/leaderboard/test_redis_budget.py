"""One budget per web request over every call to Redis (leaderboard.lib.redis_budget), against a Redis that hangs.

A Redis of this module's own is stopped with SIGSTOP: it still accepts connections
(the kernel does) and answers nothing, the worst case for a client. The whole site
with its broker hung is in tests/faults/test_faults_live.py.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from leaderboard.lib import pagecache, redis_budget
from leaderboard.lib.redis_budget import BudgetSpent, bounded, connection_class, request_budget

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def own_redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[int, str]]:
    sys.path.insert(0, str(ROOT / "deploy"))
    import local_redis

    proc, url = local_redis.start(tmp_path_factory.mktemp("hung-redis"))
    try:
        yield proc.pid, url
    finally:
        os.kill(proc.pid, signal.SIGCONT)
        proc.terminate()
        proc.wait(10)


@contextlib.contextmanager
def hung(pid: int) -> Iterator[None]:
    os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(pid, signal.SIGCONT)


def took(call) -> tuple[object, float]:
    started = time.monotonic()
    try:
        outcome = call()
    except Exception as exc:  # noqa: BLE001 - the test looks at which
        outcome = exc
    return outcome, time.monotonic() - started


def test_a_requests_calls_share_one_budget_and_calls_outside_a_request_keep_their_timeouts(own_redis):
    pid, url = own_redis
    client = redis.Redis.from_url(url, socket_timeout=5, socket_connect_timeout=5, retry=redis_budget.NO_RETRY,
                                  connection_class=connection_class(url))
    client.set("budget:k", "v")
    with request_budget(0.4):
        assert client.get("budget:k") == b"v"
        [connection] = client.connection_pool._available_connections
        assert connection._sock.gettimeout() == 5  # a budgeted call leaves the socket's own timeout behind
        with hung(pid):
            first, first_s = took(lambda: client.get("budget:k"))
            second, second_s = took(lambda: client.get("budget:k"))
            sent, sent_s = took(lambda: bounded(lambda: time.sleep(1), "sending x"))
    assert isinstance(first, redis.TimeoutError) and 0.3 < first_s < 1.5, (first, first_s)
    assert isinstance(second, BudgetSpent) and second_s < 0.2, (second, second_s)
    assert "time for Redis (0.4 s, REDIS_REQUEST_TIMEOUT) is spent" in str(second)
    assert isinstance(sent, BudgetSpent) and sent_s < 0.2, (sent, sent_s)
    assert redis_budget.remaining() is None and client.get("budget:k") == b"v"  # after the request: as before


def test_a_call_through_sockets_not_ours_is_waited_for_only_what_is_left():
    finished = threading.Event()

    def slow_send() -> str:
        time.sleep(0.6)
        finished.set()
        return "sent"

    with request_budget(0.2):
        late, late_s = took(lambda: bounded(slow_send, "sending x"))
    with request_budget(0.1):
        took(lambda: bounded(lambda: time.sleep(0.6), "sending y"))
    # Both helpers of the process busy (the late sends): the next request does not wait for Redis at all.
    with request_budget(1):
        busy, busy_s = took(lambda: bounded(lambda: "never", "sending z"))
    assert isinstance(late, BudgetSpent) and 0.15 < late_s < 1, (late, late_s)
    assert "did not answer within this request's 0.2 s" in str(late)
    assert isinstance(busy, BudgetSpent) and busy_s < 0.2 and "still wait" in str(busy), busy
    assert finished.wait(5)  # the late send went on by itself
    deadline = time.monotonic() + 5
    while True:  # once the helpers are free again, a request's send goes through them
        with request_budget(1):
            try:
                assert bounded(lambda: "sent", "sending w") == "sent"
                break
            except BudgetSpent:
                assert time.monotonic() < deadline
                time.sleep(0.05)
    assert bounded(lambda: "outside", "sending v") == "outside"  # no request: called directly


def test_the_connection_class_keeps_the_urls_transport():
    assert issubclass(connection_class("rediss://h:6380/0"), redis.SSLConnection)
    assert issubclass(connection_class("unix:///tmp/redis.sock"), redis.UnixDomainSocketConnection)
    assert connection_class("redis://h/0").__mro__[1] is redis_budget._Budgeted
    assert connection_class("redis://a/0") is connection_class("redis://b/1")


@pytest.fixture
def broker_on(settings):
    """The site's sends and notes go to ``url`` (a queue of the test's own, no worker)."""
    from leaderboard.celery import app

    before = (app.conf.broker_url, app.conf.get("CELERY_BROKER_URL"))

    def point(url: str) -> None:
        settings.CELERY_BROKER_URL = app.conf.CELERY_BROKER_URL = app.conf.broker_url = url

    yield point
    app.conf.broker_url, app.conf.CELERY_BROKER_URL = before


def test_with_redis_hung_a_page_and_an_upload_each_answer_within_the_budget(
        own_redis, transactional_db, settings, owner, sqa3d_split, sqa3d_files, broker_on):
    """The page cache's read, and the upload's note, send and invalidation, all on the hung Redis."""
    from django.core.files.uploadedfile import SimpleUploadedFile
    from django.test import Client

    from leaderboard.accounts.services import do_create_token
    from leaderboard.submissions.models import Submission

    pid, url = own_redis
    settings.REDIS_REQUEST_TIMEOUT = 0.5
    settings.CACHES = {"default": {**settings.CACHES["default"], "LOCATION": url}}
    settings.EVAL_QUEUE_CPU = "eval-budget-test"
    settings.VALIDATE_AT_UPLOAD_MAX_BYTES = 0  # the worker validates: the upload is the Redis calls and the file
    broker_on(url)
    key = do_create_token(owner, name="cli")
    anonymous, client = Client(), Client(HTTP_AUTHORIZATION=f"Token {key}")
    assert anonymous.get("/benchmarks/sqa3d/")["X-Page-Cache"] == "miss"  # connections to the cache are open
    pagecache.reset_after_outage()
    try:
        with hung(pid):
            page, page_s = took(lambda: anonymous.get("/benchmarks/sqa3d/"))
            upload, upload_s = took(lambda: client.post("/api/v1/submissions", {
                "track": "sqa3d", "split": "test", "method_name": "Hung broker",
                "file": SimpleUploadedFile("p.json", sqa3d_files["predictions"].read_bytes())}))
    finally:
        pagecache.reset_after_outage()
    assert page.status_code == 200 and "X-Page-Cache" not in page and page_s < 1.5, (page, page_s)
    assert upload.status_code == 201 and upload_s < 1.5, (upload.content, upload_s)
    submission = Submission.objects.get(pk=upload.json()["id"])
    assert submission.status == "queued" and submission.sent_at is None  # the sweeper sends it
