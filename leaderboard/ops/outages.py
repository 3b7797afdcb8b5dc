"""Which exceptions mean that a service the site needs failed, not that the code has a bug.

``outage(exc)`` names what failed, or None: only these exceptions count, so a
bug (a missing table, a wrong key, a permission) stays a 500 with its traceback:

- the database: ``OperationalError``/``InterfaceError`` of a lost or refused
  connection (PostgreSQL with no SQLSTATE, or one of classes 08, 40, 53, 57,
  58; SQLite busy, locked, out of memory, read-only, I/O error, cannot open);
- the broker: Redis refusing or dropping the connection, timing out, loading
  its data, read-only or out of memory (not a wrong password), and Kombu's
  ``OperationalError``;
- storage: ``storage.StorageError``, S3 connection failures and 5xx answers,
  ``EIO``/``EROFS``;
- the disk being full: ``ENOSPC``/``EDQUOT``, SQLite's ``SQLITE_FULL``,
  PostgreSQL's ``53100``, Redis's ``MISCONF`` (it cannot persist).

``Streak`` logs the failures of a periodic job while a service is down: the
traceback once, then one line with the count each time, then that it works again.
"""

from __future__ import annotations

import errno
import logging
import sqlite3
import time

from django.db import utils as db

from leaderboard.lib.storage import StorageError

DATABASE, BROKER, STORAGE, DISK_FULL = "database", "broker", "storage", "disk_full"
WHAT = {DATABASE: "The database is unavailable", BROKER: "The message broker is unavailable",
        STORAGE: "File storage is unavailable", DISK_FULL: "The server's disk is full"}

# SQLite's primary result codes of a database that cannot be used now (https://sqlite.org/rescode.html);
# SQLITE_ERROR (1, "no such table") and the rest are left as they are.
_SQLITE_DOWN = {5: DATABASE, 6: DATABASE, 7: DATABASE, 8: DATABASE, 10: DATABASE, 13: DISK_FULL, 14: DATABASE,
                15: DATABASE}
# PostgreSQL SQLSTATE classes: connection exception, transaction rollback (serialization, deadlock),
# insufficient resources, operator intervention (shutdown, statement timeout), system error.
_POSTGRES_DOWN = {"08", "40", "53", "57", "58"}
_DISK_FULL_ERRNOS = {errno.ENOSPC, errno.EDQUOT}
_STORAGE_ERRNOS = {errno.EIO, errno.EROFS}


def _database(exc: BaseException) -> str | None:
    cause = exc.__cause__
    if isinstance(exc, db.InterfaceError):
        # "connection already closed"; but SQLite's ("Error binding parameter") is a bug.
        return None if isinstance(cause, sqlite3.Error) else DATABASE
    if not isinstance(exc, db.OperationalError):
        return None
    if isinstance(cause, sqlite3.Error):
        return _SQLITE_DOWN.get((getattr(cause, "sqlite_errorcode", 0) or 0) & 0xFF)
    sqlstate = getattr(cause, "sqlstate", None) or getattr(cause, "pgcode", None)
    if sqlstate is None:
        # No answer from a server at all: refused, reset, timed out, closed under us, or not within our
        # deadline (leaderboard.lib.postgres.waits: subclasses of psycopg's errors).
        return DATABASE if cause is not None and any(
            klass.__module__.startswith("psycopg") for klass in type(cause).__mro__) else None
    if sqlstate == "53100":
        return DISK_FULL
    return DATABASE if sqlstate[:2] in _POSTGRES_DOWN else None


def _broker(exc: BaseException) -> str | None:
    import kombu.exceptions
    import redis.exceptions as redis_errors

    if isinstance(exc, (redis_errors.AuthenticationError, redis_errors.AuthorizationError)):
        return None  # a wrong password is a configuration to fix, not an outage to wait out
    if isinstance(exc, (redis_errors.ConnectionError, redis_errors.TimeoutError, redis_errors.ReadOnlyError,
                        redis_errors.OutOfMemoryError, kombu.exceptions.OperationalError)):
        return BROKER
    if isinstance(exc, redis_errors.ResponseError) and str(exc).startswith("MISCONF"):
        return DISK_FULL  # Redis refuses writes it cannot persist (its disk is full)
    return None


def _storage(exc: BaseException) -> str | None:
    if isinstance(exc, OSError) and exc.errno in _DISK_FULL_ERRNOS:
        return DISK_FULL
    if isinstance(exc, StorageError) or (isinstance(exc, OSError) and exc.errno in _STORAGE_ERRNOS):
        return STORAGE
    from botocore.exceptions import ClientError, ConnectionError, HTTPClientError

    if isinstance(exc, (ConnectionError, HTTPClientError)):
        return STORAGE
    if isinstance(exc, ClientError):
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0
        return STORAGE if int(status) >= 500 else None
    return None


def outage(exc: BaseException) -> str | None:
    """What failed under ``exc`` (``DATABASE``, ``BROKER``, ``STORAGE``, ``DISK_FULL``), or None for a bug.

    Follows the explicit causes (``raise ... from``): a ``StorageError`` from a full disk is the disk.
    """
    found = None
    seen: BaseException | None = exc
    for _ in range(5):
        if seen is None:
            break
        cause = _database(seen) or _broker(seen) or _storage(seen)
        if cause is None and seen is exc:
            return None
        found = cause or found
        if found == DISK_FULL:
            break
        seen = seen.__cause__
    return found


class Streak:
    """The failures in a row of a periodic job (the sweep, every few seconds) while a service is down.

    The first is logged with its traceback, each next one as one line with the count so far, and the
    first success after them once; a failure that is no outage (a bug) is left to the caller to raise.
    """

    def __init__(self, log: logging.Logger, job: str) -> None:
        self.log, self.job = log, job
        self.failures, self.since = 0, 0.0

    def failed(self, exc: BaseException) -> bool:
        """Log ``exc`` if a service failed under it (True); False for a bug, which the caller raises."""
        cause = outage(exc)
        if cause is None:
            return False
        self.failures += 1
        if self.failures == 1:
            self.since = time.monotonic()
            self.log.error("%s failed: %s; one line per failure from now on until it works again", self.job,
                           WHAT[cause], exc_info=exc)
        else:
            self.log.warning("%s failed again (%d in a row over %.0f s): %s (%s: %s)", self.job, self.failures,
                             time.monotonic() - self.since, WHAT[cause], type(exc).__name__,
                             " ".join(str(exc).split())[:200])
        return True

    def succeeded(self) -> None:
        if self.failures:
            self.log.warning("%s works again after %d failures in a row over %.0f s", self.job, self.failures,
                             time.monotonic() - self.since)
        self.failures = 0
