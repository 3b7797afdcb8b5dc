"""The site's Celery app: consumes SITE_QUEUE, sends scoring work by name.

Start a site worker with ``celery -A leaderboard worker -Q site``. It runs the
tasks in ``leaderboard/submissions/tasks.py`` (recording progress and results
from the scoring workers). Scoring workers run a separate app,
``evaluation_workers.worker.app``, that imports no Django.

Every message the site sends is signed with ``RESULTS_SIGNING_KEY``, and every
task it runs must be (``evaluation_workers.signing``): a report a scoring
worker did not sign is refused, logged and acknowledged, and changes nothing.
"""

import os
import time
from typing import Any

from celery import Celery, Task

from evaluation_workers import contracts, signing

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "leaderboard.settings")


class SignedTask(Task):
    """Every site task, the reports of the scoring workers above all: runs only signed messages."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        from django.conf import settings

        report = signing.verified(self.name, args, kwargs, settings.RESULTS_SIGNING_KEY)
        return None if report is None else super().__call__(**report)


class SigningCelery(Celery):
    """Signs every message the site sends: score requests, paired tests, Celery beat's own tasks."""

    def send_task(self, name: str, args: Any = None, kwargs: Any = None, **options: Any) -> Any:
        from django.conf import settings

        options["headers"] = {**(options.get("headers") or {}), contracts.SENT_AT_HEADER: time.time()}
        return super().send_task(name, args, signing.signed(name, kwargs, settings.RESULTS_SIGNING_KEY), **options)


app = SigningCelery("leaderboard", task_cls=SignedTask)
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
