"""Failed sign-ins and failed API tokens, counted per client address across usernames and tokens.

django-axes locks one username out from one address (``LOGIN_FAILURE_LIMIT``).
Password spraying (one password tried on many usernames) and token guessing
pass under that count, so each address also has its own: past
``LOGIN_FAILURES_PER_ADDRESS`` failed sign-ins, or ``TOKEN_FAILURES_PER_ADDRESS``
failed token authentications, within one window of
``ADDRESS_THROTTLE_WINDOW`` seconds, the address gets 429 with ``Retry-After``
(the sign-in page, or the API's error) until the window ends, whatever
username or token it sends. A success never resets the count: a sprayer who
knows one password must not refill it.

The counts live in the cache (Redis, shared by every web process), never in
the database: a guessing client must not turn into database writes. When the
cache is unreachable nobody is limited here; the lockout per username, kept
in the database, still holds. The address is the one django-axes uses
(``REMOTE_ADDR`` unless ``AXES_CLIENT_IP_CALLABLE`` or ipware say otherwise).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

from axes.helpers import get_client_ip_address
from django.conf import settings
from django.contrib.auth.signals import user_login_failed
from django.core.cache import caches
from django.core.exceptions import PermissionDenied
from django.dispatch import receiver
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from leaderboard.lib.pagecache import CACHE_ALIAS, CacheErrors

log = logging.getLogger(__name__)

_REQUEST_ATTR = "address_throttled"


@dataclass(frozen=True)
class Throttle:
    """One kind of failure counted per address: ``limit_setting`` failures per window."""

    kind: str  # in cache keys
    what: str  # in the log
    limit_setting: str

    @property
    def limit(self) -> int:
        return int(getattr(settings, self.limit_setting))

    def _key(self, request: HttpRequest, now: float) -> tuple[str, float]:
        """The cache key of the current window for the request's address, and the window's end."""
        window = int(settings.ADDRESS_THROTTLE_WINDOW)
        index = int(now // window)
        address = get_client_ip_address(request) or "unknown"
        return f"throttle:{self.kind}:{address}:{index}", (index + 1) * window

    def retry_after(self, request: HttpRequest) -> int | None:
        """Seconds until the address may try again, or None while it is under the limit."""
        if self.limit <= 0:
            return None
        now = time.time()
        key, ends = self._key(request, now)
        try:
            failures = caches[CACHE_ALIAS].get(key) or 0
        except CacheErrors as exc:
            log.warning("Address throttle of %s unavailable: %s", self.what, exc)
            return None
        return max(1, int(ends - now) + 1) if failures >= self.limit else None

    def note_failure(self, request: HttpRequest) -> None:
        now = time.time()
        key, ends = self._key(request, now)
        cache = caches[CACHE_ALIAS]
        try:
            cache.add(key, 0, timeout=int(ends - now) + 1)
            failures = cache.incr(key)
        except (*CacheErrors, ValueError) as exc:  # ValueError: the key expired between add and incr
            log.warning("Address throttle of %s could not count a failure: %s", self.what, exc)
            return
        if failures == self.limit:
            log.warning("%s failed %s from %s in this window: refusing that address until %s", self.limit,
                        self.what, get_client_ip_address(request), time.strftime("%H:%M:%S", time.gmtime(ends)))


LOGINS = Throttle("login", "sign-ins", "LOGIN_FAILURES_PER_ADDRESS")
TOKENS = Throttle("token", "token authentications", "TOKEN_FAILURES_PER_ADDRESS")


@receiver(user_login_failed)
def _count_failed_login(sender: Any, credentials: dict[str, Any], request: HttpRequest | None = None,
                        **_: Any) -> None:
    if request is not None:
        LOGINS.note_failure(request)


class AddressThrottleBackend:
    """An authentication backend, after django-axes's: refuses every sign-in from an address past its limit.

    Raising ``PermissionDenied`` stops ``authenticate`` before any password is checked (and counts
    as a failure); ``AddressThrottleMiddleware`` turns the refusal into a 429 page. It has no
    ``get_user``, so that it is never the backend a session is tied to.
    """

    def authenticate(self, request: HttpRequest | None, **credentials: Any) -> None:
        if request is not None and (wait := LOGINS.retry_after(request)) is not None:
            setattr(request, _REQUEST_ATTR, wait)
            raise PermissionDenied("Too many failed sign-ins from this address.")


class AddressThrottleMiddleware:
    """Answers a sign-in refused for its address with 429 and ``Retry-After`` (after the view ran)."""

    def __init__(self, get_response: Any) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        wait = getattr(request, _REQUEST_ATTR, None)
        if wait is None:
            return response
        refused = render(request, "registration/address_throttled.html",
                         {"limit": LOGINS.limit, "minutes": max(1, int(settings.ADDRESS_THROTTLE_WINDOW) // 60),
                          "wait_minutes": max(1, -(-wait // 60))}, status=429)
        refused["Retry-After"] = str(wait)
        return refused
