"""Logging filters the settings' LOGGING uses."""

from __future__ import annotations

import logging


class NoClientErrorTraceback(logging.Filter):
    """Keep 4xx lines of ``django.request`` to one line each.

    Django logs every ``PermissionDenied`` (403) and bad request with the raised
    exception attached, so a crawler poking at /moderation/ fills the log with
    tracebacks of code working as intended. A 4xx is the client's; only 5xx
    keep their traceback.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        status = getattr(record, "status_code", None)
        if isinstance(status, int) and 400 <= status < 500:
            record.exc_info = None
            record.exc_text = None
        return True
