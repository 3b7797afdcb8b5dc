"""Whole-response cache of the public read pages, invalidated by version numbers.

Every cached response is stored with a version number, and served only while
that number is current: one number per track (its leaderboard pages, exports
and API) and one for the pages that span tracks (home, method and entry
pages). A write that changes what those pages show calls ``bump(track)``
inside its transaction; the numbers move when the transaction commits, so a
reader never stores the old rows under the new number. A hit is one round
trip (the number and the page in one MGET); pages expire after
``PAGE_CACHE_SECONDS`` in any case.

Only requests without a session or a messages cookie are served from the
cache (and only they fill it): such a viewer is anonymous, so a maintainer's
view (embargoed scores) or a signed-in user's navigation bar can never reach
the public, and a hit costs no database query. Signed-in users render as
before; they are few, and their pages carry their name and CSRF token.

A page is stored when it answers 200 or 404 (an unknown id, asked again and
again, is as public as a board and ends with the same version). What the cache
stores it also tells a reverse proxy: ``Cache-Control: public, max-age=0,
s-maxage`` (a browser asks again each time; a shared cache keeps it at most
``PAGE_CACHE_MAX_AGE``, and never past the moment the page expires here, such
as an embargo's end), ``Vary: Cookie`` and an ``ETag``, with 304 to a
matching ``If-None-Match``. Every answer to a request with a session, a
messages cookie or credentials is ``private, no-store`` instead, unless its
view said otherwise.

Redis is an accelerator here, never a dependency: when it fails, pages render
uncached and the cache is left alone for ``RETRY_SECONDS``.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from datetime import datetime
from typing import Any
from urllib.parse import urlencode

import redis
from django.conf import settings
from django.contrib.messages.storage.cookie import CookieStorage
from django.core.cache import caches
from django.core.cache.backends.redis import RedisCache, RedisCacheClient
from django.db import transaction
from django.http import HttpRequest, HttpResponse
from django.urls import Resolver404, resolve
from django.utils import timezone
from django.utils.cache import (
    get_conditional_response,
    patch_cache_control,
    patch_vary_headers,
    set_response_etag,
)
from prometheus_client import Counter

from leaderboard.lib.counters import COUNTED

log = logging.getLogger(__name__)

CACHE_ALIAS = "default"
ALL = "*"  # the version of the pages that span tracks; every bump moves it
# After a cache error, stop asking Redis for this long (each try could wait for a timeout).
RETRY_SECONDS = 5.0
_UNTIL_ATTR = "_page_cache_until"
# Requests by anonymous visitors to cached pages: "hit" (served from the cache), "miss" (rendered), "error"
# (the cache failed to answer); served at /metrics (leaderboard.ops.metrics).
PAGE_CACHE = Counter("leaderboard_page_cache_requests", "Requests to cached public pages, by what the cache did",
                     ["result"], registry=COUNTED)
_HIT, _MISS, _ERROR = (PAGE_CACHE.labels(r) for r in ("hit", "miss", "error"))
# How long a request waits for another one that renders the same page (then renders it too).
RENDER_WAIT_SECONDS = 3.0
# Pages each process keeps in memory beside Redis (see _lookup), if not larger
# than LOCAL_PAGE_MAX_BYTES (a big board's full export is megabytes): 200 MB at most.
LOCAL_PAGES = 200
LOCAL_PAGE_MAX_BYTES = 2**20
_local: OrderedDict[tuple[str, str], Any] = OrderedDict()
_local_lock = threading.Lock()
# Version numbers each process read from Redis in the last PAGE_CACHE_VERSION_SECONDS: a hit of
# a page kept in memory then asks Redis nothing (the round trip was half of a hit's CPU). Another
# process's change reaches this one's pages within that time (a proxy may keep them for
# PAGE_CACHE_MAX_AGE); this process's own changes at once (_incr forgets what it read).
_versions: dict[tuple[str, str], tuple[Any, float]] = {}
_down_until = 0.0

CacheErrors = (redis.RedisError, OSError)


class _ReusingClient(RedisCacheClient):
    """Django's client builds a ``redis.Redis`` per operation (a dict of ~80 response
    callbacks each time: a third of a cache hit's CPU); build one per pool instead."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._clients: dict[int, Any] = {}

    def get_client(self, key: Any = None, *, write: bool = False) -> Any:
        index = self._get_connection_pool_index(write)
        if index not in self._clients:
            self._clients[index] = self._client(connection_pool=self._get_connection_pool(write))
        return self._clients[index]


class PageCache(RedisCache):
    """``django.core.cache.backends.redis.RedisCache`` with a reused client (CACHES)."""

    def __init__(self, server: str, params: dict[str, Any]) -> None:
        super().__init__(server, params)
        self._class = _ReusingClient


def _version_key(scope: str) -> str:
    return f"pages:v:{scope}"


def _cache_down() -> bool:
    return time.monotonic() < _down_until


