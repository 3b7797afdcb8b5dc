from django.core.management.base import BaseCommand

from leaderboard.submissions.retention import do_apply_retention, do_prune_outcomes, doomed


class Command(BaseCommand):
    help = ("Delete the prediction files the retention policy (RETENTION_*) says, and ask the workers to prune "
            "the per-unit outcomes no result needs (OUTCOMES_KEEP_DAYS); --dry-run lists the files.")

    def add_arguments(self, parser):
        parser.add_argument("--dry-run", action="store_true")

    def handle(self, dry_run, **options):
        if dry_run:
            for s in doomed():
                self.stdout.write(f"#{s.pk} {s.file_key} (uploaded {s.created_at:%Y-%m-%d})")
            return
        self.stdout.write(f"Asked the workers of {do_prune_outcomes()} tracks to prune their outcomes.")
        self.stdout.write(f"Deleted {do_apply_retention()} prediction files.")
