from __future__ import annotations

import json

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST

from leaderboard.accounts.auth import api_auth, api_error
from leaderboard.accounts.models import Team
from leaderboard.api_errors import failed_submission
from leaderboard.benchmarks import phases
from leaderboard.benchmarks.models import Benchmark
from leaderboard.benchmarks.selectors import splits_of
from leaderboard.lib import thresholds
from leaderboard.participation.selectors import current_announcements
from leaderboard.submissions import quotas, services
from leaderboard.submissions.forms import MethodForm, SubmissionForm
from leaderboard.submissions.methods import check_update_method, missing_for_publishing
from leaderboard.submissions.models import Method, Submission
from leaderboard.submissions.selectors import (
    list_submissions_for,
    queue_place,
    queue_places,
    submission_as_json,
    submission_rows,
    validator_commands,
)
from leaderboard.submissions.templatetags.submission_text import message

# Multipart overhead allowed above UPLOAD_DIRECT_MAX_BYTES in a one-request upload.
_FORM_OVERHEAD = 1 << 20


def _too_large_for_one_request(request: HttpRequest) -> str | None:
    """Why a one-request upload is refused before its body is read (a 2 GB POST
    would otherwise be spooled to disk first), or None."""
    try:
        length = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        length = 0
    if length <= settings.UPLOAD_DIRECT_MAX_BYTES + _FORM_OVERHEAD:
        return None
    return (f"Expected at most {settings.UPLOAD_DIRECT_MAX_BYTES / 2**20:.0f} MiB in one request, but got "
            f"{length / 2**20:,.0f} MiB: larger files go in parts (`lb submit`, or POST /api/v1/uploads).")


@login_required
def submit(request: HttpRequest, track: str) -> HttpResponse:
    """The upload form; files above UPLOAD_DIRECT_MAX_BYTES go in parts from the browser (API uploads)."""
    benchmark = get_object_or_404(Benchmark, track=track, is_active=True)
    if request.method == "POST" and (too_large := _too_large_for_one_request(request)):
        return HttpResponse(too_large, status=413, content_type="text/plain; charset=utf-8")
    teams = list(request.user.teams.order_by("-is_personal", "name"))
    offered = list(splits_of(benchmark).filter(accepting_submissions=True))
    splits = [split for split in offered if split.labels_loaded]  # open, or closed by their phase only
    limit = services.upload_limit(splits[0]) if splits else None
    form = SubmissionForm(benchmark, request.POST or None, request.FILES or None, splits=offered, teams=teams,
                          max_bytes=limit)
    if request.method == "POST" and form.is_valid():
        upload = form.cleaned_data["file"]
        try:
            submission = services.check_create_submission(
                user=request.user, track=track, split=form.cleaned_data["split"], team=form.cleaned_data["team"] or None,
                method_name=form.cleaned_data["method_name"], file=upload, file_name=upload.name)
        except services.SubmissionRejected as exc:
            form.add_error(None, str(exc))
        else:
            return redirect("submissions:detail", pk=submission.pk)
    methods = request.user.teams.values_list("methods__name", flat=True).distinct()
    usage = [(team, split, quotas.usage(team, split)) for team in teams for split in splits]
    closed = [text for split in offered if (text := phases.labels_refusal(split) or phases.refusal(split))]
    return render(request, "submissions/submit.html",
                  {"benchmark": benchmark, "form": form, "methods": [m for m in methods if m], "usage": usage,
                   "direct_max_bytes": settings.UPLOAD_DIRECT_MAX_BYTES, "closed": closed,
                   # Said before a byte is sent: the same refusal the upload would get (participation.gate).
                   "refusal": services.participation_refusal(request.user, benchmark),
                   "announcements": current_announcements(benchmark)})


@login_required
def methods(request: HttpRequest) -> HttpResponse:
    methods = Method.objects.filter(team__members=request.user).select_related("team").order_by("team", "name")
    return render(request, "submissions/methods.html", {"methods": methods})


@login_required
def method(request: HttpRequest, pk: int) -> HttpResponse:
    """Edit a method's description, which publishing needs."""
    method = get_object_or_404(Method.objects.select_related("team"), pk=pk, team__members=request.user)
    form = MethodForm(request.POST or None, instance=method)
    if request.method == "POST" and form.is_valid():
        method = check_update_method(form)
        messages.success(request, f"Saved {method.name}.")
        next_url = request.POST.get("next", "")
        if url_has_allowed_host_and_scheme(next_url, allowed_hosts={request.get_host()}):
            return redirect(next_url)
        return redirect("submissions:method", pk=pk)
    return render(request, "submissions/method.html",
                  {"method": method, "form": form, "next": request.GET.get("next", ""),
                   "missing": missing_for_publishing(method)})


@login_required
@require_POST
def reveal(request: HttpRequest, pk: int) -> HttpResponse:
    """Show the team and authors of an anonymous method everywhere (its members only; audited)."""
    method = get_object_or_404(Method.objects.select_related("team"), pk=pk, team__members=request.user)
    try:
        services.check_reveal(request.user, method)
    except services.SubmissionRejected as exc:
        messages.error(request, message(str(exc)))
    else:
        messages.success(request, f"{method.name} now shows team {method.team.name} and its authors on every page.")
    return redirect("submissions:method", pk=pk)


