from django.core.management.base import BaseCommand

from leaderboard.rankings.archive import do_archive_due
from leaderboard.rankings.models import ChallengeArchive
from leaderboard.rankings.services import do_reveal_due


class Command(BaseCommand):
    help = ("Reveal the boards whose deadline passed and archive the final board of every challenge whose last "
            "phase ended, as the site worker's beat does every minute (for a site run without Celery beat, from "
            "cron). Idempotent: an archive is written once.")

    def handle(self, **options):
        revealed, archived = do_reveal_due(), do_archive_due()
        self.stdout.write(f"{revealed} boards revealed, {archived} challenges archived.")
        for archive in ChallengeArchive.objects.order_by("-archived_at")[:archived]:
            self.stdout.write(f"  {archive.track}/{archive.challenge.name}: final board of {archive.split_name}, "
                              f"{len(archive.rows)} rows, /benchmarks/{archive.track}/challenges/"
                              f"{archive.challenge.name}/")
