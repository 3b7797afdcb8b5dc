from pathlib import Path

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from evaluation_workers.errors import LabelsError
from leaderboard.benchmarks.bundle_apply import RescoreRefused, apply, plan
from leaderboard.benchmarks.bundles import BundleError, read_bundle
from leaderboard.benchmarks.permissions import maintainer_group


class Command(BaseCommand):
    help = ("Create or update a benchmark from its bundle, a YAML file (schema: "
            "leaderboard/benchmarks/bundle.schema.json, served at /schemas/benchmark-bundle.json). "
            "Idempotent; recorded in the audit log.")

    def add_arguments(self, parser):
        parser.add_argument("bundle", type=Path)
        parser.add_argument("--dry-run", action="store_true", help="Print the changes; write nothing.")
        parser.add_argument("--allow-rescore", action="store_true",
                            help="Make changes that re-score or hide published results (new labels on a split "
                                 "with published results, a split dropped, results hidden for longer, labels "
                                 "made private); refused otherwise.")
        parser.add_argument("--as", dest="username", metavar="USERNAME",
                            help="Who loads it (staff, or a maintainer of the track), for the audit log.")

    def handle(self, bundle, dry_run=False, allow_rescore=False, username=None, **options):
        try:
            loaded = read_bundle(bundle)
            actor = None
            if username:
                actor = get_user_model().objects.filter(username=username).first()
                if actor is None:
                    raise CommandError(f"No user {username!r}.")
                if not actor.is_staff and not actor.groups.filter(name=maintainer_group(loaded.track)).exists():
                    raise CommandError(f"{username} is neither staff nor a maintainer of {loaded.track}.")
            planned = apply(plan(loaded), allow_rescore=allow_rescore, dry_run=dry_run,
                            actor=actor)
        except (BundleError, RescoreRefused) as exc:
            raise CommandError(str(exc)) from exc
        except (LabelsError, OSError, ValueError) as exc:  # what no check above foresaw: still one line, exit 1
            raise CommandError(f"{Path(bundle).name}: {exc}") from exc
        if not planned.changes:
            self.stdout.write(f"{loaded.track}: up to date; nothing changed.")
            return
        verb = "would change (dry run, nothing written)" if dry_run else "changed"
        self.stdout.write(f"{loaded.track}: {verb}:")
        for change in planned.changes:
            self.stdout.write(f"  - {change.text}" + (f" [{change.affected}]" if change.affected else ""))
            for line in change.diff:  # a long value's change, whole
                self.stdout.write(f"      {line}")
        for note in planned.notes:
            self.stdout.write(f"  {note}")
