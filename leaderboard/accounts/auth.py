"""Authentication of API requests: ``Authorization: Token <key>`` or the session.

Failed token authentications are counted per client address (``throttle.TOKENS``):
past ``TOKEN_FAILURES_PER_ADDRESS`` in a window, every token request from that
address gets 429 until the window ends.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from functools import wraps
from typing import Any

from django.http import HttpRequest
from django.middleware.csrf import CsrfViewMiddleware
from django.utils import timezone

from leaderboard.accounts.services import TokenError, authenticate_key
from leaderboard.accounts.throttle import TOKENS
from leaderboard.api_errors import api_error

__all__ = ["api_auth", "api_error"]


def api_auth(required: bool = True) -> Callable:
    """Set ``request.user`` from a token header if one is given; 401 with the reason if it is bad.

    Token requests are exempt from CSRF (no cookies are involved); requests
    authenticated by the session cookie are CSRF-checked here.
    """

    def decorator(view: Callable) -> Callable:
        @wraps(view)
        def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> Any:
            header = request.headers.get("Authorization", "")
            if header:
                if (wait := TOKENS.retry_after(request)) is not None:
                    return api_error(f"More than {TOKENS.limit} failed token authentications came from your "
                                     "address in this window; token requests from it are refused until it ends.",
                                     429, "throttled", timezone.now() + timedelta(seconds=wait))
                scheme, _, key = header.partition(" ")
                if scheme.lower() != "token" or not key.strip():
                    TOKENS.note_failure(request)
                    return api_error("Expected the header 'Authorization: Token <key>'.", 401)
                try:
                    request.user = authenticate_key(key.strip())
                except TokenError as exc:
                    TOKENS.note_failure(request)
                    return api_error(str(exc), 401)
            elif request.method not in ("GET", "HEAD", "OPTIONS"):
                rejected = CsrfViewMiddleware(lambda r: None).process_view(request, None, (), {})
                if rejected is not None:
                    return api_error("CSRF check failed: use a token or the site's forms.", 403)
            if required and not request.user.is_authenticated:
                return api_error("Authentication required: send 'Authorization: Token <key>'.", 401)
            return view(request, *args, **kwargs)

        wrapped.csrf_exempt = True  # type: ignore[attr-defined]
        return wrapped

    return decorator
