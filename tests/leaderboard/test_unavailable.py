"""A failed database, broker or storage, or a full disk, answers 503 with Retry-After; a bug stays a 500.

The exceptions are real ones, made by real clients against a closed port, a
read-only or size-capped SQLite file, a missing table; they reach a view of
``outage_urls`` (the site's URLs plus one that raises) as Django's database
wrapper hands them on (the driver's error as ``__cause__``).
"""

from __future__ import annotations

import errno
import sqlite3
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import redis
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import utils as dbutils
from django.test import Client, RequestFactory
from django.utils.html import escape

from leaderboard.lib import storage
from leaderboard.ops import metrics, outages, unavailable
from tests.conftest import free_port
from tests.leaderboard import outage_urls

pytestmark = pytest.mark.urls("tests.leaderboard.outage_urls")


def django_error(driver_call: Callable[[], object], kind: type[dbutils.Error] = dbutils.OperationalError) -> dbutils.Error:
    """What Django raises for the driver's error: its own class, the driver's error as the cause."""
    try:
        driver_call()
    except Exception as exc:  # noqa: BLE001 - wrapped below, as django.db.utils.DatabaseErrorWrapper does
        wrapped = kind(*exc.args)
        wrapped.__cause__ = exc
        return wrapped
    raise AssertionError("expected the driver to fail")


def postgres_refused() -> None:
    import psycopg

    psycopg.connect(f"postgresql://nobody@127.0.0.1:{free_port()}/x", connect_timeout=2)


def sqlite_full(tmp: Path) -> Callable[[], object]:
    def call() -> None:
        conn = sqlite3.connect(tmp / "full.sqlite3")
        conn.execute("PRAGMA max_page_count = 2")  # as a disk with no room left
        conn.execute("CREATE TABLE t (b BLOB)")
        conn.execute("INSERT INTO t VALUES (zeroblob(100000))")
    return call


def sqlite_read_only(tmp: Path) -> Callable[[], object]:
    def call() -> None:
        sqlite3.connect(tmp / "ro.sqlite3").execute("CREATE TABLE t (x)").connection.commit()
        sqlite3.connect(f"file:{tmp / 'ro.sqlite3'}?mode=ro", uri=True).execute("INSERT INTO t VALUES (1)")
    return call


def sqlite_no_table(tmp: Path) -> Callable[[], object]:
    return lambda: sqlite3.connect(tmp / "empty.sqlite3").execute("SELECT * FROM missing")


def redis_refused() -> None:
    redis.Redis(port=free_port(), socket_connect_timeout=1).ping()


def s3_refused() -> None:
    import boto3
    from botocore.config import Config

    boto3.client("s3", endpoint_url=f"http://127.0.0.1:{free_port()}", region_name="us-east-1",
                 aws_access_key_id="x", aws_secret_access_key="y",
                 config=Config(retries={"max_attempts": 1}, connect_timeout=1)).head_bucket(Bucket="b")


def raised(call: Callable[[], object]) -> BaseException:
    try:
        call()
    except Exception as exc:  # noqa: BLE001 - the test looks at what it was
        return exc
    raise AssertionError("expected a failure")


