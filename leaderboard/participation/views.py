"""A benchmark's terms and the caller's part in it: the page (read, accept, ask to join) and
``/api/v1/benchmarks/<track>/participation`` (GET the state, POST to accept)."""

from __future__ import annotations

import json

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render

from leaderboard.accounts.auth import api_auth, api_error
from leaderboard.benchmarks.models import Benchmark
from leaderboard.participation import gate, services
from leaderboard.participation.models import Registration
from leaderboard.participation.selectors import current_announcements, participant_of, rules_of
from leaderboard.participation.terms import render as render_terms
from leaderboard.participation.terms import short


def _benchmark(track: str) -> Benchmark:
    benchmark = Benchmark.objects.filter(track=track, is_active=True).first()
    if benchmark is None:
        raise Http404(f"No active benchmark {track!r}; /api/v1/tracks lists them.")
    return benchmark


def terms(request: HttpRequest, track: str) -> HttpResponse:
    """The terms of use (their current version), who may take part, and for a signed-in user their state
    with a button that accepts the terms (and asks to join, under approval)."""
    benchmark = _benchmark(track)
    if request.method == "POST":
        if not request.user.is_authenticated:
            return redirect(f"/accounts/login/?next={request.path}")
        try:
            services.do_accept(request.user, benchmark, request.POST.get("version"), join=True)
        except services.ParticipationError as exc:
            messages.error(request, str(exc))
        else:
            refused = gate.refusal(request.user, benchmark)
            messages.success(request, "Done. " + ("You may submit now." if refused is None else refused.message))
        return redirect("participation:terms", track=track)
    rules = rules_of(benchmark)
    context = {"benchmark": benchmark, "rules": rules, "terms": rules.terms if rules else None,
               "terms_html": render_terms(rules.terms.text) if rules and rules.terms else "",
               "short_version": short(rules.terms.version) if rules and rules.terms else "",
               "announcements": current_announcements(benchmark), "Registration": Registration}
    if request.user.is_authenticated:
        participant = participant_of(request.user, benchmark)
        context |= {"participant": participant, "state": gate.state_of(request.user, rules, participant),
                    "refusal": gate.refusal(request.user, benchmark),
                    "accepted": bool(rules and rules.terms and participant
                                     and participant.terms_version == rules.terms.version)}
    return render(request, "participation/terms.html", context)


@api_auth()
def api_participation(request: HttpRequest, track: str) -> JsonResponse:
    """GET: the caller's state. POST ``{"accept_terms": "<version>"}`` accepts the current terms (and asks to
    join under approval); ``{"join": true}`` asks to join a benchmark without terms."""
    benchmark = _benchmark(track)
    if request.method == "POST":
        try:
            body = json.loads(request.body or b"{}") if request.content_type == "application/json" else \
                request.POST.dict()
        except ValueError:
            return api_error("Expected a JSON object in the request body.", 400)
        if not isinstance(body, dict):
            return api_error("Expected a JSON object in the request body.", 400)
        version = body.get("accept_terms")
        try:
            services.do_accept(request.user, benchmark, str(version) if version else None,
                               join=body.get("join") in (True, "1", "true"))
        except services.ParticipationError as exc:
            return api_error(str(exc), exc.status, exc.code, fields=exc.fields)
    elif request.method != "GET":
        return api_error("Expected GET or POST.", 405)
    return JsonResponse(gate.state_json(request.user, benchmark))
