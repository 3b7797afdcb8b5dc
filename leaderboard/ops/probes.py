"""The operator's endpoints, answered first in MIDDLEWARE, before host checks, sessions and the page cache.

- ``/healthz``: the process is alive and answering; no I/O at all (a liveness probe).
- ``/readyz``: the checks of ``health.readiness`` as JSON, each with its status
  and latency, within ``READYZ_TIMEOUT`` seconds whatever hangs; 200 when all
  pass (``ok``) or only the broker or storage fail (``degraded``: pages and
  uploads still work, uploads wait queued), 503 with ``Retry-After`` when the
  database fails (``fail``): a readiness probe, a load balancer's health check.
- ``/metrics``: Prometheus metrics (``metrics.registry``), only to a scraper that
  sends ``Authorization: Bearer <METRICS_TOKEN>`` or connects from an address in
  ``METRICS_ALLOWED_IPS``; with neither set, to no one.

They are answered whatever the ``Host`` header says: probes and scrapers reach
a web process by its address, which ``ALLOWED_HOSTS`` rarely lists.
"""

from __future__ import annotations

import hmac
import ipaddress
from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from leaderboard.ops import metrics
from leaderboard.ops.health import FAIL, readiness, verdict


def healthz(request: HttpRequest) -> HttpResponse:
    return JsonResponse({"status": "ok"})


def readyz(request: HttpRequest) -> HttpResponse:
    checks = readiness()
    status = verdict(checks)
    response = JsonResponse({"status": status, "checks": {name: check.as_json() for name, check in checks.items()}},
                            status=503 if status == FAIL else 200)
    if status == FAIL:
        response["Retry-After"] = str(settings.UNAVAILABLE_RETRY_AFTER)
    return response


def metrics_allowed(request: HttpRequest) -> bool:
    token = settings.METRICS_TOKEN
    if token and hmac.compare_digest(request.META.get("HTTP_AUTHORIZATION", "").encode(),
                                     f"Bearer {token}".encode()):
        return True
    try:
        address = ipaddress.ip_address(request.META.get("REMOTE_ADDR", ""))
    except ValueError:
        return False
    return any(address in network for network in settings.METRICS_ALLOWED_NETWORKS)


def metrics_view(request: HttpRequest) -> HttpResponse:
    if not metrics_allowed(request):
        return HttpResponse("Expected 'Authorization: Bearer <METRICS_TOKEN>' or an address in METRICS_ALLOWED_IPS.\n",
                            status=403, content_type="text/plain; charset=utf-8")
    return HttpResponse(generate_latest(metrics.registry()), content_type=CONTENT_TYPE_LATEST)


ENDPOINTS: dict[str, Callable[[HttpRequest], HttpResponse]] = {
    "/healthz": healthz, "/readyz": readyz, "/metrics": metrics_view}


class ProbeMiddleware:
    """First in MIDDLEWARE: answers ``ENDPOINTS`` (GET or HEAD), and passes everything else on."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        endpoint = ENDPOINTS.get(request.path_info)
        if endpoint is None or request.method not in ("GET", "HEAD"):
            return self.get_response(request)
        response = endpoint(request)
        response["Cache-Control"] = "no-store"
        return response
