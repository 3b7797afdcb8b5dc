import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "leaderboard.settings")
application = get_wsgi_application()


def _bound_database_waits() -> None:
    """Every wait of this web process on PostgreSQL has a deadline, and one thread is always left to
    answer what needs no database (leaderboard.lib.postgres.waits; settings: DATABASE_QUERY_TIMEOUT)."""
    from django.conf import settings

    from leaderboard.lib.postgres import waits

    if settings.DATABASE_QUERY_TIMEOUT > 0:
        waits.enable(settings.DATABASE_QUERY_TIMEOUT, settings.WEB_THREADS - 1)


_bound_database_waits()
