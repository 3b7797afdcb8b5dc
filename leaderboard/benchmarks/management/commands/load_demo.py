"""Make a fresh site useful: every track, paper rows, demo labels and a demo user."""

import importlib
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand

from leaderboard.accounts.services import personal_team
from leaderboard.benchmarks.models import Split
from leaderboard.benchmarks.services import do_load_labels, do_sync_benchmarks
from leaderboard.rankings.services import do_seed_paper_rows

DEMO_USER, DEMO_PASSWORD = "demo", "demo-password"


class Command(BaseCommand):
    help = ("Create the benchmarks of every track with their paper rows, load small synthetic "
            "labels where a split has none, and write demo predictions under DATA_DIR/demo. Idempotent.")

    def handle(self, **options):
        demo_dir = Path(settings.DATA_DIR) / "demo"
        for benchmark in do_sync_benchmarks():
            track = benchmark.track
            seeded = do_seed_paper_rows(track)
            split = Split.objects.filter(benchmark=benchmark, is_default=True).first()
            line = f"{track}: {seeded} paper rows"
            try:
                synthetic = importlib.import_module(f"evaluation_workers.synthetic.{track.replace('-', '_')}")
            except ModuleNotFoundError:
                synthetic = None
            if split is not None and split.active_labels is None and hasattr(synthetic, "write_demo"):
                labels, predictions = synthetic.write_demo(demo_dir / track, split.name)
                label_set, _ = do_load_labels(split, labels, loaded_by="load_demo")
                line += f"; demo labels {label_set.sha256[:12]} on {split.name}; try uploading {predictions}"
            self.stdout.write(line)
        User = get_user_model()
        if not User.objects.filter(username=DEMO_USER).exists():
            user = User.objects.create_user(DEMO_USER, password=DEMO_PASSWORD)
            personal_team(user)
            self.stdout.write(f"Created user {DEMO_USER!r} with password {DEMO_PASSWORD!r}.")
