"""A challenge's page (its phases, then its archived final board), the archive's exports and BibTeX,
and the challenge in the API. The archive is read as it was written (``archive.py``): these views
never look at the live board."""

from __future__ import annotations

from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.utils import timezone

from leaderboard.benchmarks.models import Benchmark
from leaderboard.lib import host_pages
from leaderboard.lib.pagecache import cache_until, cached_page
from leaderboard.rankings.challenges import (
    ARCHIVED,
    ChallengeState,
    archive_bibtex,
    archive_csv,
    archive_json,
    archived_rows,
    challenge_states,
    dumps,
    get_challenge_state,
)


def _benchmark(track: str) -> Benchmark:
    return get_object_or_404(Benchmark, track=track, is_active=True)


def links(request: HttpRequest, track: str, name: str) -> dict[str, str]:
    """The challenge's permanent address and its archive's exports, absolute."""
    at = lambda view, *args: request.build_absolute_uri(reverse(view, args=[track, name, *args]))  # noqa: E731
    return {"url": at("rankings:challenge"), "export_csv": at("rankings:challenge-export", "csv"),
            "export_json": at("rankings:challenge-export", "json"), "bibtex": at("rankings:challenge-bibtex")}


def _state(request: HttpRequest, track: str, name: str) -> ChallengeState:
    state = get_challenge_state(_benchmark(track), name)
    # A cached page must not outlive the next change of a phase, nor the archive's arrival.
    upcoming = [d for p in state.phases for d in (p.split.starts_at, p.split.deadline) if d]
    cache_until(request, min((d for d in upcoming if state.state != ARCHIVED and d > timezone.now()), default=None))
    state.links = links(request, track, name)
    return state


@cached_page("track")
def challenge(request: HttpRequest, track: str, name: str) -> HttpResponse:
    """The challenge's phases and where it stands; once it ended, its archived final board, the top
    entries marked, with its exports and BibTeX."""
    state = _state(request, track, name)
    benchmark = state.challenge.benchmark
    ranked, references = archived_rows(state.archive) if state.archive else ([], [])
    archives = [s for s in challenge_states(benchmark) if s.archive is not None]
    return render(request, "rankings/challenge.html", {
        "benchmark": benchmark, "state": state, "archive": state.archive, "ranked": ranked,
        "references": references, "tabs": host_pages.tabs(benchmark), "archives": archives, "current": name,
        "field_columns": [f for f in (state.archive.board.get("method_fields", []) if state.archive else [])
                          if f.get("column")]})


def _archive_of(request: HttpRequest, track: str, name: str) -> ChallengeState:
    state = _state(request, track, name)
    if state.archive is None:
        raise Http404(f"The challenge {name!r} has not ended yet: its final board is archived when its last phase "
                      f"ends{f' ({state.ends_at:%Y-%m-%d %H:%M} UTC)' if state.ends_at else ''}.")
    return state


@cached_page("track")
def challenge_export(request: HttpRequest, track: str, name: str, fmt: str) -> HttpResponse:
    """The archived final board as CSV or JSON (the rows as they were at the end)."""
    if fmt not in {"csv", "json"}:
        raise Http404("Exports are .csv or .json.")
    state = _archive_of(request, track, name)
    assert state.archive is not None
    if fmt == "json":
        response = HttpResponse(dumps(archive_json(state.archive, state.links)), content_type="application/json")
    else:
        response = HttpResponse(archive_csv(state.archive), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{track}-{name}-final.{fmt}"'
    return response


@cached_page("track")
def challenge_bibtex(request: HttpRequest, track: str, name: str) -> HttpResponse:
    state = _archive_of(request, track, name)
    assert state.archive is not None
    return HttpResponse(archive_bibtex(state.archive, state.links["url"]),
                        content_type="application/x-bibtex; charset=utf-8")


@cached_page("track")
def api_challenge(request: HttpRequest, track: str, name: str) -> JsonResponse:
    """A challenge: its phases and state, and once archived its final board."""
    state = _state(request, track, name)
    body = state.as_json()
    body["final_board"] = archive_json(state.archive, {}) if state.archive else None
    return JsonResponse(body)
