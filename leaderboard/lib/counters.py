"""The counters counted in each web process, in one registry that ``/metrics`` serves
(``leaderboard.ops.metrics``, summed over processes in prometheus_client's multiprocess mode).

Each counter is defined beside the code that counts it (the page cache's in ``pagecache``), in this
registry: so ``lib`` needs nothing of the floors above it to count.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry

COUNTED = CollectorRegistry(auto_describe=True)
