from django.core.management.base import BaseCommand

from leaderboard.submissions.retention import do_apply_retention, doomed


class Command(BaseCommand):
    help = "Delete the prediction files the retention policy (RETENTION_*) says; --dry-run lists them."

    def add_arguments(self, parser):
        parser.add_argument("--dry-run", action="store_true")

    def handle(self, dry_run, **options):
        if dry_run:
            for s in doomed():
                self.stdout.write(f"#{s.pk} {s.file_key} (uploaded {s.created_at:%Y-%m-%d})")
            return
        self.stdout.write(f"Deleted {do_apply_retention()} prediction files.")
