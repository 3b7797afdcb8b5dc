"""Errors of the JSON API, in one shape everywhere under ``/api/``::

    {"error": {"code": "not_found", "message": "No such submission."}}

``code`` is a stable slug for programs (``CODES`` by HTTP status, or a more
specific one such as ``invalid_file``); ``message`` is for people. Views answer
with ``api_error``; ``ApiErrorMiddleware`` turns whatever else happens under
``/api/`` (an unknown URL, ``Http404``, ``PermissionDenied``, a 405 from
``require_POST``, an unexpected exception) into the same shape, in DEBUG too,
and never with a traceback, and gives every 503 a ``Retry-After``. A failed
database, broker or storage is answered before it (``leaderboard.ops.unavailable``).
Pages outside ``/api/`` keep Django's handling.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from datetime import datetime
from typing import Any

from django.conf import settings
from django.core.exceptions import BadRequest, PermissionDenied, SuspiciousOperation
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.utils import timezone

log = logging.getLogger("django.request")

API_PREFIX = "/api/"
# The code of each status the API answers with, unless a view names a narrower one.
CODES = {400: "invalid_request", 401: "unauthorized", 403: "forbidden", 404: "not_found",
         405: "method_not_allowed", 409: "conflict", 413: "too_large", 429: "quota_exceeded",
         500: "server_error", 503: "unavailable"}
# Narrower codes that views use.
EXTRA_CODES = {"invalid_file": "The predictions file was refused; the message names the problem",
               "submission_failed": "The submission failed through no fault of the file (the platform's, refunded); "
                                    "the body is the failed submission",
               "labels_not_loaded": "The split is not open yet: its labels are not loaded (it opens when they are); "
                                    "the message names the splits that take submissions now",
               "phase_closed": "The split's challenge accepts no submission now (not started, frozen or "
                               "past its deadline); the message says until when",
               "throttled": "Too many failed authentications came from the client's address; retry after "
                            "Retry-After seconds",
               "selection_locked": "Publishing or withdrawing would change the team's final selection on the "
                                   "split (from its freeze on); the message says since when and what is still "
                                   "allowed",
               # Who may take part in a benchmark (leaderboard.participation.gate): 403 for an upload refused,
               # 409 for terms_version_mismatch.
               "banned": "A maintainer banned you from the benchmark (or staff from every benchmark); the message says "
                         "why",
               "email_domain_not_allowed": "The benchmark accepts addresses at some domains only, or refuses yours; the "
                                           "message names them",
               "email_not_verified": "The benchmark asks for a verified e-mail address; the message says where to verify "
                                     "yours",
               "terms_not_accepted": "Accept the benchmark's terms of use first: error.terms_url shows them, "
                                     "POST /api/v1/benchmarks/<track>/participation with {\"accept_terms\": "
                                     "error.terms_version} (or `lb participate <track>`) accepts them",
               "participation_pending": "The benchmark's maintainers approve each participant: the request waits (or "
                                        "was not made yet)",
               "participation_denied": "The maintainers denied the request, or the benchmark takes invited users only",
               "terms_version_mismatch": "The terms' version given is not the current one: read them again "
                                         "(error.terms_url) and accept error.terms_version",
               "too_many_published": "The team already has as many published rows on the split as its challenge "
                                     "phase allows; the message names them"}


def api_error(message: str, status: int, code: str | None = None,
              retry_at: datetime | None = None, fields: dict[str, str] | None = None) -> JsonResponse:
    """The API's error answer; ``code`` defaults to the status's (``CODES``).

    ``retry_at``: when the request may succeed (a quota's next allowed
    submission), sent as ``retry_at`` in the body and as ``Retry-After`` seconds.
    ``fields``: more members of ``error`` that say what to do (``terms_url``, ``terms_version``).
    """
    code = code or CODES.get(status) or ("server_error" if status >= 500 else "invalid_request")
    error: dict[str, Any] = {"code": code, "message": message, **(fields or {})}
    if retry_at is not None:
        error["retry_at"] = retry_at.isoformat()
    response = JsonResponse({"error": error}, status=status)
    if retry_at is not None:
        response["Retry-After"] = str(max(0, math.ceil((retry_at - timezone.now()).total_seconds())))
    return response


def failed_submission(body: dict[str, Any]) -> JsonResponse:
    """400 for a submission whose file was refused (or could not be scored): the submission's JSON,
    its ``error`` in the API's shape with the failure's ``kind`` kept."""
    failure = body["error"]
    code = "invalid_file" if failure["kind"] == "invalid_input" else "submission_failed"
    return JsonResponse({**body, "error": {"code": code, "message": failure["message"], "kind": failure["kind"]}},
                        status=400)


def _is_api(request: HttpRequest) -> bool:
    return request.path.startswith(API_PREFIX)


def _where(request: HttpRequest) -> str:
    return f"{request.method} {request.path}"


def exception_response(request: HttpRequest, exc: Exception) -> JsonResponse:
    """The API's answer to an exception a view did not handle."""
    if isinstance(exc, Http404):
        return api_error(str(exc) or f"Nothing at {request.path}.", 404)
    if isinstance(exc, PermissionDenied):
        return api_error(str(exc) or f"You may not {_where(request)}.", 403)
    if isinstance(exc, (BadRequest, SuspiciousOperation)):
        return api_error(f"Bad request to {_where(request)}.", 400)
    log.error("Internal Server Error: %s", request.path, exc_info=exc, extra={"status_code": 500,
                                                                              "request": request})
    return api_error(f"The server failed on {_where(request)}; the error was logged.", 500)


def _generic_message(request: HttpRequest, response: HttpResponse) -> str:
    status = response.status_code
    if status == 404:
        return f"No API endpoint or object at {request.path}; see /api/v1/openapi.json."
    if status == 405:
        return f"{request.method} is not allowed on {request.path}; expected {response.get('Allow', 'another')}."
    if status == 403:
        return f"You may not {_where(request)}."
    if status >= 500:
        return f"The server failed on {_where(request)}; the error was logged."
    return f"HTTP {status} from {_where(request)}."


class ApiErrorMiddleware:
    """First in MIDDLEWARE: sees every answer under /api/, including Django's own 404 and 500."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if _is_api(request) and response.status_code == 503 and "Retry-After" not in response:
            # Every "unavailable" says when to try again (storage down during an upload, a readiness check).
            response["Retry-After"] = str(settings.UNAVAILABLE_RETRY_AFTER)
        if (_is_api(request) and response.status_code >= 400
                and not response.get("Content-Type", "").startswith("application/json")):
            replaced = api_error(_generic_message(request, response), response.status_code)
            for header in ("Allow", "Retry-After"):
                if header in response:
                    replaced[header] = response[header]
            return replaced
        return response

    def process_exception(self, request: HttpRequest, exc: Exception) -> HttpResponse | None:
        return exception_response(request, exc) if _is_api(request) else None


def server_error(request: HttpRequest) -> HttpResponse:
    """handler500: JSON under /api/, the site's page elsewhere."""
    if _is_api(request):
        return api_error(_generic_message(request, HttpResponse(status=500)), 500)
    from django.views.defaults import server_error as page

    return page(request)