@login_required
def mine(request: HttpRequest) -> HttpResponse:
    """Your teams' submissions with their status, primary score and why a failed one failed."""
    rows = submission_rows(list_submissions_for(request.user))
    return render(request, "submissions/list.html", {"rows": rows, "places": queue_places([r.submission for r in rows]),
                                                     "benchmarks": Benchmark.objects.filter(is_active=True)})


@login_required
def team_history(request: HttpRequest, slug: str) -> HttpResponse:
    """Every submission of one team, newest first, with its latest result (members only)."""
    team = get_object_or_404(Team, slug=slug, members=request.user)
    submissions = (Submission.objects.filter(team=team).select_related("method", "split__benchmark", "created_by")
                   .order_by("-created_at"))
    return render(request, "submissions/team_history.html", {"team": team, "rows": submission_rows(submissions)})


@login_required
def detail(request: HttpRequest, pk: int) -> HttpResponse:
    """A submission: where it waits while queued, its progress while scored, its scores, or why it failed
    with the format page and the command that checks a file offline."""
    submission = services.access_submission(request.user, pk)
    result = submission.latest_result
    spec = submission.split.benchmark.spec
    iou = thresholds.chosen(spec, request.GET)  # MMScan's 14 metrics: one threshold's 7 at a time
    return render(request, "submissions/detail.html", {
        "submission": submission, "result": result, "spec": spec, "place": queue_place(submission),
        "specs": {m: submission.split.benchmark.metric_spec(m) for m in spec.metrics},
        "shown_metrics": thresholds.metrics_at(spec, iou),
        "iou_links": thresholds.links(spec, iou, lambda t: f"?iou={t}"),
        "validators": validator_commands(submission), "selection": services.selection_notice(submission)})


@login_required
def status(request: HttpRequest, pk: int) -> JsonResponse:
    """Polled by the detail page while scoring runs: the API's answer and, while queued, its place."""
    submission = services.access_submission(request.user, pk)
    place = queue_place(submission)
    return JsonResponse({**submission_as_json(submission), "queue_place": place.as_json() if place else None})


@login_required
@require_POST
def publish(request: HttpRequest, pk: int) -> HttpResponse:
    submission = services.access_submission(request.user, pk)
    publish = request.POST.get("publish", "1") == "1"
    anonymous = request.POST.get("anonymous") == "1"
    try:
        services.check_publish(request.user, submission, publish=publish, anonymous=anonymous)
    except services.SubmissionRejected as exc:
        messages.error(request, message(str(exc)))  # "`lb method set`" shown as code, as every message
    else:
        messages.success(request, ("Published on the leaderboard as Anonymous (under review)." if anonymous
                                   else "Published on the leaderboard.") if publish
                         else "Withdrawn from the leaderboard.")
    return redirect("submissions:detail", pk=pk)


@login_required
@require_POST
def cancel(request: HttpRequest, pk: int) -> HttpResponse:
    submission = services.access_submission(request.user, pk)
    if services.check_cancel(request.user, submission) is None:
        messages.error(request, "This submission can no longer be cancelled.")
    return redirect("submissions:detail", pk=pk)


def _flag(request: HttpRequest, name: str) -> bool:
    """A boolean option of a POST: JSON ``true``, or a form field ``1``/``true``; absent is False."""
    if request.content_type == "application/json":
        try:
            body = json.loads(request.body or b"{}")
        except ValueError:
            return False
        return isinstance(body, dict) and body.get(name) is True
    return request.POST.get(name, "").lower() in {"1", "true", "yes"}


@api_auth()
def api_submissions(request: HttpRequest) -> JsonResponse:
    """POST: create a submission (multipart: track, split, method_name, file). GET: list yours."""
    if request.method == "GET":
        return JsonResponse({"submissions": [submission_as_json(s)
                                             for s in list_submissions_for(request.user)[:100]]})
    if request.method != "POST":
        return api_error("Expected GET or POST.", 405)
    if too_large := _too_large_for_one_request(request):
        return api_error(too_large, 413)
    missing = [f for f in ("track", "split", "method_name") if not request.POST.get(f)]
    if "file" not in request.FILES:
        missing.append("file")
    if missing:
        return api_error(f"Missing multipart field(s): {', '.join(missing)}.", 400)
    upload = request.FILES["file"]
    try:
        submission = services.check_create_submission(
            user=request.user, track=request.POST["track"], split=request.POST["split"],
            method_name=request.POST["method_name"], file=upload, file_name=upload.name,
            team=request.POST.get("team") or None)
    except services.SubmissionRejected as exc:
        return api_error(str(exc), exc.status, exc.code, getattr(exc, "retry_at", None), getattr(exc, "fields", None))
    body = submission_as_json(submission)
    if submission.status == submission.Status.FAILED:
        return failed_submission(body)
    return JsonResponse(body, status=201)


@api_auth()
def api_submission(request: HttpRequest, pk: int) -> JsonResponse:
    return JsonResponse(submission_as_json(services.access_submission(request.user, pk)))


@api_auth()
def api_publish(request: HttpRequest, pk: int) -> JsonResponse:
    if request.method != "POST":
        return api_error("Expected POST.", 405)
    submission = services.access_submission(request.user, pk)
    try:
        services.check_publish(request.user, submission, anonymous=_flag(request, "anonymous"))
    except services.SubmissionRejected as exc:
        return api_error(str(exc), 409, exc.code)
    submission.refresh_from_db()
    return JsonResponse(submission_as_json(submission))
