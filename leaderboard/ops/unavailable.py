"""503 with ``Retry-After`` when a service the site needs fails, instead of a bare 500.

``UnavailableMiddleware`` answers a view's exception of a failed service
(``outages.outage``); ``server_error`` (handler500) answers one raised elsewhere
(a session saved by its middleware). Under ``/api/`` the answer is the API's
error shape (code ``unavailable``), elsewhere the styled 503 page, which needs
no database. Each is logged as one warning line, and counted (``metrics``).
Any other exception is left as it was: a 500 with its traceback in the log.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from datetime import timedelta

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.template import loader
from django.utils import timezone

from leaderboard.api_errors import API_PREFIX, api_error
from leaderboard.api_errors import server_error as api_server_error
from leaderboard.ops import metrics
from leaderboard.ops.outages import WHAT, outage

log = logging.getLogger(__name__)


def unavailable_response(request: HttpRequest, cause: str, detail: str = "") -> HttpResponse:
    """The 503 of ``cause``: the API's error under /api/, the styled page elsewhere; both with Retry-After.
    ``detail`` says what became of the request (an upload not stored, nothing counted)."""
    seconds = int(settings.UNAVAILABLE_RETRY_AFTER)
    message = f"{WHAT[cause]}; {detail or 'the request was not completed.'} Try again in {seconds} seconds."
    response: HttpResponse
    if request.path.startswith(API_PREFIX):
        response = api_error(message, 503, "unavailable", timezone.now() + timedelta(seconds=seconds))
    else:
        # Rendered without a request context: no context processor may reach the database.
        response = HttpResponse(loader.get_template("503.html").render(
            {"what": WHAT[cause], "detail": detail, "seconds": seconds}), status=503)
    response["Retry-After"] = str(seconds)  # exactly, not the seconds left after rendering
    response["Cache-Control"] = "no-store"
    metrics.UNAVAILABLE.labels(cause).inc()
    return response


def _answer(request: HttpRequest, exc: BaseException) -> HttpResponse | None:
    cause = outage(exc)
    if cause is None:
        return None
    log.warning("503 for %s %s: %s (%s: %s)", request.method, request.path, WHAT[cause], type(exc).__name__,
                str(exc)[:300])
    return unavailable_response(request, cause, getattr(exc, "detail", ""))


class UnavailableMiddleware:
    """Maps a view's exception of a failed service to 503 (``outage``); any other exception passes on."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exc: Exception) -> HttpResponse | None:
        return _answer(request, exc)


def server_error(request: HttpRequest) -> HttpResponse:
    """handler500: Django calls it while handling the exception, so it is ``sys.exception()`` here;
    a failed service (raised outside a view, e.g. by the session middleware) gets its 503."""
    exc = sys.exception()
    response = _answer(request, exc) if exc is not None else None
    return response or api_server_error(request)