def _cache_failed(what: str, error: Exception) -> None:
    global _down_until
    if not _cache_down():
        log.warning("Page cache unavailable (%s: %s); serving uncached for %.0f s", what, error, RETRY_SECONDS)
    _down_until = time.monotonic() + RETRY_SECONDS


def reset_after_outage() -> None:
    """Forget an earlier cache failure at once (tests; an operator's shell)."""
    global _down_until
    _down_until = 0.0


def _initial_version() -> int:
    # Milliseconds since the epoch: when a version key is lost (eviction, a
    # Redis restart) the new number is above every old one, so pages cached
    # under an old number are never served again.
    return time.time_ns() // 1_000_000


def _incr(scopes: list[str]) -> None:
    cache = caches[CACHE_ALIAS]
    try:
        for scope in scopes:
            key = _version_key(scope)
            _versions.pop((cache.key_prefix, key), None)
            cache.add(key, _initial_version(), timeout=None)
            cache.incr(key)
    except CacheErrors as error:
        # Pages cached before this change may be served until they expire
        # (PAGE_CACHE_SECONDS); that bounds the staleness of an outage.
        log.error("Could not invalidate cached pages of %s: %s", scopes, error)
        _cache_failed("invalidate", error)


def bump(track: str | None = None) -> None:
    """Invalidate the cached pages of ``track`` (and every cross-track page) once the
    current transaction commits; ``track=None`` invalidates only the cross-track pages."""
    scopes = [track, ALL] if track else [ALL]
    transaction.on_commit(lambda: _incr(scopes))


def cache_until(request: HttpRequest, when: datetime | None) -> None:
    """The response of ``request`` must not be served from the cache after ``when``
    (a split's embargo ends then, and the page shows more)."""
    if when is None or when <= timezone.now():
        return
    current = getattr(request, _UNTIL_ATTR, None)
    if current is None or when < current:
        setattr(request, _UNTIL_ATTR, when)


# The answers stored: a page, or the 404 of an id or track that does not exist (yet).
STORED_STATUSES = frozenset({200, 404})


def _personal(request: HttpRequest) -> bool:
    """Whether the request carries a session, a message or credentials: its answer is the viewer's own."""
    return (settings.SESSION_COOKIE_NAME in request.COOKIES
            or CookieStorage.cookie_name in request.COOKIES
            or "HTTP_AUTHORIZATION" in request.META)


def _cacheable_request(request: HttpRequest) -> bool:
    return request.method in {"GET", "HEAD"} and not _personal(request)


def _public(request: HttpRequest, response: HttpResponse, expires_at: float) -> HttpResponse:
    """``response`` (as stored until ``expires_at``) with what a reverse proxy needs to keep it;
    304 when the request holds its ETag already. A proxy may then show it up to s-maxage after a
    change, which the cache here never does: PAGE_CACHE_MAX_AGE bounds that delay."""
    age = min(int(settings.PAGE_CACHE_MAX_AGE), int(expires_at - time.time()))
    if age <= 0:
        return response
    # A browser asks again every time (a 304 when unchanged: its own visitor's change shows at
    # once); a shared cache in front keeps the page for ``age``.
    response["Cache-Control"] = f"public, max-age=0, s-maxage={age}"
    patch_vary_headers(response, ("Cookie",))  # pages stored before Vary was (an earlier release)
    return get_conditional_response(request, etag=response.get("ETag"), response=response)


def _page_key(request: HttpRequest, scope: str) -> str:
    # The full query, normalised: parameters sorted by name, repeated ones in their order.
    query = urlencode(sorted(request.GET.lists()), doseq=True)
    digest = hashlib.sha256(f"{request.path}?{query}".encode()).hexdigest()[:32]
    return f"pages:{scope}:public:{digest}"


def _current(stored: Any, version: int) -> bool:
    return stored is not None and stored[0] == version and time.time() < stored[1]


def _remember(key: str, stored: Any) -> Any:
    if len(stored[4]) > LOCAL_PAGE_MAX_BYTES:
        return stored
    local_key = (caches[CACHE_ALIAS].key_prefix, key)
    with _local_lock:
        _local[local_key] = stored
        _local.move_to_end(local_key)
        while len(_local) > LOCAL_PAGES:
            _local.popitem(last=False)
    return stored


def _lookup(version_key: str, key: str) -> tuple[int, Any]:
    """The current version and the stored page if it is current (else None).

    Pages seen by this process are kept in memory too: then only the small
    version number comes from Redis, not the page (boards and exports are tens
    to hundreds of KB). Otherwise one round trip brings both.
    """
    cache = caches[CACHE_ALIAS]
    local = _local.get((cache.key_prefix, key))
    if local is not None:
        version = _recent_version(cache, version_key)
        if version is not None and _current(local, version):
            return version, local
        stored = None if version is None else cache.get(key)
    else:
        found = cache.get_many([version_key, key])
        version, stored = found.get(version_key), found.get(key)
    if version is None:
        cache.add(version_key, _initial_version(), timeout=None)
        return cache.get(version_key), None
    return version, (_remember(key, stored) if _current(stored, version) else None)


