"""A small client of ``/api/v1``: one method per call, errors as ``ApiError`` with the server's message."""

from __future__ import annotations

from typing import Any

import requests

from leaderboard_cli import __version__


class ApiError(Exception):
    """A failed call; ``str()`` is the message to show, ``status`` the HTTP status (0: no answer)."""

    def __init__(self, message: str, status: int = 0, body: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.body = body or {}


def error_message(body: Any) -> str | None:
    """The message of the API's error answer ``{"error": {"code", "message"}}``, if that is what ``body`` is."""
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict):
        return str(error.get("message") or error.get("code") or "") or None
    return str(error) if error else None  # an older server: {"error": "..."}


class Client:
    def __init__(self, server: str, token: str | None, timeout: float = 60) -> None:
        if not server:
            raise ApiError("No server configured: run `lb login --server URL` or set LB_SERVER.")
        self.server = server.rstrip("/")
        self.timeout = timeout
        self.session = requests.Session()
        self.session.headers["User-Agent"] = f"lb/{__version__}"
        if token:
            self.session.headers["Authorization"] = f"Token {token}"

    def url(self, path: str) -> str:
        return f"{self.server}/api/v1/{path.lstrip('/')}"

    def call(self, method: str, path: str, *, ok: tuple[int, ...] = (200, 201), **kwargs: Any) -> dict[str, Any]:
        try:
            response = self.session.request(method, self.url(path), timeout=self.timeout, **kwargs)
        except requests.ConnectionError:
            raise ApiError(f"Cannot reach {self.server}: is the server running and the URL right?") from None
        except requests.Timeout:
            raise ApiError(f"{self.server} did not answer within {self.timeout:.0f} s.") from None
        try:
            body = response.json()
        except ValueError:
            body = {}
        if response.status_code not in ok:
            raise ApiError(error_message(body) or f"HTTP {response.status_code} from {response.url}",
                           response.status_code, body if isinstance(body, dict) else {})
        return body

    def get(self, path: str, **kwargs: Any) -> dict[str, Any]:
        return self.call("GET", path, **kwargs)

    def post(self, path: str, **kwargs: Any) -> dict[str, Any]:
        return self.call("POST", path, **kwargs)
