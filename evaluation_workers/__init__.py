"""Scoring core and Celery worker of the leaderboard service.

The core (``tracks``, ``metrics``, ``errors``, ``results``, ``_xp``) imports
no Django: a researcher runs it alone with ``python -m evaluation_workers``.
"""
