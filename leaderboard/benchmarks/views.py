from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render

from leaderboard.benchmarks.permissions import results_embargoed
from leaderboard.benchmarks.selectors import list_benchmarks
from leaderboard.lib.pagecache import cached_page


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
