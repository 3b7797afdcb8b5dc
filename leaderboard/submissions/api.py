"""The JSON API of uploads in parts, quotas, methods and public manifests.

The older endpoints (create in one request, status, publish) stay in
``views.py``. Errors are ``{"error": {"code", "message"}}`` (``leaderboard.api_errors``)
with 400, 401, 403, 404, 409 (the upload's state forbids it) or 429 (quota).
"""

from __future__ import annotations

import json
from typing import Any

from django.conf import settings
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404
from django.urls import reverse
from django.views.decorators.csrf import csrf_exempt

from leaderboard.accounts.auth import api_auth, api_error
from leaderboard.accounts.models import Team
from leaderboard.api_errors import failed_submission
from leaderboard.benchmarks.selectors import get_split, upload_limit
from leaderboard.lib import storage
from leaderboard.lib.pagecache import cached_page
from leaderboard.submissions import quotas, services, uploads
from leaderboard.submissions.forms import MethodForm
from leaderboard.submissions.methods import check_update_method
from leaderboard.submissions.models import Method, Upload
from leaderboard.submissions.selectors import method_as_json, submission_as_json


def _body(request: HttpRequest) -> dict[str, Any]:
    if request.content_type == "application/json":
        try:
            data = json.loads(request.body or b"{}")
        except ValueError:
            raise services.SubmissionRejected("Expected a JSON object in the request body.") from None
        if not isinstance(data, dict):
            raise services.SubmissionRejected("Expected a JSON object in the request body.")
        return data
    return request.POST.dict()


def _rejected(exc: services.SubmissionRejected) -> JsonResponse:
    return api_error(str(exc), getattr(exc, "status", 400), getattr(exc, "code", None),
                     getattr(exc, "retry_at", None), getattr(exc, "fields", None))


def _upload_of(request: HttpRequest, pk: int, write: bool = False) -> Upload:
    """The upload if ``request.user`` may see it (404 otherwise); ``write``: only its team may change it."""
    submission = services.access_submission(request.user, pk)
    upload = Upload.objects.filter(submission=submission).select_related("submission__team").first()
    if upload is None:
        raise Http404(f"Submission #{pk} was not uploaded in parts.")
    if write and not submission.team.members.filter(pk=request.user.pk).exists():
        raise PermissionDenied(f"Only a member of the team {submission.team.name} can change upload #{pk}.")
    return upload


def upload_as_json(upload: Upload, parts: list[storage.Part] | None = None) -> dict[str, Any]:
    submission = upload.submission
    body: dict[str, Any] = {
        "id": submission.pk, "status": "open" if upload.is_open else
        ("completed" if upload.completed_at else "aborted"),
        "backend": settings.STORAGE_BACKEND, "size": upload.declared_size, "part_size": upload.part_size,
        "part_count": upload.part_count, "expires_at": upload.expires_at.isoformat(),
        "submission": submission_as_json(submission)}
    if parts is not None:
        body["parts"] = [{"part_number": p.number, "size": p.size, "etag": p.etag} for p in parts]
    return body


@api_auth()
def api_uploads(request: HttpRequest) -> JsonResponse:
    """GET: how uploads work here. POST (track, split, method_name, file_name, size[, team]): start one."""
    if request.method == "GET":
        return JsonResponse({"backend": settings.STORAGE_BACKEND,
                             "direct_max_bytes": settings.UPLOAD_DIRECT_MAX_BYTES,
                             "part_size": settings.UPLOAD_PART_BYTES, "url_expiry": settings.UPLOAD_URL_EXPIRY,
                             "expiry_hours": settings.UPLOAD_EXPIRY_HOURS})
    if request.method != "POST":
        return api_error("Expected GET or POST.", 405)
    try:
        data = _body(request)
        missing = [f for f in ("track", "split", "method_name", "file_name", "size") if not data.get(f)]
        if missing:
            return api_error(f"Missing field(s): {', '.join(missing)}.", 400)
        try:
            size = int(data["size"])
        except (TypeError, ValueError):
            return api_error("Expected 'size' in bytes, an integer.", 400)
        upload = uploads.check_start_upload(
            user=request.user, track=str(data["track"]), split=str(data["split"]),
            method_name=str(data["method_name"]), file_name=str(data["file_name"]), size=size,
            team=str(data["team"]) if data.get("team") else None)
    except services.SubmissionRejected as exc:
        return _rejected(exc)
    return JsonResponse(upload_as_json(upload, []), status=201)


@api_auth()
def api_upload(request: HttpRequest, pk: int) -> JsonResponse:
    """GET: the upload and the parts that have arrived (to resume). DELETE: abandon it."""
    upload = _upload_of(request, pk, write=request.method == "DELETE")
    if request.method == "DELETE":
        services.check_cancel(request.user, upload.submission)
        upload.refresh_from_db()
        upload.submission.refresh_from_db()
        return JsonResponse(upload_as_json(upload))
    if request.method != "GET":
        return api_error("Expected GET or DELETE.", 405)
    return JsonResponse(upload_as_json(upload, uploads.upload_parts(upload)))


@api_auth()
def api_upload_urls(request: HttpRequest, pk: int) -> JsonResponse:
    """POST {"parts": [1, 2, ...]}: a PUT URL for each part."""
    if request.method != "POST":
        return api_error("Expected POST.", 405)
    upload = _upload_of(request, pk, write=True)
    try:
        numbers = _body(request).get("parts")
        if not isinstance(numbers, list):
            return api_error("Expected {\"parts\": [part numbers]}.", 400)

        def local_url(number: int, signature: str) -> str:
            path = reverse("api-upload-part", args=[pk, number])
            return request.build_absolute_uri(f"{path}?signature={signature}")

        urls = uploads.part_urls(upload, numbers, local_url)
    except services.SubmissionRejected as exc:
        return _rejected(exc)
    return JsonResponse({"urls": urls, "expires_in": settings.UPLOAD_URL_EXPIRY})