def _recent_version(cache: Any, version_key: str) -> Any:
    """The version under ``version_key``, as read at most PAGE_CACHE_VERSION_SECONDS ago."""
    memo_key, now = (cache.key_prefix, version_key), time.monotonic()
    memo = _versions.get(memo_key)
    if memo is not None and now - memo[1] < settings.PAGE_CACHE_VERSION_SECONDS:
        return memo[0]
    version = cache.get(version_key)
    if version is not None:
        _versions[memo_key] = (version, now)
    return version


def _render_key(key: str, version: int) -> str:
    return f"{key}:render:{version}"


def _timeout(request: HttpRequest) -> int:
    timeout = int(settings.PAGE_CACHE_SECONDS)
    until = getattr(request, _UNTIL_ATTR, None)
    if until is not None:
        timeout = min(timeout, int((until - timezone.now()).total_seconds()))
    return timeout


def cached_page(scope_kwarg: str | None = None) -> Callable[[Callable[..., HttpResponse]],
                                                             Callable[..., HttpResponse]]:
    """Mark a public read view for ``PageCacheMiddleware``; ``scope_kwarg`` names the
    URL argument holding the track (pages of one track), else the page spans tracks."""

    def decorator(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
        view.page_cache_scope = scope_kwarg or ""  # type: ignore[attr-defined]
        return view

    return decorator


def _scope(request: HttpRequest) -> str | None:
    """The version scope of a request to a cached view, or None to render it as usual."""
    if settings.PAGE_CACHE_SECONDS <= 0 or _cache_down() or not _cacheable_request(request):
        return None
    return _path_scope(settings.ROOT_URLCONF, request.path_info)


@functools.lru_cache(maxsize=4096)
def _path_scope(urlconf: str, path: str) -> str | None:
    # Resolving the URL was a tenth of a hit's CPU; the answer depends on the path only.
    try:
        match = resolve(path, urlconf)
    except Resolver404:
        return None
    kwarg = getattr(match.func, "page_cache_scope", None)
    if kwarg is None:
        return None
    return str(match.kwargs[kwarg]) if kwarg else ALL


class PageCacheMiddleware:
    """Serves the views marked ``cached_page`` from the cache, first in MIDDLEWARE: a hit
    skips the other middleware and the view, and comes back with the headers that they
    added when the page was stored (security headers, Vary), less any cookie."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        scope = _scope(request)
        if scope is None:
            response = self.get_response(request)
            if _personal(request) and not response.has_header("Cache-Control"):
                patch_cache_control(response, private=True, no_store=True)
            return response
        cache = caches[CACHE_ALIAS]
        version_key, key = _version_key(scope), _page_key(request, scope)
        try:
            version, stored = _lookup(version_key, key)
        except CacheErrors as error:
            _cache_failed("read", error)
            _ERROR.inc()
            return self.get_response(request)
        rendering = False
        if stored is None:
            stored = self._wait_for_render(key, version)
            rendering = stored is None
        if stored is not None:
            _, _, status, headers, content = stored
            response = HttpResponse(content, status=status)
            for name, value in headers:
                response[name] = value
            response = _public(request, response, stored[1])
            response["X-Page-Cache"] = "hit"
            # Django logs every answer of 400 and above; an unknown id asked again and again was
            # logged when it was rendered (a flood of them costs a line each otherwise).
            response._has_been_logged = True  # type: ignore[attr-defined]
            _HIT.inc()
            return response
        response = self.get_response(request)
        _MISS.inc()
        timeout = _timeout(request)
        # A response that sets a cookie (a CSRF token, a message) belongs to one viewer.
        if (response.status_code in STORED_STATUSES and not response.cookies and not response.streaming
                and timeout > 0):
            patch_vary_headers(response, ("Cookie",))
            set_response_etag(response)
            stored = (version, time.time() + timeout, response.status_code, list(response.items()),
                      response.content)
            try:
                cache.set(key, stored, timeout)
                _remember(key, stored)
            except CacheErrors as error:
                _cache_failed("write", error)
            response = _public(request, response, stored[1])
            response["X-Page-Cache"] = "miss"
        elif rendering:
            # Nothing to wait for (a 400, a redirect, a page with a cookie): let the others render too.
            with contextlib.suppress(*CacheErrors):
                cache.delete(_render_key(key, version))
        return response

    @staticmethod
    def _wait_for_render(key: str, version: int) -> Any:
        """When another request renders this page already, its result (waiting up to
        RENDER_WAIT_SECONDS); None when this request should render it. Without this,
        a crowd that arrives just after a change renders the same board hundreds of times."""
        cache = caches[CACHE_ALIAS]
        try:
            if cache.add(_render_key(key, version), 1, timeout=int(RENDER_WAIT_SECONDS) + 1):
                return None
            deadline = time.monotonic() + RENDER_WAIT_SECONDS
            while time.monotonic() < deadline:
                time.sleep(0.02)
                stored = cache.get(key)
                if _current(stored, version):
                    return _remember(key, stored)
        except CacheErrors as error:
            _cache_failed("read", error)
        return None
