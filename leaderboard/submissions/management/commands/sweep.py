import json

from django.core.management.base import BaseCommand

from leaderboard.submissions.sweeper import do_sweep


class Command(BaseCommand):
    help = "One round of the sweeper (as Celery beat runs it every SWEEP_INTERVAL s); prints what it did."

    def handle(self, **options):
        self.stdout.write(json.dumps(do_sweep()))
