"""The moderation desk: a review queue, per-submission and per-track actions, the audit log."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from functools import wraps
from typing import Any

from django.conf import settings
from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.db.models import Q
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.utils.dateparse import parse_datetime
from django.utils.http import url_has_allowed_host_and_scheme
from django.utils.timezone import make_aware
from django.views.decorators.http import require_POST

from leaderboard.benchmarks import phases
from leaderboard.benchmarks.models import Benchmark, Split
from leaderboard.benchmarks.permissions import is_maintainer
from leaderboard.moderation import health, services
from leaderboard.moderation.live_board import live_board
from leaderboard.moderation.models import AuditEntry
from leaderboard.submissions import broker, lifecycle
from leaderboard.submissions.models import Submission

QUEUES = {
    "review": ("Published, not verified", Q(is_published=True, is_verified=False, is_disqualified=False)),
    "flagged": ("Flagged", Q(is_flagged=True)),
    "running": ("Queued or running", Q(status__in=["queued", "running"])),
    "failed": ("Failed", Q(status="failed")),
    "all": ("All", Q()),
}


def maintainer_required(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """403 for anyone who maintains no track (anonymous users included)."""

    @wraps(view)
    def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not is_maintainer(request.user):
            raise PermissionDenied("The moderation desk is for the track maintainers: staff accounts, or "
                                   "members of a group named maintainers:<track>.")
        return view(request, *args, **kwargs)

    return wrapped


def _maintained(request: HttpRequest) -> list[Benchmark]:
    return [b for b in Benchmark.objects.all() if is_maintainer(request.user, b)]


@maintainer_required
def desk(request: HttpRequest) -> HttpResponse:
    queue = request.GET.get("queue") if request.GET.get("queue") in QUEUES else "review"
    benchmarks = _maintained(request)
    submissions = (Submission.objects.filter(QUEUES[queue][1], split__benchmark__in=benchmarks)
                   .select_related("method", "team", "split__benchmark").order_by("-updated_at")[:200])
    # Work waiting for a worker is never failed for waiting; here is where it shows.
    broker_queues = sorted({*lifecycle.all_queues(), settings.SITE_QUEUE})
    lengths = broker.queue_lengths(broker_queues) if queue == "running" else {}
    return render(request, "moderation/desk.html", {
        "queue": queue, "queues": [(k, v[0]) for k, v in QUEUES.items()], "submissions": submissions,
        "benchmarks": benchmarks, "now": timezone.now(), "unserved": health.unserved(broker.workers_seen()),
        # Empty queues of every track and version would drown the few that matter.
        "queue_lengths": {q: n for q, n in lengths.items() if n != 0}})


@maintainer_required
def health_page(request: HttpRequest) -> HttpResponse:
    """Queue lengths, the scoring workers seen (versions, devices), the oldest waiting submission."""
    return render(request, "moderation/health.html", health.scoring_health())


@maintainer_required
def submission(request: HttpRequest, pk: int) -> HttpResponse:
    sub = get_object_or_404(Submission.objects.select_related("method", "team", "split__benchmark"), pk=pk)
    services.check_maintainer(request.user, sub.split.benchmark)
    return render(request, "moderation/submission.html", {
        "primary_spec": sub.split.benchmark.metric_spec(sub.split.benchmark.spec.primary_metric),
        "submission": sub, "result": sub.latest_result, "results": sub.results.order_by("-created_at"),
        "audit": AuditEntry.objects.filter(submission_id=sub.pk),
        "selection_locked_since": phases.selection_locked_since(sub.split)})


# What each action did and what it means, said after it succeeded ({name}: the method).
TOGGLE_DONE = {
    ("verify", True): "is verified: its row shows a verified badge.",
    ("verify", False): "is no longer verified: its row lost the verified badge.",
    ("hide", True): "is hidden: its row is off the leaderboard until it is unhidden.",
    ("hide", False): "is visible again: its row is back on the leaderboard if it is published.",
    ("flag", True): "is flagged for review: it waits in the Flagged queue; the leaderboard is unchanged.",
    ("flag", False): "is no longer flagged.",
    ("disqualify", True): "is disqualified: its row is off the leaderboard and its method page shows the reason.",
    ("disqualify", False): "is requalified: its row is back on the leaderboard if it is published.",
}


def done_message(sub: Submission, action: str, on: bool = True) -> str:
    """``Submission #1 (MyNet) is verified: its row shows a verified badge.``"""
    what = f"Submission #{sub.pk} ({sub.method.name})"
    if action == "rescore":
        return f"{what} is queued to be scored again: its earlier results stay, the new one carries its scorer " \
               "version."
    if action == "cancel":
        if sub.results.exists():  # lifecycle.do_cancel keeps it counted: its scores were seen
            return f"{what} is cancelled: scoring stopped; it was scored before, so it still counts against the " \
                   "team's quota and its earlier results stay."
        return f"{what} is cancelled: scoring stopped and it does not count against the team's quota."
    if action == "publish":
        return (f"{what} is published on the team's behalf: it is its method's row on {sub.split} now." if on else
                f"{what} is withdrawn on the team's behalf: its method has no row on {sub.split} now.")
    return f"{what} {TOGGLE_DONE[(action, on)]}"


def _done(request: HttpRequest, action: Callable[[], Any], success: str) -> None:
    try:
        action()
    except services.ModerationError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, success)


