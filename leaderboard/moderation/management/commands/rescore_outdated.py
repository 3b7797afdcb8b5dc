"""Re-score every split whose results were scored by an older scorer than the one workers run now.

After an upgrade that bumps a track's scorer version (1.2.0: intervals resample scenes), stored results keep
the numbers, and since 1.2.0 the intervals, of the scorer that made them. This runs the moderation desk's
bulk re-score (``check_rescore_split``: audited, bulk queue, old results kept) on each such split, as the
maintainer named by ``--as``:

    python manage.py rescore_outdated --as alice --reason "scorer 1.2.0: intervals by scene" [--track sqa3d] [--dry-run]
"""

from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied
from django.core.management.base import BaseCommand, CommandError

from leaderboard.benchmarks.models import Split
from leaderboard.moderation.services import ModerationError, check_rescore_split
from leaderboard.submissions.models import Result


class Command(BaseCommand):
    help = "Re-score (audited, on the bulk queues) each split with results of an older scorer version."

    def add_arguments(self, parser):
        parser.add_argument("--as", dest="username", required=True, help="The maintainer the audit log names.")
        parser.add_argument("--reason", required=True, help="Why, for the audit log.")
        parser.add_argument("--track", default=None, help="Only this track's splits.")
        parser.add_argument("--dry-run", action="store_true", help="List the splits, queue nothing.")

    def handle(self, username, reason, track=None, dry_run=False, **options):
        user = get_user_model().objects.filter(username=username).first()
        if user is None:
            raise CommandError(f"No user {username!r}: --as names the maintainer doing the re-score.")
        splits = Split.objects.select_related("benchmark").filter(benchmark__is_active=True)
        if track:
            splits = splits.filter(benchmark__track=track)
        queued = 0
        for split in splits:
            current = split.benchmark.spec.scorer_version
            outdated = (Result.objects.filter(submission__split=split).exclude(scorer_version=current)
                        .values_list("submission_id", flat=True).distinct().count())
            if not outdated:
                continue
            if dry_run:
                self.stdout.write(f"{split}: {outdated} submissions scored before {current} (dry run)")
                continue
            try:
                count = check_rescore_split(user, split, reason)
            except ModerationError as exc:
                raise CommandError(f"{split}: {exc}") from exc
            except PermissionDenied as exc:
                raise CommandError(f"{split}: {username} may not re-score it ({exc})") from exc
            queued += count
            self.stdout.write(f"{split}: {count} submissions queued for scorer {current}")
        self.stdout.write(f"{queued} submissions queued." if not dry_run else "Nothing queued (dry run).")
