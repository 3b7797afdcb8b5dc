from __future__ import annotations

from django.conf import settings
from django.db.models import Exists, OuterRef, Prefetch, QuerySet
from django.http import Http404
from django.shortcuts import get_object_or_404

from leaderboard.benchmarks.models import Benchmark, LabelSet, Split


def list_benchmarks() -> QuerySet[Benchmark]:
    return Benchmark.objects.filter(is_active=True).prefetch_related(
        Prefetch("splits", queryset=Split.objects.order_by("-is_default", "name")))


def get_split(track: str, name: str | None) -> Split:
    """The named split of an active track, or its default split; 404 otherwise."""
    benchmark = get_object_or_404(Benchmark, track=track, is_active=True)
    # Whether its labels hold a public subset comes with it (``Split.has_partition``): no query of its own.
    splits = benchmark.splits.order_by("-is_default", "name").annotate(labels_partition=Exists(
        LabelSet.objects.filter(split=OuterRef("pk"), is_active=True, has_partition=True)))
    split = splits.filter(name=name).first() if name else splits.first()
    if split is None:
        raise Http404(f"No split {name!r} for {track}.")
    return split


def upload_limit(split: Split) -> int:
    """The largest file accepted on ``split``: the track's limit, or less by ``UPLOAD_MAX_BYTES``."""
    spec = split.benchmark.spec
    return min(spec.max_upload_bytes, settings.UPLOAD_MAX_BYTES.get(spec.name, spec.max_upload_bytes))
