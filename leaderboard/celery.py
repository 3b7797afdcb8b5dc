"""The site's Celery app: consumes SITE_QUEUE, sends scoring work by name.

Start a site worker with ``celery -A leaderboard worker -Q site``. It runs the
tasks in ``leaderboard/submissions/tasks.py`` (recording progress and results
from the scoring workers). Scoring workers run a separate app,
``evaluation_workers.app``, that imports no Django.
"""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "leaderboard.settings")

app = Celery("leaderboard")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
