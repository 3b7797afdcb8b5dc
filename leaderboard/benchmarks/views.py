from typing import Any

from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, render
from django.urls import reverse

from evaluation_workers.tracks import all_tracks
from leaderboard.benchmarks import docs
from leaderboard.benchmarks.disclosure import labels_json
from leaderboard.benchmarks.models import Benchmark
from leaderboard.benchmarks.permissions import results_embargoed
from leaderboard.benchmarks.phases import next_change, phase_json
from leaderboard.benchmarks.selectors import get_split, list_benchmarks, metric_specs_json, upload_limit
from leaderboard.lib import host_pages
from leaderboard.lib.method_fields import declared
from leaderboard.lib.pagecache import cache_until, cached_page


@cached_page()
def home(request: HttpRequest) -> HttpResponse:
    """Each track with its task in a line, its leaders on the default split, and its counts."""
    # The one read of rankings from this app: the home page is the front of the leaderboards.
    from leaderboard.rankings.selectors import track_summary

    cards = []
    for benchmark in list_benchmarks():
        splits = list(benchmark.splits.all())
        summary = track_summary(splits[0], results_embargoed(splits[0], request.user)) if splits else None
        cards.append((benchmark, summary))
    return render(request, "benchmarks/home.html", {"cards": cards})


@cached_page()
def api_tracks(request: HttpRequest) -> JsonResponse:
    """The tracks, their splits and what they accept, their challenges, method fields and pages."""
    # The one read of rankings from this app besides the home page: where each challenge stands.
    from leaderboard.rankings.challenges import challenge_states

    tracks = []
    for benchmark in list_benchmarks():
        spec = benchmark.spec
        for split in benchmark.splits.all():
            following = next_change(split)  # a phase that starts says otherwise what it accepts
            cache_until(request, following[1] if following else None)
        tracks.append({"track": benchmark.track, "title": benchmark.title, "primary_metric": spec.primary_metric,
                       "metrics": list(spec.metrics), "metric_specs": metric_specs_json(benchmark),
                       "groups": list(spec.groups),
                       "scorer_version": spec.scorer_version, "upload_suffixes": list(spec.upload_suffixes),
                       "max_upload_bytes": spec.max_upload_bytes,
                       "protocols": [{"key": p.key, "label": p.label, "description": p.description}
                                     for p in spec.protocols],
                       "splits": [{"name": s.name, "default": s.is_default, "public_subset": s.has_partition,
                                   "labels": labels_json(s), **phase_json(s)} for s in benchmark.splits.all()],
                       "challenges": [_with_url(request, c) for c in challenge_states(benchmark)],
                       "method_fields": [f.as_json() for f in declared(benchmark)],
                       "pages": [{"key": key, "title": title, "url": request.build_absolute_uri(
                           reverse("benchmarks:page", args=[benchmark.track, key]))}
                                 for key, title in host_pages.tabs(benchmark)]})
    return JsonResponse({"tracks": tracks})


def bundle_schema(request: HttpRequest) -> HttpResponse:
    """The JSON Schema of benchmark bundles (``manage.py load_benchmark``), at a stable address."""
    from leaderboard.benchmarks.bundles import SCHEMA_PATH

    response = HttpResponse(SCHEMA_PATH.read_bytes(), content_type="application/schema+json")
    response["Access-Control-Allow-Origin"] = "*"  # editors and validators fetch it from anywhere
    response["Cache-Control"] = "public, max-age=3600"
    return response


@cached_page()
def metrics_page(request: HttpRequest) -> HttpResponse:
    """The contract for every number (``docs/metrics.md``), a section per track (``#<track>``); a
    plugin track's section comes from its package (``Track.metrics_doc``)."""
    doc = docs.render("metrics")
    written = {section for section, _ in doc.sections}
    plugins = [(t.name, docs.render(f"{t.name}-metrics", t.metrics_doc)) for t in all_tracks()
               if t.metrics_doc is not None and t.name not in written]
    return render(request, "benchmarks/metrics.html", {"doc": doc, "plugins": plugins})


@cached_page("track")
def format_page(request: HttpRequest, track: str) -> HttpResponse:
    """What file to write (``docs/<track>-format.md``), samples to download, size limits,
    the edge cases, converters and the metrics' glossary."""
    benchmark = get_object_or_404(Benchmark, track=track, is_active=True)
    spec = benchmark.spec
    splits = [{"split": s, "limit": upload_limit(s), "has_labels": s.active_labels is not None}
              for s in benchmark.splits.order_by("-is_default", "name")]
    return render(request, "benchmarks/format.html", {
        "benchmark": benchmark, "splits": splits,
        "doc": docs.render(f"{track}-format", spec.format_doc) if spec.format_doc else None,
        "samples": [(form, s.file_name, s.description) for form, s in spec.samples.items()],
    })


def format_sample(request: HttpRequest, track: str, form: str) -> HttpResponse:
    """A small file of ``form`` built from the split's public manifest, so that it passes validation there."""
    split = get_split(track, request.GET.get("split"))
    spec = split.benchmark.spec
    if form not in spec.samples:
        raise Http404(f"No sample form {form!r} for {track}.")
    labels = split.active_labels
    if labels is None:
        raise Http404(f"No labels are loaded for {track}/{split.name} yet, so there is no sample of its ids.")
    name, content = spec.samples[form].file_name, spec.samples[form].build(labels.manifest)
    response = HttpResponse(content, content_type="application/octet-stream")
    response["Content-Disposition"] = f'attachment; filename="{track}_{split.name}_{name}"'
    return response


@cached_page("track")
def host_page(request: HttpRequest, track: str, page: str) -> HttpResponse:
    """One of the pages the benchmark's hosts wrote (its bundle's ``pages``), sanitised, as a tab of
    the benchmark's page."""
    benchmark = get_object_or_404(Benchmark, track=track, is_active=True)
    source = (benchmark.pages or {}).get(page)
    if source is None:
        raise Http404(f"{benchmark.title} has no page {page!r}.")
    return render(request, "benchmarks/page.html", {
        "benchmark": benchmark, "tabs": host_pages.tabs(benchmark), "current": page,
        "title": host_pages.TITLES.get(page, page), "html": host_pages.render(source)})


def _with_url(request: HttpRequest, state: Any) -> dict[str, Any]:
    """A challenge's state (``rankings.challenges``) with its permanent address."""
    state.links = {"url": request.build_absolute_uri(reverse("rankings:challenge", args=[
        state.challenge.benchmark.track, state.name]))}
    return dict(state.as_json())
