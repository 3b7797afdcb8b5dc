"""The site's Celery app: consumes SITE_QUEUE, sends scoring work by name.

Start a site worker with ``celery -A leaderboard worker -Q site``. It runs the
tasks in ``leaderboard/submissions/tasks.py`` (recording progress and results
from the scoring workers). Scoring workers run a separate app,
``evaluation_workers.worker.app``, that imports no Django.

Every message the site sends is signed with the first of ``RESULTS_SIGNING_KEYS``,
and every task it runs must be signed with one of them (``evaluation_workers.signing``):
a report a scoring worker did not sign is refused, logged and acknowledged, and
changes nothing; so does a message the site acted on before (``evaluation_workers.replays``).
"""

import functools
import os
import time
from typing import Any

from celery import Celery, Task

from evaluation_workers import contracts, replays, signing

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "leaderboard.settings")


def broker_client() -> Any | None:
    """The broker's Redis client (None for another broker: then nothing is remembered or counted)."""
    from django.conf import settings

    from leaderboard.lib import broker_redis

    url = str(settings.CELERY_BROKER_URL or "")
    return broker_redis.client(url) if url.startswith(broker_redis.REDIS_SCHEMES) else None


def count_refused(name: str, reason: str) -> None:
    """Count a message the site refused (``replays.count_refused``): read by ``/metrics``."""
    replays.count_refused(broker_client(), name, reason)


def running_seconds() -> float:
    """The longest a running attempt's progress and heartbeats are welcome after the first of them: its
    hard time limit and the sweeper's heartbeat timeout, twice over (past them the sweeper sends a new attempt)."""
    from django.conf import settings

    return max(3600.0, 2 * (settings.EVAL_TIME_LIMIT + settings.SWEEP_HEARTBEAT_TIMEOUT))


class SignedTask(Task):
    """Every site task, the reports of the scoring workers above all: runs only signed messages, once."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        from django.conf import settings

        report = signing.verified(self.name, args, kwargs, settings.RESULTS_SIGNING_KEYS)
        if report is None:
            count_refused(self.name, "signature")
            return None
        seconds = replays.memory_seconds(self.name, report, running_seconds())
        return replays.run_once(broker_client(), self.name, kwargs, seconds,
                                functools.partial(super().__call__, **report))


class SigningCelery(Celery):
    """Signs every message the site sends: score requests, paired tests, Celery beat's own tasks."""

    def send_task(self, name: str, args: Any = None, kwargs: Any = None, **options: Any) -> Any:
        """In a web request, waits for the broker at most what is left of the request's time for Redis
        (``redis_budget.bounded``: a send's retries to a hung broker each wait out a socket timeout); the
        caller then leaves the work unsent for the sweeper, as when the broker is down."""
        from django.conf import settings

        from leaderboard.lib import redis_budget

        options["headers"] = {**(options.get("headers") or {}), contracts.SENT_AT_HEADER: time.time()}
        signed = signing.signed(name, kwargs, settings.RESULTS_SIGNING_KEYS)
        return redis_budget.bounded(lambda: super(SigningCelery, self).send_task(name, args, signed, **options),
                                    f"sending {name}")


app = SigningCelery("leaderboard", task_cls=SignedTask)
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
