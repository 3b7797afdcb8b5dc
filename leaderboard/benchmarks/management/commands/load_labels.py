from pathlib import Path

from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from evaluation_workers.errors import LabelsError
from leaderboard.benchmarks.bundle_apply import published_results
from leaderboard.benchmarks.disclosure import counts_text
from leaderboard.benchmarks.models import Split
from leaderboard.benchmarks.services import discard_labels, do_load_labels, labels_checksum
from leaderboard.submissions.new_labels import do_new_labels


class Command(BaseCommand):
    help = ("Load hidden labels for a track's split from a folder in the official layout. "
            "They are stored where only workers read them; the public manifest is written "
            "to the database. New labels under published results need --allow-rescore, as a bundle's do: "
            "every submission of the split is then re-scored on them.")

    def add_arguments(self, parser):
        parser.add_argument("--track", required=True)
        parser.add_argument("--split", required=True)
        parser.add_argument("source", type=Path)
        parser.add_argument("--partition", type=Path, default=None, metavar="FILE",
                            help="The public subset: a text file of scene ids (SQA3D's scene_id, MMScan's "
                                 "scan_id, OpenScan's scene files), one a line: a scene is wholly public or "
                                 "wholly private, so that each part's intervals resample its own scenes. Each "
                                 "submission is then scored on it (shown during the challenge) and on the "
                                 "private rest (revealed at the deadline). Stored with the labels, for workers "
                                 "only.")
        parser.add_argument("--synthetic", action="store_true",
                            help="The labels are synthetic, or a subset standing in for the real split: every "
                                 "page and answer that shows the split's numbers then says 'synthetic labels', "
                                 "with these labels' counts.")
        parser.add_argument("--allow-rescore", action="store_true",
                            help="Replace the labels of a split with published results: their rows show "
                                 "'awaiting re-score' until each is re-scored on the new labels (queued here); "
                                 "refused otherwise.")

    def handle(self, track, split, source, partition=None, synthetic=False, allow_rescore=False, **options):
        split_obj = Split.objects.filter(benchmark__track=track, name=split).select_related("benchmark").first()
        if split_obj is None:
            known = ", ".join(str(s) for s in Split.objects.select_related("benchmark"))
            raise CommandError(f"No split {track}/{split}; known: {known or 'none'} (a benchmark's splits come "
                               f"from its bundle: manage.py load_benchmark)")
        previous = split_obj.active_labels
        try:
            shown = published_results(split_obj) if previous is not None and not allow_rescore else ""
            if shown and (sha := labels_checksum(split_obj, source, partition)) != previous.sha256:
                raise CommandError(f"{split_obj}: refused: new labels {sha[:12]} would re-score {shown} (load them "
                                   "again with --allow-rescore to replace the labels and re-score the split)")
            stored: list[str] = []
            try:
                with transaction.atomic():
                    label_set, created = do_load_labels(split_obj, source, loaded_by="manage.py load_labels",
                                                        partition=partition, synthetic=synthetic)
                    stored = [label_set.storage_key] if created else []
                    queued = do_new_labels(split_obj, previous)
            except BaseException:
                discard_labels(stored)  # its row went with the transaction: no version left behind
                raise
        except (LabelsError, FileNotFoundError) as exc:
            raise CommandError(str(exc)) from exc
        verb = "Loaded" if created else "Re-activated"
        subset = " with a public subset" if label_set.has_partition else ""
        replaced = previous is not None and previous.pk != label_set.pk
        # Replaced labels re-score the split; first labels score what failed for want of them.
        rescored = (f"; {queued} submission{'s' * (queued != 1)} queued to be {'re-' * replaced}scored on them"
                    + (" (published rows show 'awaiting re-score' until theirs is done)" if replaced else "")
                    ) if replaced or queued else ""
        kind = "synthetic labels" if label_set.synthetic else "labels"
        self.stdout.write(f"{verb} {kind} {label_set.sha256} for {split_obj}{subset} "
                          f"({counts_text(split_obj) or 'no counts in its manifest'}){rescored}.")
