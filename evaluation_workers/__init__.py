"""Scoring core and Celery worker of the leaderboard service.

The core (everything here but ``worker/``: ``tracks``, ``metrics``, ``errors``, ``results``, ``_xp``, ...)
imports no Django and no Celery: it is a distribution of its own, ``scene-leaderboards-core``
(``distributions/core``), which a researcher installs alone to run ``python -m evaluation_workers``.
Track plugins import it through ``evaluation_workers.plugin`` only. ``worker/`` is the
``scene-leaderboards-worker`` distribution (``distributions/worker``).
"""
