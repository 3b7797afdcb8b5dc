"""Hidden labels of the splits: every write to them goes through here (benchmarks and splits are
written from their bundles: ``bundle_apply``)."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from django.conf import settings
from django.db import transaction

from evaluation_workers import partitions
from evaluation_workers.results import sha256_tree
from leaderboard.benchmarks.models import LabelSet, Split
from leaderboard.lib import labels_store
from leaderboard.lib.files import make_dirs, restrict_tree
from leaderboard.lib.pagecache import bump


def _prepare(split: Split, source: Path, staging: Path, public: frozenset[str] | None) -> dict:
    """The track's prepared labels in ``staging`` (and the public subset's ids beside them); the manifest."""
    manifest = split.benchmark.spec.prepare_labels(source, staging)
    if public is not None:
        public = partitions.check_partition(split.benchmark.track, manifest, public)
        (staging / partitions.PARTITION_FILE).write_text("".join(f"{u}\n" for u in sorted(public)))
    return manifest


def _store(split: Split, staging: Path, key: str) -> None:
    """Move a prepared version to where workers read it (the labels bucket, or ``LABELS_DIR/<key>``)."""
    if labels_store.is_enabled():
        labels_store.upload_version(staging, key)  # its index last; no copy stays on the site's disk
        return
    dest = Path(settings.LABELS_DIR) / key
    restrict_tree(staging)  # FILE_MODE/DIR_MODE: readable by the workers' group only
    if dest.exists():
        shutil.rmtree(dest)
    staging.rename(dest)


def _staging_root(split: Split) -> Path | None:
    """Where to prepare: beside the final folder (so that the rename is atomic), or anywhere for the bucket."""
    if labels_store.is_enabled():
        return None
    parent = Path(settings.LABELS_DIR) / split.benchmark.track / split.name
    make_dirs(Path(settings.LABELS_DIR), parent)
    return parent


def _prune(folder: Path) -> None:
    """Remove ``folder`` and its parents up to ``LABELS_DIR`` while they are empty (a refused load
    leaves no folder behind)."""
    root = Path(settings.LABELS_DIR)
    while folder != root and folder.is_relative_to(root):
        try:
            folder.rmdir()
        except OSError:  # not empty (another version), or gone
            return
        folder = folder.parent


@contextmanager
def _pruned_on_failure(folder: Path | None) -> Iterator[Path | None]:
    """``folder``, removed again (with its empty parents) when what runs in it fails."""
    try:
        yield folder
    except BaseException:
        if folder is not None:
            _prune(folder)
        raise


def discard_labels(keys: list[str]) -> None:
    """Remove the versions ``do_load_labels`` stored under ``keys`` when the load that stored them
    was rolled back (their rows are gone). A bucket's copies stay: the site may only write there,
    and a version nobody's row names is never read."""
    if labels_store.is_enabled():
        return
    for key in keys:
        dest = Path(settings.LABELS_DIR) / key
        shutil.rmtree(dest, ignore_errors=True)
        _prune(dest.parent)


def labels_checksum(split: Split, source: Path, partition: Path | None = None) -> str:
    """The checksum ``do_load_labels`` would give these labels (and public subset) on ``split``; nothing stored."""
    source = Path(source)
    if not source.exists():
        raise FileNotFoundError(f"Labels not found: {source}")
    if partition is None:
        return sha256_tree(source)
    public = partitions.parse(Path(partition).read_text(encoding="utf-8"))
    with tempfile.TemporaryDirectory(prefix=".checksum-") as tmp:
        staging = Path(tmp) / "labels"
        _prepare(split, source, staging, public)
        return sha256_tree(staging)


def do_load_labels(split: Split, source: Path, loaded_by: str = "",
                   partition: Path | None = None) -> tuple[LabelSet, bool]:
    """Copy a labels folder (or file) into the worker-only labels store and activate it.

    The store is ``LABELS_DIR`` or, with ``LABELS_S3_BUCKET``, the labels bucket
    (uploaded once, here: the only code of the site that touches it).
    ``partition``: a file of the public subset's scene ids, one a line
    (``evaluation_workers.partitions``); it is stored with the labels, where
    only workers read it, and is part of the version's checksum.

    Returns the label set and whether it is new. The same labels loaded again
    (same checksum) re-activate the existing version; results scored on older
    labels keep their recorded checksum and are not changed.
    """
    source = Path(source)
    if not source.exists():
        raise FileNotFoundError(f"Labels not found: {source}")
    public = partitions.parse(Path(partition).read_text(encoding="utf-8")) if partition is not None else None
    # Prepare into a temporary folder and rename (or upload), so a crash never leaves a
    # half-written version under its final name, and labels refused leave no folder at all.
    with (_pruned_on_failure(_staging_root(split)) as root,
          tempfile.TemporaryDirectory(dir=root, prefix=".loading-") as tmp):
        staging = Path(tmp) / "labels"
        manifest: dict | None = None
        if public is None:
            sha = sha256_tree(source)
        else:
            # The checksum covers the partition: prepared first, then hashed as the workers will.
            manifest = _prepare(split, source, staging, public)
            sha = sha256_tree(staging)
        existing = LabelSet.objects.filter(split=split, sha256=sha).first()
        created = existing is None
        if existing is None:
            key = f"{split.benchmark.track}/{split.name}/{sha}"
            if manifest is None:
                manifest = _prepare(split, source, staging, None)
            _store(split, staging, key)
            existing = LabelSet(split=split, sha256=sha, storage_key=key, manifest=manifest, loaded_by=loaded_by,
                                has_partition=public is not None)
    with transaction.atomic():
        LabelSet.objects.filter(split=split, is_active=True).update(is_active=False)
        existing.is_active = True
        existing.save()
        bump(split.benchmark.track)  # the leaderboard page says whether a public subset is scored
    return existing, created
