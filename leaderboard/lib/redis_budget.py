"""One budget per web request over every call to Redis: ``REDIS_REQUEST_TIMEOUT`` seconds in all (2 s).

A Redis that hangs (stopped, swapping, a network that drops packets) accepts
connections and never answers. Each client gives up after its own socket
timeout, but a request makes several calls (the page cache's reads, the
invalidation after a change, the note of an attempt, the send of a score
request with its retries), and those timeouts and retries added up to 23 s for
one upload. Here the request's calls share one budget: each waits at most what
is left of it, and once it is spent the rest fail at once (``BudgetSpent``, a
``redis.TimeoutError``), which every caller already treats as "Redis is down":
pages render uncached, a submission stays queued for the sweeper.

- ``RequestBudgetMiddleware`` (first in MIDDLEWARE) gives each request its budget;
  outside a request (the site worker, the sweeper, a shell) nothing is bounded.
- ``connection_class(url)``: redis-py's connection class for ``url`` (TCP, TLS or a
  Unix socket) whose connects, sends and reads wait at most what is left.
- ``bounded(call)``: for clients whose sockets are not ours (Celery's sends through
  Kombu): runs ``call`` on a helper thread and waits what is left; when it is not done
  by then, the request goes on without it (a send that completes later is harmless:
  the sweeper's second copy of a score request is dropped by the worker's claim).

Only the time spent waiting on Redis counts, not the request's other work.
"""

from __future__ import annotations

import contextlib
import functools
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any, TypeVar

import redis
from django.conf import settings
from django.http import HttpRequest, HttpResponse
from redis.backoff import NoBackoff
from redis.retry import Retry

T = TypeVar("T")

# No retry (redis-py's connections' own default; its ``Redis`` client's default would sleep seconds
# between tries): a request either gets an answer within its budget or goes on without Redis.
NO_RETRY = Retry(NoBackoff(), 0)
# Helper threads for ``bounded`` per process; past them a request does not wait at all.
HELPERS = 2

_state = threading.local()


class BudgetSpent(redis.TimeoutError):
    """The request's time for Redis is spent (or Redis did not answer within it)."""


def remaining() -> float | None:
    """Seconds of Redis left to this thread's request; None outside a request (no bound)."""
    return getattr(_state, "left", None)


@contextlib.contextmanager
def request_budget(seconds: float) -> Iterator[None]:
    """Every Redis call of this thread within the block shares ``seconds``."""
    previous = remaining(), getattr(_state, "total", None)
    _state.left, _state.total, _state.depth = float(seconds), float(seconds), 0
    try:
        yield
    finally:
        _state.left, _state.total = previous


@contextlib.contextmanager
def _spending() -> Iterator[None]:
    """Count the time of the block against the budget (once, however deeply such blocks nest)."""
    _state.depth = getattr(_state, "depth", 0) + 1
    started = time.monotonic()
    try:
        yield
    finally:
        _state.depth -= 1
        if _state.depth == 0 and _state.left is not None:
            _state.left -= time.monotonic() - started


def _spent(what: str) -> BudgetSpent:
    return BudgetSpent(f"{what}: this request's time for Redis ({_state.total:g} s, REDIS_REQUEST_TIMEOUT) is spent")


def _capped(timeout: float | None, left: float) -> float:
    return max(0.001, left if timeout is None else min(timeout, left))


class _Budgeted:
    """Mixed into a redis-py connection class: connect, send and read wait at most what is left."""

    _sock: Any
    socket_timeout: float | None
    socket_connect_timeout: float | None

    def connect_check_health(self, *args: Any, **kwargs: Any) -> Any:
        left = remaining()
        if left is None or self._sock:
            return super().connect_check_health(*args, **kwargs)  # type: ignore[misc]
        if left <= 0:
            raise _spent("not connecting to Redis")
        saved = self.socket_connect_timeout, self.socket_timeout
        self.socket_connect_timeout, self.socket_timeout = _capped(saved[0], left), _capped(saved[1], left)
        try:
            with _spending():
                return super().connect_check_health(*args, **kwargs)  # type: ignore[misc]
        finally:
            self.socket_connect_timeout, self.socket_timeout = saved
            if self._sock is not None and getattr(_state, "depth", 0) == 0:
                self._sock.settimeout(self.socket_timeout)  # a send or read inside caps it again

    def send_packed_command(self, *args: Any, **kwargs: Any) -> Any:
        with self._within_budget():
            return super().send_packed_command(*args, **kwargs)  # type: ignore[misc]

    def read_response(self, *args: Any, **kwargs: Any) -> Any:
        with self._within_budget():
            return super().read_response(*args, **kwargs)  # type: ignore[misc]

    @contextlib.contextmanager
    def _within_budget(self) -> Iterator[None]:
        left = remaining()
        if left is None:
            yield
            return
        if self._sock is not None:  # a spent budget still lets an answer already received through
            self._sock.settimeout(_capped(self.socket_timeout, left))
        try:
            with _spending():
                yield
        finally:
            if self._sock is not None:  # redis-py closed it on a timeout; else back to its own timeout
                self._sock.settimeout(self.socket_timeout)


@functools.cache
def _budgeted(base: type) -> type:
    return type(f"Budgeted{base.__name__}", (_Budgeted, base), {})


def connection_class(url: str) -> type:
    """redis-py's connection class for ``url`` (as ``ConnectionPool.from_url`` would pick it), budgeted."""
    from redis.connection import parse_url

    return _budgeted(parse_url(url).get("connection_class", redis.Connection))


_helpers = ThreadPoolExecutor(max_workers=HELPERS, thread_name_prefix="redis-budget")
_free_helpers = threading.BoundedSemaphore(HELPERS)


def _release_after(call: Callable[[], T]) -> T:
    try:
        return call()
    finally:
        _free_helpers.release()


def bounded(call: Callable[[], T], what: str) -> T:
    """``call()`` (I/O with Redis through sockets this module cannot cap), waited for at most what is
    left of the request's budget; ``BudgetSpent`` when it is not done by then (it may still finish)."""
    left = remaining()
    if left is None:
        return call()
    if left <= 0:
        raise _spent(what)
    if not _free_helpers.acquire(blocking=False):
        raise BudgetSpent(f"{what}: earlier calls of this process still wait for Redis")
    future = _helpers.submit(_release_after, call)
    with _spending():
        try:
            return future.result(timeout=left)
        except FutureTimeout:
            raise BudgetSpent(f"{what}: Redis did not answer within this request's {_state.total:g} s "
                              "(REDIS_REQUEST_TIMEOUT)") from None


class RequestBudgetMiddleware:
    """First in MIDDLEWARE: every request's Redis calls share ``REDIS_REQUEST_TIMEOUT`` seconds."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if settings.REDIS_REQUEST_TIMEOUT <= 0:
            return self.get_response(request)
        with request_budget(settings.REDIS_REQUEST_TIMEOUT):
            return self.get_response(request)
