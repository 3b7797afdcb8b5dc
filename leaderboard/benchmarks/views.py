from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render

from leaderboard.benchmarks.selectors import list_benchmarks
from leaderboard.lib.pagecache import cached_page


@cached_page()
def home(request: HttpRequest) -> HttpResponse:
    return render(request, "benchmarks/home.html", {"benchmarks": list_benchmarks()})


def api_tracks(request: HttpRequest) -> JsonResponse:
    """The tracks, their splits and what they accept."""
    tracks = []
    for benchmark in list_benchmarks():
        spec = benchmark.spec
        tracks.append({"track": benchmark.track, "title": benchmark.title, "primary_metric": spec.primary_metric,
                       "metrics": list(spec.metrics), "groups": list(spec.groups),
                       "scorer_version": spec.scorer_version, "upload_suffixes": list(spec.upload_suffixes),
                       "max_upload_bytes": spec.max_upload_bytes,
                       "splits": [{"name": s.name, "accepting_submissions": s.accepting_submissions,
                                   "default": s.is_default} for s in benchmark.splits.all()]})
    return JsonResponse({"tracks": tracks})
