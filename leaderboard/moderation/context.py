from typing import Any

from django.http import HttpRequest

from leaderboard.benchmarks.permissions import is_maintainer


def maintainer(request: HttpRequest) -> dict[str, Any]:
    """``is_maintainer`` for the navigation bar, evaluated only when a template reads it."""
    return {"is_maintainer": lambda: is_maintainer(request.user)}
