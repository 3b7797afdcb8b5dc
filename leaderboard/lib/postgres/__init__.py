"""PostgreSQL as the web processes use it: every wait on the server has a deadline measured here.

``waits``: psycopg's connection with a deadline on each wait and a per-process
gate on how many threads wait at once; ``base``: the Django backend that makes
its connections (``ENGINE = "leaderboard.lib.postgres"``, set by the settings
for any PostgreSQL ``DATABASE_URL``).
"""
