"""Django's PostgreSQL backend, with connections whose waits have deadlines (``waits``).

Everything else is Django's own (``django.db.backends.postgresql``): the settings
name this package as the ENGINE of a PostgreSQL ``DATABASE_URL``.
"""

from __future__ import annotations

from typing import Any

import psycopg
from django.db.backends.postgresql import base

from leaderboard.lib.postgres import waits


class _Driver:
    """psycopg as the backend sees it (``DatabaseWrapper.Database``: its errors, its types), except that
    ``connect`` makes a ``waits.DeadlineConnection``."""

    connect = staticmethod(waits.DeadlineConnection.connect)

    def __getattr__(self, name: str) -> Any:
        return getattr(psycopg, name)


class DatabaseWrapper(base.DatabaseWrapper):
    Database = _Driver()

    def get_connection_params(self) -> dict[str, Any]:
        params = super().get_connection_params()
        policy = waits.current()
        if policy is not None:
            # The server's own limit, for a server that runs but is slow; the deadline here is for one
            # that does not answer at all.
            params["options"] = f"{params.get('options', '')} -c statement_timeout={policy.statement_timeout_ms}"
        return params