def store_on_full_disk() -> BaseException:
    """storage.store's error when the disk refuses the write (ENOSPC injected at the write)."""
    def full(*args: object, **kwargs: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    original = storage.open_private
    storage.open_private = full  # type: ignore[assignment]
    try:
        return raised(lambda: storage.store([b"x"], "team/1/p.json", 10))
    finally:
        storage.open_private = original


OUTAGES: list[tuple[str, Callable[[Path], BaseException], str]] = [
    ("PostgreSQL refuses the connection", lambda t: django_error(postgres_refused), outages.DATABASE),
    ("the connection was closed under us", lambda t: dbutils.InterfaceError("connection already closed"),
     outages.DATABASE),
    ("SQLite's database is full", lambda t: django_error(sqlite_full(t)), outages.DISK_FULL),
    ("SQLite's file is read-only", lambda t: django_error(sqlite_read_only(t)), outages.DATABASE),
    ("Redis refuses the connection", lambda t: raised(redis_refused), outages.BROKER),
    ("Redis cannot persist", lambda t: redis.exceptions.ResponseError(
        "MISCONF Errors writing to the AOF file: No space left on device"), outages.DISK_FULL),
    ("S3 refuses the connection", lambda t: raised(s3_refused), outages.STORAGE),
    ("the uploads' disk is full", lambda t: store_on_full_disk(), outages.DISK_FULL),
    ("a temporary upload file on a full disk", lambda t: OSError(errno.ENOSPC, "No space left on device"),
     outages.DISK_FULL),
]
BUGS: list[tuple[str, Callable[[Path], BaseException]]] = [
    ("a missing table", lambda t: django_error(sqlite_no_table(t))),
    ("a wrong broker password", lambda t: redis.exceptions.AuthenticationError("invalid password")),
    ("an unreadable file", lambda t: PermissionError(errno.EACCES, "Permission denied")),
    ("a programming error", lambda t: dbutils.ProgrammingError("column x does not exist")),
    ("a KeyError", lambda t: KeyError("x")),
]


@pytest.mark.parametrize(("case", "make", "cause"), OUTAGES, ids=[c[0] for c in OUTAGES])
def test_a_failed_service_is_503_with_retry_after(db, tmp_path, settings, case, make, cause):
    outage_urls.RAISE["exc"] = exc = make(tmp_path)
    assert outages.outage(exc) == cause
    counted = metrics.COUNTED.get_sample_value("leaderboard_unavailable_responses_total", {"cause": cause}) or 0
    client = Client()
    api = client.get("/api/v1/boom")
    assert api.status_code == 503 and api["Retry-After"] == str(settings.UNAVAILABLE_RETRY_AFTER)
    error = api.json()["error"]
    assert error["code"] == "unavailable" and error["message"].startswith(outages.WHAT[cause])
    assert "Traceback" not in api.content.decode() and "127.0.0.1" not in error["message"]
    page = client.get("/boom")
    assert page.status_code == 503 and page["Retry-After"] == str(settings.UNAVAILABLE_RETRY_AFTER)
    assert page["Content-Type"].startswith("text/html")
    html = page.content.decode()
    assert "Briefly unavailable" in html and escape(outages.WHAT[cause]) in html and "site.css" in html
    assert metrics.COUNTED.get_sample_value("leaderboard_unavailable_responses_total", {"cause": cause}) == counted + 2


@pytest.mark.parametrize(("case", "make"), BUGS, ids=[c[0] for c in BUGS])
def test_a_bug_stays_a_500(db, tmp_path, case, make):
    outage_urls.RAISE["exc"] = exc = make(tmp_path)
    assert outages.outage(exc) is None
    client = Client(raise_request_exception=False)
    api = client.get("/api/v1/boom")
    assert api.status_code == 500 and api.json()["error"]["code"] == "server_error"
    assert "Retry-After" not in api
    assert client.get("/boom").status_code == 500


def test_a_failure_outside_the_view_is_503_too(db, tmp_path, settings):
    """handler500 (a session saved by its middleware, after the view) sees the exception being handled."""
    request = RequestFactory().get("/benchmarks/")
    try:
        raise django_error(postgres_refused)
    except dbutils.OperationalError:
        response = unavailable.server_error(request)
    assert response.status_code == 503 and response["Retry-After"] == str(settings.UNAVAILABLE_RETRY_AFTER)
    try:
        raise KeyError("a bug")
    except KeyError:
        assert unavailable.server_error(request).status_code == 500
    assert sys.exception() is None


def test_an_upload_onto_a_full_disk_is_503_with_retry_after(client, owner, sqa3d_split, sqa3d_files, settings,
                                                            monkeypatch):
    """The API's upload and the form's: the store's ENOSPC (injected at the write) is refunded and answered
    503 saying the disk is full, retry later; each is counted with its cause, as every other 503."""
    from leaderboard.accounts.services import do_create_token
    from leaderboard.submissions.models import Submission

    key = do_create_token(owner, name="cli")

    def full(*args: object, **kwargs: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    def counted() -> float:
        return metrics.COUNTED.get_sample_value("leaderboard_unavailable_responses_total",
                                                {"cause": outages.DISK_FULL}) or 0

    monkeypatch.setattr(storage, "open_private", full)
    before = counted()
    response = client.post("/api/v1/submissions", {
        "track": "sqa3d", "split": "test", "method_name": "Full",
        "file": SimpleUploadedFile("p.json", sqa3d_files["predictions"].read_bytes())},
        HTTP_AUTHORIZATION=f"Token {key}")
    assert response.status_code == 503 and response["Retry-After"] == str(settings.UNAVAILABLE_RETRY_AFTER)
    error = response.json()["error"]
    assert error["code"] == "unavailable" and error["retry_at"]
    assert error["message"] == ("The server's disk is full; the file was not stored, and nothing was counted "
                                f"against your quota. Try again in {settings.UNAVAILABLE_RETRY_AFTER} seconds.")
    submission = Submission.objects.get(method__name="Full")
    assert submission.status == "failed" and submission.quota == "refunded"
    client.force_login(owner)
    page = client.post("/submissions/new/sqa3d/", {
        "split": "test", "method_name": "Full form",
        "file": SimpleUploadedFile("p.json", sqa3d_files["predictions"].read_bytes())})
    assert page.status_code == 503 and page["Retry-After"] == str(settings.UNAVAILABLE_RETRY_AFTER)
    assert "The server&#x27;s disk is full" in page.content.decode() and "nothing was counted" in page.content.decode()
    assert counted() == before + 2