@csrf_exempt
def api_upload_part(request: HttpRequest, pk: int, number: int) -> HttpResponse:
    """PUT one part to the site (local storage); the signed URL is the authorisation, as on S3."""
    if request.method != "PUT":
        return api_error("Expected PUT.", 405)
    # An unknown upload gets the same answer as a bad signature: the URL is all a caller has.
    upload = Upload.objects.select_related("submission").filter(submission_id=pk).first()
    if upload is None or not uploads.check_part_signature(upload, number, request.GET.get("signature", "")):
        return api_error(f"Invalid or expired URL for part {number} of upload #{pk}; ask for a new one "
                         f"(POST /api/v1/uploads/{pk}/urls).", 403)
    try:
        declared = int(request.headers.get("Content-Length") or 0)
        if declared > uploads.part_limit(upload, number):
            return api_error(f"Part {number} is larger than {uploads.part_limit(upload, number):,} bytes.", 400)
        part = uploads.do_write_part(upload, number, storage.read_chunks(request))
    except services.SubmissionRejected as exc:
        return _rejected(exc)
    response = JsonResponse({"part_number": part.number, "size": part.size, "etag": part.etag})
    response["ETag"] = part.etag
    return response


@api_auth()
def api_upload_complete(request: HttpRequest, pk: int) -> JsonResponse:
    """POST: join the parts and queue the submission; 400 with the reason if the file is refused."""
    if request.method != "POST":
        return api_error("Expected POST.", 405)
    upload = _upload_of(request, pk, write=True)
    try:
        submission = uploads.check_complete_upload(upload)
    except services.SubmissionRejected as exc:
        return _rejected(exc)
    body = submission_as_json(submission)
    return failed_submission(body) if body["error"] else JsonResponse(body)


@api_auth()
def api_quota(request: HttpRequest) -> JsonResponse:
    """GET ?track=&split=[&team=]: the team's quota on a split and when the daily count resets."""
    split = get_split(request.GET.get("track", ""), request.GET.get("split") or None)
    slug = request.GET.get("team")
    team = (Team.objects.filter(slug=slug, membership__user=request.user).first() if slug
            else request.user.teams.filter(is_personal=True).first())
    if team is None:
        return api_error(f"You are not a member of a team {slug!r}.", 404)
    used = quotas.usage(team, split)
    return JsonResponse({"track": split.benchmark.track, "split": split.name, "team": team.slug, **used.as_json(),
                         "user": quotas.user_usage(request.user, split, used.limits).as_json()})


@cached_page("track")
def api_manifest(request: HttpRequest, track: str, split: str) -> JsonResponse:
    """The public manifest of a split's active labels (ids and counts, never labels), for `lb validate`,
    with the split's upload rules (the file endings and the largest file it accepts) that it applies too."""
    split_obj = get_split(track, split)
    if split_obj.name != split:
        raise Http404(f"No split {split!r} for {track}.")
    labels = split_obj.active_labels
    if labels is None:
        return api_error(f"No labels are loaded for {track}/{split} yet.", 404)
    spec = split_obj.benchmark.spec
    return JsonResponse({"track": track, "split": split, "labels_sha256": labels.sha256,
                         "upload_suffixes": list(spec.upload_suffixes), "max_upload_bytes": upload_limit(split_obj),
                         "manifest": labels.manifest})


@api_auth()
def api_methods(request: HttpRequest) -> JsonResponse:
    """GET [?name=&team=]: the methods of your teams."""
    methods = Method.objects.filter(team__members=request.user).select_related("team").order_by("team", "name")
    if request.GET.get("team"):
        methods = methods.filter(team__slug=request.GET["team"])
    if request.GET.get("name"):
        methods = methods.filter(name=request.GET["name"])
    return JsonResponse({"methods": [method_as_json(m) for m in methods[:500]]})


@api_auth()
def api_method(request: HttpRequest, pk: int) -> JsonResponse:
    """GET: a method of your team. PATCH or POST (JSON): change its description."""
    method = get_object_or_404(Method.objects.select_related("team"), pk=pk, team__members=request.user)
    if request.method == "GET":
        return JsonResponse(method_as_json(method))
    if request.method not in ("PATCH", "POST"):
        return api_error("Expected GET, PATCH or POST.", 405)
    try:
        data = _body(request) if request.method == "POST" else json.loads(request.body or b"{}")
    except (ValueError, services.SubmissionRejected):
        return api_error("Expected a JSON object in the request body.", 400)
    try:
        form = MethodForm.from_partial(method, data)
    except ValueError as exc:
        return api_error(f"Invalid method details: {exc}", 400)
    if not form.is_valid():
        errors = "; ".join(f"{field}: {' '.join(messages)}" for field, messages in form.errors.items())
        return api_error(f"Invalid method details: {errors}", 400)
    return JsonResponse(method_as_json(check_update_method(form)))


@api_auth()
def api_method_reveal(request: HttpRequest, pk: int) -> JsonResponse:
    """POST: show the team, authors, paper and code of your anonymous method everywhere (audited)."""
    if request.method != "POST":
        return api_error("Expected POST.", 405)
    method = get_object_or_404(Method.objects.select_related("team"), pk=pk, team__members=request.user)
    try:
        method = services.check_reveal(request.user, method)
    except services.SubmissionRejected as exc:
        return api_error(str(exc), 409)
    return JsonResponse(method_as_json(method))
