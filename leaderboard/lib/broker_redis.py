"""The broker's Redis, for what the site keeps there beside Celery's messages: one client per URL, whose
sockets give up within seconds (a broker that hangs must not hang a request or a task)."""

from __future__ import annotations

import functools
from typing import Any

REDIS_SCHEMES = ("redis://", "rediss://", "redis+socket://")


@functools.lru_cache(maxsize=4)
def client(url: str) -> Any:
    import redis

    from leaderboard.lib import redis_budget

    # In a web request, its calls spend the request's time for Redis (redis_budget).
    return redis.Redis.from_url(url, socket_timeout=2, socket_connect_timeout=2, retry=redis_budget.NO_RETRY,
                                connection_class=redis_budget.connection_class(url))
