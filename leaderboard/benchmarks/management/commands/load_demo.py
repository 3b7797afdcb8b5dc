"""Make a fresh site useful: the repository's benchmark bundles (with their paper rows and
synthetic demo labels) and a demo user."""

import yaml
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand

from evaluation_workers.tracks import is_installed
from leaderboard.accounts.services import personal_team
from leaderboard.benchmarks.bundle_apply import RescoreRefused, load_bundle
from leaderboard.benchmarks.bundles import BUNDLES_DIR, bundled_paths

DEMO_USER, DEMO_PASSWORD = "demo", "demo-password"


class Command(BaseCommand):
    help = (f"Load every benchmark bundle of {BUNDLES_DIR.relative_to(BUNDLES_DIR.parents[2])}/ (as "
            "load_benchmark does, with small synthetic labels where a split has none, and demo predictions "
            "under DATA_DIR/demo), then create a demo user. Idempotent.")

    def handle(self, **options):
        for path in bundled_paths():
            track = (yaml.safe_load(path.read_text(encoding="utf-8")) or {}).get("track")
            if not is_installed(str(track)):  # a plugin track's demo, on a site without its package
                self.stdout.write(f"{track}: skipped ({path.name}): the track is not installed")
                continue
            try:
                planned = load_bundle(path, actor_name="manage.py load_demo")
            except RescoreRefused as refused:  # a site changed since: left as it is, the rest still loads
                self.stderr.write(f"{refused}\n  (left unchanged; load_benchmark --allow-rescore applies it)")
                continue
            track = planned.bundle.track
            if not planned.changes:
                self.stdout.write(f"{track}: up to date")
                continue
            self.stdout.write(f"{track}: {len(planned.changes)} changes" + "".join(f"; {n}" for n in planned.notes))
        User = get_user_model()
        if not User.objects.filter(username=DEMO_USER).exists():
            user = User.objects.create_user(DEMO_USER, password=DEMO_PASSWORD)
            personal_team(user)
            self.stdout.write(f"Created user {DEMO_USER!r} with password {DEMO_PASSWORD!r}.")
