"""Deadlines on every wait for PostgreSQL, and a limit on the threads of a process that wait at once.

psycopg 3 does all its blocking I/O in ``Connection.wait`` (queries, commits,
fetches) and ``Connection.connect``, with no deadline of its own. A server that
*stops* answering (SIGSTOP, overload, a lock held by a stuck transaction, a
fail-over in progress) looks alive to the client: the kernel still acknowledges,
so TCP keepalives never fire, and ``statement_timeout`` is enforced by the very
server that is not running. A web thread would wait for ever, and once every
thread of a process waits, nothing it serves answers, ``/healthz`` included.

``DeadlineConnection`` bounds each wait by ``Policy.timeout`` seconds measured
here: past it the connection is closed (it is mid-statement; nothing else can
use it) and ``QueryDeadline`` is raised, an ``OperationalError`` that the site
answers with 503 and ``Retry-After``. ``Gate`` lets at most ``limit`` threads of
the process wait on the database at once (``WEB_THREADS - 1`` in a web process,
so one is always free for ``/healthz`` and the cached pages): a thread that finds
them all taken waits for one while the database has answered this process within
``stall_after`` seconds (counted from the later of its last answer and the start
of the oldest wait: a busy, slow or lock-bound but answering database keeps
answering some wait, however loaded the machine and however long one statement
takes), and is refused (``DatabaseBusy``, also a 503) once it has been silent that
long; from then on, until some wait gets an answer again, it is refused at once.

Nothing is bounded until ``enable`` is called: the web process calls it
(``leaderboard.wsgi``); the site worker, migrations and management commands
wait as long as their work takes.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import threading
import time
from collections.abc import Generator, Iterator
from dataclasses import dataclass
from typing import Any

import psycopg

log = logging.getLogger(__name__)

# How long the database stays silent to a process, every slot taken, before it is taken for stalled
# (and /healthz, waiting for no slot, answers within it). Silence, not the oldest wait's age: on a loaded
# machine (CI: twelve uploads and eight pollers on two cores) one statement outlasted a second while the
# other slot's were answered, and judging by the oldest wait refused every upload of a healthy database.
STALL_SECONDS = 1.0


class QueryDeadline(psycopg.OperationalError):
    """The database did not answer within the deadline; the connection was closed."""


class DatabaseBusy(psycopg.OperationalError):
    """As many threads of this process as may wait on the database wait on it already."""


class Gate:
    """How many threads of this process wait on the database now, and whether it stopped answering."""

    def __init__(self, limit: int, stall_after: float = STALL_SECONDS) -> None:
        self.limit = max(1, limit)
        self.stall_after = stall_after
        self._since: dict[int, float] = {}  # each wait's start (time.monotonic), by its ticket
        self._answered_at = float("-inf")  # the last answer to a wait of this process
        self._tickets = itertools.count()
        # Set when a wait ran out of time or a thread was refused; cleared by the next answer.
        self.stalled = False
        self._cond = threading.Condition()

    @contextlib.contextmanager
    def entered(self) -> Iterator[None]:
        """A slot for one wait on the database; ``DatabaseBusy`` when none is free."""
        ticket = self._enter()
        answered = False
        try:
            yield
            answered = True
        except QueryDeadline:
            self._stall("a wait ran out of time")
            raise
        finally:
            self._leave(ticket, answered)

    @property
    def waiting(self) -> int:
        """How many threads of this process wait on the database now."""
        return len(self._since)

    def _enter(self) -> int:
        with self._cond:
            while self.waiting >= self.limit and not self.stalled:
                silent = self._silent()
                if silent >= self.stall_after:
                    break
                self._cond.wait(timeout=self.stall_after - silent)
            if self.waiting >= self.limit:
                busy = (f"{self.waiting} requests of this process already wait on the database, none answered "
                        f"for {self._silent():.1f} s")
                self._stall_locked(busy)
                raise DatabaseBusy(f"{busy}; it is not answering them")
            ticket = next(self._tickets)
            self._since[ticket] = time.monotonic()
            return ticket

    def _silent(self) -> float:
        """Seconds since the database last answered a wait of this process, or since the oldest wait
        began where that is later (an idle process's last answer may be an hour old)."""
        return time.monotonic() - max(self._answered_at, min(self._since.values()))

    def _leave(self, ticket: int, answered: bool) -> None:
        with self._cond:
            del self._since[ticket]
            if answered:
                self._answered_at = time.monotonic()
            if answered and self.stalled:
                self.stalled = False
                log.warning("The database answers again; requests of this process wait on it as usual")
            self._cond.notify()

    def _stall(self, why: str) -> None:
        with self._cond:
            self._stall_locked(why)

    def _stall_locked(self, why: str) -> None:
        if not self.stalled:
            log.warning("The database does not answer (%s): at most %d requests of this process wait on it, "
                        "the others answer 503 at once until it answers again", why, self.limit)
        self.stalled = True


@dataclass(frozen=True)
class Policy:
    timeout: float
    gate: Gate

    @property
    def statement_timeout_ms(self) -> int:
        """The server's own limit (``statement_timeout``), below ours: a live server that is merely slow
        cancels the statement and keeps the connection, before this side has to close it."""
        return max(1, int(1000 * max(self.timeout - 1, self.timeout / 2)))


_policy: Policy | None = None


def enable(timeout: float, waiters: int) -> Policy:
    """Bound every wait of this process on PostgreSQL by ``timeout`` s, with at most ``waiters`` at once."""
    global _policy
    _policy = Policy(float(timeout), Gate(waiters))
    return _policy


def disable() -> None:
    global _policy
    _policy = None


def current() -> Policy | None:
    return _policy


def _until(gen: Generator[Any, Any, Any], deadline: float, timeout: float) -> Generator[Any, Any, Any]:
    """``gen`` (one of psycopg's I/O generators) as it is, until ``deadline`` (``time.monotonic``) passes.

    psycopg's wait functions wake the generator every 0.1 s even when the socket says nothing,
    so a server that never answers is noticed within that of the deadline.
    """
    try:
        state = next(gen)
        while True:
            ready = yield state
            if time.monotonic() >= deadline:
                raise QueryDeadline(f"the database did not answer within {timeout:g} s (DATABASE_QUERY_TIMEOUT); "
                                    "the connection was closed")
            state = gen.send(ready)
    except StopIteration as stop:
        return stop.value


class DeadlineConnection(psycopg.Connection[Any]):
    """A psycopg connection whose waits, connecting included, follow ``current()``'s policy."""

    @classmethod
    def connect(cls, conninfo: str = "", **kwargs: Any) -> Any:
        policy = _policy
        if policy is None:
            return super().connect(conninfo, **kwargs)
        # libpq's connect_timeout bounds connecting; here it counts as a wait, and is refused when the
        # other threads already wait on a database that does not answer.
        with policy.gate.entered():
            return super().connect(conninfo, **kwargs)

    def wait(self, gen: Any, interval: float = 0.1) -> Any:
        policy = _policy
        if policy is None:
            return super().wait(gen, interval)
        with policy.gate.entered():
            try:
                return super().wait(_until(gen, time.monotonic() + policy.timeout, policy.timeout), interval)
            except QueryDeadline:
                # Mid-statement, with an answer that may still come: nothing else can use it.
                self.close()
                raise
