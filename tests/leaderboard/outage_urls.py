"""The site's URLs plus one view that raises whatever a test puts in ``RAISE`` (tests of 503s)."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.urls import path

from leaderboard.urls import handler500
from leaderboard.urls import urlpatterns as site_urls

RAISE: dict[str, BaseException] = {}


def boom(request: HttpRequest) -> HttpResponse:
    raise RAISE["exc"]


urlpatterns = [path("api/v1/boom", boom), path("boom", boom), *site_urls]
__all__ = ["handler500", "urlpatterns"]
