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
of the oldest wait). Once it has been silent that long, the waits may all be
queued on a row lock held by another process (twelve uploads of one user take
turns on its row across the web processes), so the thread asks the server itself
(``probe``: ``SELECT 1`` on a connection of its own, within ``PROBE_SECONDS``): a
server that answers counts as an answer, and the thread waits on; one that does
not is stalled, and the thread is refused (``DatabaseBusy``, also a 503); from then
on, until some wait gets an answer again, it is refused at once.

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
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass
from typing import Any

import psycopg

log = logging.getLogger(__name__)

# How long the database stays silent to a process, every slot taken, before it is taken for stalled
# (and /healthz, waiting for no slot, answers within it). Silence, not the oldest wait's age: on a loaded
# machine (CI: twelve uploads and eight pollers on two cores) one statement outlasted a second while the
# other slot's were answered, and judging by the oldest wait refused every upload of a healthy database.
STALL_SECONDS = 0.5
# How long the server has to answer the probe (a fresh connection and SELECT 1) after such a silence: the
# two together stay under a second, so /healthz, queued behind a thread that waits, answers within one.
PROBE_SECONDS = 0.4


class QueryDeadline(psycopg.OperationalError):
    """The database did not answer within the deadline; the connection was closed."""


class DatabaseBusy(psycopg.OperationalError):
    """As many threads of this process as may wait on the database wait on it already."""


class Gate:
    """How many threads of this process wait on the database now, and whether it stopped answering."""

    def __init__(self, limit: int, stall_after: float = STALL_SECONDS,
                 probe: Callable[[], bool] | None = None) -> None:
        self.limit = max(1, limit)
        self.stall_after = stall_after
        self.probe = probe  # whether the server answers, asked within PROBE_SECONDS; None: silence is a hang
        self._probing = False
        self._since: dict[int, float] = {}  # each wait's start (time.monotonic), by its ticket
        self._answered_at = float("-inf")  # the last answer to a wait of this process
        self._tickets = itertools.count()
        # Set when a wait ran out of time or a thread was refused; cleared by the next answer.
        self.stalled = False
        self._cond = threading.Condition()

    @contextlib.contextmanager
    def entered(self, in_transaction: bool = False) -> Iterator[None]:
        """A slot for one wait on the database; ``DatabaseBusy`` when none is free.

        A connection ``in_transaction`` (between the statements of an open transaction) is let through
        beyond the limit, unless the database is known not to answer: it may hold the row locks the
        threads in the slots wait for (twelve uploads of one user take turns on its row), and holding
        it back would leave them all waiting until the server's statement timeout.
        """
        ticket = self._enter(in_transaction)
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

    def _enter(self, in_transaction: bool = False) -> int:
        with self._cond:
            while self.waiting >= self.limit and not self.stalled and not in_transaction:
                silent = self._silent()
                if silent < self.stall_after or self._probing:
                    self._cond.wait(timeout=max(0.01, self.stall_after - silent))
                    continue
                if self.probe is None or not self._answers():
                    break
            if self.waiting >= self.limit and (self.stalled or not in_transaction):
                busy = (f"{self.waiting} requests of this process already wait on the database, none answered "
                        f"for {self._silent():.1f} s")
                self._stall_locked(busy)
                raise DatabaseBusy(f"{busy}; it is not answering them")
            ticket = next(self._tickets)
            self._since[ticket] = time.monotonic()
            return ticket

    def _answers(self) -> bool:
        """Whether the server answers a probe (asked with the condition released; one probe at a time)."""
        assert self.probe is not None
        self._probing = True
        self._cond.release()
        try:
            alive = self.probe()
        finally:
            self._cond.acquire()
            self._probing = False
            self._cond.notify_all()
        if alive:
            self._answered_at = time.monotonic()
        return alive

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
    _policy = Policy(float(timeout), Gate(waiters, probe=_probe))
    return _policy


_probe_target: tuple[str, dict[str, Any]] | None = None  # how the last connection was made


def _probe() -> bool:
    """Whether the server answers ``SELECT 1`` on a fresh connection within ``PROBE_SECONDS``. The
    probe runs in a thread of its own: one to a server that does not answer ends at its connect
    timeout, not the caller's."""
    if _probe_target is None:
        return False
    conninfo, kwargs = _probe_target
    answered = threading.Event()

    def ask() -> None:
        try:
            with psycopg.Connection.connect(conninfo, **{**kwargs, "autocommit": True}) as conn:
                conn.execute("SELECT 1")
            answered.set()
        except Exception:  # noqa: BLE001 - a server that cannot answer is the finding
            pass

    threading.Thread(target=ask, name="database-probe", daemon=True).start()
    return answered.wait(PROBE_SECONDS)


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


_IN_TRANSACTION = (psycopg.pq.TransactionStatus.INTRANS, psycopg.pq.TransactionStatus.INERROR)


class DeadlineConnection(psycopg.Connection[Any]):
    """A psycopg connection whose waits, connecting included, follow ``current()``'s policy."""

    @classmethod
    def connect(cls, conninfo: str = "", **kwargs: Any) -> Any:
        policy = _policy
        if policy is None:
            return super().connect(conninfo, **kwargs)
        # libpq's connect_timeout bounds connecting; here it counts as a wait, and is refused when the
        # other threads already wait on a database that does not answer.
        global _probe_target
        _probe_target = (conninfo, {k: v for k, v in kwargs.items() if isinstance(v, str | int | float)})
        with policy.gate.entered():
            return super().connect(conninfo, **kwargs)

    def wait(self, gen: Any, interval: float = 0.1) -> Any:
        policy = _policy
        if policy is None:
            return super().wait(gen, interval)
        with policy.gate.entered(self.info.transaction_status in _IN_TRANSACTION):
            try:
                return super().wait(_until(gen, time.monotonic() + policy.timeout, policy.timeout), interval)
            except QueryDeadline:
                # Mid-statement, with an answer that may still come: nothing else can use it.
                self.close()
                raise
