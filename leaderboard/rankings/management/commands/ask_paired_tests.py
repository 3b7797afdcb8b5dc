from django.core.management.base import BaseCommand, CommandError

from leaderboard.benchmarks.models import Split
from leaderboard.rankings.paired_tests import do_ask_board_tests


class Command(BaseCommand):
    help = ("Ask the scoring workers for the paired tests every board shows and nobody asked yet (after "
            "migrating to one test per pair of results; otherwise each change of a board asks for its own).")

    def add_arguments(self, parser):
        parser.add_argument("--track", help="only this track's splits")

    def handle(self, track, **options):
        splits = Split.objects.select_related("benchmark").order_by("benchmark__track", "name")
        if track:
            splits = splits.filter(benchmark__track=track)
            if not splits.exists():
                raise CommandError(f"Expected --track to be a track with splits, but got {track!r}.")
        for split in splits:
            self.stdout.write(f"{split.benchmark.track} {split.name}: {do_ask_board_tests(split)} tests asked")
