from __future__ import annotations

from django.conf import settings
from django.db.models import Exists, OuterRef, Prefetch, QuerySet
from django.http import Http404
from django.shortcuts import get_object_or_404

from leaderboard.benchmarks.models import Benchmark, Challenge, LabelSet, Split


def _with_labels(splits: QuerySet[Split]) -> QuerySet[Split]:
    """``splits`` knowing whether their labels are loaded (``Split.labels_loaded``) and hold a public
    subset (``Split.has_partition``), with no query of their own."""
    active = LabelSet.objects.filter(split=OuterRef("pk"), is_active=True)
    return (splits.annotate(labels_active=Exists(active), labels_partition=Exists(active.filter(has_partition=True)))
            .select_related("challenge_phase__challenge"))


def list_benchmarks() -> QuerySet[Benchmark]:
    return Benchmark.objects.filter(is_active=True).prefetch_related(
        Prefetch("splits", queryset=_with_labels(Split.objects.order_by("-is_default", "name"))))


def splits_of(benchmark: Benchmark) -> QuerySet[Split]:
    """A track's splits, the default first, each knowing whether it takes submissions without a query of its own."""
    return _with_labels(benchmark.splits.order_by("-is_default", "name"))


def splits_of_track(track: str) -> QuerySet[Split]:
    """The splits of an active track (none for an unknown or inactive one), as ``splits_of``."""
    return _with_labels(Split.objects.select_related("benchmark").filter(benchmark__track=track,
                                                                           benchmark__is_active=True)
                        .order_by("-is_default", "name"))


def get_split(track: str, name: str | None) -> Split:
    """The named split of an active track, or its default split; 404 otherwise. Its benchmark knows whether
    it runs challenges (``has_challenges``), so that a board without any asks nothing more."""
    benchmark = get_object_or_404(Benchmark.objects.annotate(
        has_challenges=Exists(Challenge.objects.filter(benchmark=OuterRef("pk")))), track=track, is_active=True)
    splits = splits_of(benchmark)
    split = splits.filter(name=name).first() if name else splits.first()
    if split is None:
        raise Http404(f"No split {name!r} for {track}.")
    return split


def upload_limit(split: Split) -> int:
    """The largest file accepted on ``split``: the track's limit, or less by ``UPLOAD_MAX_BYTES``."""
    return _track_upload_limit(split.benchmark)


def _track_upload_limit(benchmark: Benchmark) -> int:
    spec = benchmark.spec
    return min(spec.max_upload_bytes, settings.UPLOAD_MAX_BYTES.get(spec.name, spec.max_upload_bytes))


def metric_specs_json(benchmark: Benchmark) -> dict[str, dict[str, object]]:
    """Each metric's spec as the API gives it: direction, kind (fraction or value), unit, range and the
    decimals pages show (the bundle's ``board.precision`` over the track's)."""
    return {m: benchmark.metric_spec(m).as_json() for m in benchmark.spec.metrics}


def largest_upload_limit() -> int:
    """The largest file a split of an active benchmark accepts (0 without any): what storage must hold
    for one more upload."""
    benchmarks = Benchmark.objects.filter(is_active=True, splits__isnull=False).distinct()
    return max((_track_upload_limit(b) for b in benchmarks), default=0)
