"""What an operator watches and what the site answers when a service under it fails.

``unavailable``: 503 with ``Retry-After`` when the database, the broker or
storage is down or the disk is full (never for a bug); ``health``: the
readiness checks behind ``/readyz``; ``probes``: ``/healthz`` and ``/readyz``;
``metrics``: the site's Prometheus metrics at ``/metrics``.
"""