@maintainer_required
@require_POST
def act(request: HttpRequest, pk: int, action: str) -> HttpResponse:
    sub = get_object_or_404(Submission.objects.select_related("method", "split__benchmark"), pk=pk)
    reason = request.POST.get("reason", "")
    if action in services.TOGGLES:
        on = request.POST.get("on", "1") == "1"
        _done(request, lambda: services.check_toggle(request.user, sub, action, on, reason),
              done_message(sub, action, on))
    elif action == "rescore":
        _done(request, lambda: services.check_rescore(request.user, sub, reason), done_message(sub, action))
    elif action == "cancel":
        _done(request, lambda: services.check_cancel(request.user, sub, reason), done_message(sub, action))
    elif action == "publish":
        on = request.POST.get("on", "1") == "1"
        _done(request, lambda: services.check_publish_for_team(request.user, sub, on, reason),
              done_message(sub, action, on))
    else:
        return HttpResponse(status=404)
    next_url = request.POST.get("next", "")
    if next_url and url_has_allowed_host_and_scheme(next_url, allowed_hosts={request.get_host()}):
        return redirect(next_url)
    return redirect("moderation:submission", pk=pk)


@maintainer_required
def track(request: HttpRequest, track: str) -> HttpResponse:
    benchmark = get_object_or_404(Benchmark, track=track)
    services.check_maintainer(request.user, benchmark)
    if request.method == "POST":
        reason = request.POST.get("reason", "")
        what = request.POST.get("action")
        split = get_object_or_404(Split.objects.select_related("benchmark"), benchmark=benchmark,
                                  name=request.POST.get("split", "")) \
            if what in {"rescore_all", "visible_after", "labels_public", *PHASE_ACTIONS} else None
        if what in {"pause", "resume"}:
            _done(request, lambda: services.check_pause(request.user, benchmark, what == "pause", reason),
                  f"Submissions to {benchmark.title} {'paused' if what == 'pause' else 'resumed'}.")
        elif what == "rescore_all" and split:
            _done(request, lambda: messages.info(request, f"{services.check_rescore_split(request.user, split, reason)}"
                                                          " submissions queued."), "Re-scoring started.")
        elif what == "labels_public" and split:
            public = request.POST.get("public") == "1"
            _done(request, lambda: services.check_set_labels_public(request.user, split, public, reason),
                  f"Labels of {split} are now {'public' if public else 'hidden'} for the drill-down.")
        elif what == "visible_after" and split:
            raw = request.POST.get("when", "").strip()
            when = parse_datetime(raw) if raw else None
            if raw and when is None:
                messages.error(request, f"Expected a date and time like 2026-12-31T23:59, but got {raw!r}.")
            else:
                when = make_aware(when) if when and when.tzinfo is None else when
                _done(request, lambda: services.check_set_visible_after(request.user, split, when, reason),
                      f"Results on {split} visible after {when or 'now'}.")
        elif what in PHASE_ACTIONS and split:
            _phase_action(request, split, what, reason)
        return redirect("moderation:track", track=track)
    splits = list(benchmark.splits.all())
    return render(request, "moderation/track.html", {
        "benchmark": benchmark, "splits": splits, "drilldown_min": settings.DRILLDOWN_MIN_GROUP_SIZE,
        "phases": {s.pk: phases.describe(s) for s in splits},
        "live": {s.pk: live_board(s) for s in splits},
        "storage_s3": settings.STORAGE_BACKEND == "s3",
        "audit": AuditEntry.objects.filter(track=track)[:50]})


PHASE_ACTIONS = {"phases", "reveal", "reopen", "close"}


def _when(raw: str, label: str) -> datetime | None:
    """A datetime-local field (UTC) or empty; ModerationError naming the field otherwise."""
    raw = raw.strip()
    if not raw:
        return None
    when = parse_datetime(raw)
    if when is None:
        raise services.ModerationError(f"Expected the {label} as a date and time like 2026-12-31T23:59, but got "
                                       f"{raw!r}.")
    return make_aware(when, UTC) if when.tzinfo is None else when


def _phase_action(request: HttpRequest, split: Split, what: str, reason: str) -> None:
    """Set the schedule, reveal, reopen or close a split (the moderation desk's challenge controls)."""
    def act() -> None:
        if what == "phases":
            services.check_set_phases(
                request.user, split, starts_at=_when(request.POST.get("starts_at", ""), "start"),
                freeze_at=_when(request.POST.get("freeze_at", ""), "freeze"),
                deadline=_when(request.POST.get("deadline", ""), "deadline"),
                reveal_at_deadline=request.POST.get("reveal_at_deadline") == "1", reason=reason)
        elif what == "reveal":
            services.check_reveal(request.user, split, reason)
        else:
            services.check_reopen(request.user, split, what == "reopen", reason)

    done = {"phases": f"Schedule of {split} saved; its board follows it.",
            "reveal": f"{split} is revealed: its board shows every row, with the private scores.",
            "reopen": f"{split} accepts submissions again after its deadline.",
            "close": f"{split} no longer accepts submissions after its deadline."}
    _done(request, act, done[what])


@maintainer_required
def audit(request: HttpRequest) -> HttpResponse:
    tracks = [b.track for b in _maintained(request)]
    if request.user.is_staff:  # what spans every track: bans from every benchmark, admin changes of no track
        tracks.append("")
    return render(request, "moderation/audit.html", {"entries": AuditEntry.objects.filter(track__in=tracks)[:500]})


@maintainer_required
def finals(request: HttpRequest, track: str, split: str) -> StreamingHttpResponse:
    """The finals' export of one phase (split): a zip of every selected submission's file and results
    (presigned links where files live in S3), streamed; audited."""
    split_obj = get_object_or_404(Split.objects.select_related("benchmark"), benchmark__track=track, name=split)
    taken = services.check_export_finals(request.user, split_obj)
    response = StreamingHttpResponse(taken.stream(), content_type="application/zip")
    response["Content-Disposition"] = f'attachment; filename="{taken.file_name}"'
    response["Cache-Control"] = "private, no-store"
    return response
