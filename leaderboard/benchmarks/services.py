"""Benchmarks, splits and hidden labels: every write to them goes through here."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from django.conf import settings
from django.db import transaction

from evaluation_workers.results import sha256_tree
from evaluation_workers.tracks import all_tracks
from leaderboard.benchmarks.models import Benchmark, LabelSet, Split
from leaderboard.lib import labels_store
from leaderboard.lib.files import make_dirs, restrict_tree

# The splits each track is scored on; the first is shown by default.
TRACK_SPLITS = {"sqa3d": ["test"], "openscan": ["val"], "mmscan-vg": ["val", "test"]}


def do_sync_benchmarks() -> list[Benchmark]:
    """Create a Benchmark and its splits for every track of the scoring core (idempotent)."""
    benchmarks = []
    for order, track in enumerate(all_tracks()):
        benchmark, _ = Benchmark.objects.get_or_create(
            track=track.name, defaults={"title": track.title, "description": track.description, "order": order}
        )
        for i, name in enumerate(TRACK_SPLITS.get(track.name, ["test"])):
            Split.objects.get_or_create(benchmark=benchmark, name=name, defaults={"is_default": i == 0})
        benchmarks.append(benchmark)
    return benchmarks


def do_load_labels(split: Split, source: Path, loaded_by: str = "") -> tuple[LabelSet, bool]:
    """Copy a labels folder (or file) into the worker-only labels store and activate it.

    The store is ``LABELS_DIR`` or, with ``LABELS_S3_BUCKET``, the labels bucket
    (uploaded once, here: the only code of the site that touches it).

    Returns the label set and whether it is new. The same labels loaded again
    (same checksum) re-activate the existing version; results scored on older
    labels keep their recorded checksum and are not changed.
    """
    source = Path(source)
    if not source.exists():
        raise FileNotFoundError(f"Labels not found: {source}")
    track = split.benchmark.spec
    sha = sha256_tree(source)
    existing = LabelSet.objects.filter(split=split, sha256=sha).first()
    created = existing is None
    if existing is None:
        key = f"{split.benchmark.track}/{split.name}/{sha}"
        if labels_store.is_enabled():
            # Into the labels bucket (its index last); no copy stays on the site's disk.
            with tempfile.TemporaryDirectory(prefix="labels-") as tmp:
                staging = Path(tmp) / "labels"
                manifest = track.prepare_labels(source, staging)
                labels_store.upload_version(staging, key)
        else:
            dest = Path(settings.LABELS_DIR) / key
            make_dirs(Path(settings.LABELS_DIR), dest.parent)
            # Prepare into a temporary sibling and rename, so a crash never leaves a
            # half-written version under its final name.
            with tempfile.TemporaryDirectory(dir=dest.parent, prefix=".loading-") as tmp:
                staging = Path(tmp) / "labels"
                manifest = track.prepare_labels(source, staging)
                restrict_tree(staging)  # FILE_MODE/DIR_MODE: readable by the workers' group only
                if dest.exists():
                    shutil.rmtree(dest)
                staging.rename(dest)
        existing = LabelSet(split=split, sha256=sha, storage_key=key, manifest=manifest, loaded_by=loaded_by)
    with transaction.atomic():
        LabelSet.objects.filter(split=split, is_active=True).update(is_active=False)
        existing.is_active = True
        existing.save()
    return existing, created
