"""The OpenAPI 3.1 description of /api/v1/, served at /api/v1/openapi.json and
rendered for people at /api/. A test checks that every API route is described."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render

from evaluation_workers.tracks import names
from leaderboard.api_errors import CODES, EXTRA_CODES
from leaderboard.openapi_schemas import SCHEMAS, attach


def _param(name: str, where: str, description: str, schema: dict[str, Any] | None = None,
           required: bool = False) -> dict[str, Any]:
    return {"name": name, "in": where, "description": description, "required": required or where == "path",
            "schema": schema or {"type": "string"}}


ERROR_REF = {"$ref": "#/components/schemas/Error"}
# What each error status means on this API; an operation may say more.
ERROR_TEXT = {400: "Bad request; the message names the field or the problem",
              401: "Missing, malformed, invalid, revoked or expired token; the message says which",
              403: "Not allowed: a member of the submission's team only (staff included), or a bad CSRF token",
              404: "Not yours or absent",
              409: "The state forbids it; the message says what to do",
              413: "Too large for one request: use /api/v1/uploads",
              429: "Quota reached; the message says which limit (team or user), its value and when the next "
                   "submission is allowed (also as retry_at and Retry-After where known)",
              500: "Server error; details are logged, never returned",
              503: "Storage or the broker is unavailable; nothing was counted: try again later"}
ERROR_SCHEMA = {
    "type": "object", "required": ["error"],
    "description": "Every error under /api/, Django's own 404 and 500 included.",
    "properties": {"error": {
        "type": "object", "required": ["code", "message"],
        "properties": {
            "code": {"type": "string", "enum": sorted({*CODES.values(), *EXTRA_CODES}),
                     "description": "Stable slug for programs"},
            "message": {"type": "string", "description": "For people: names the thing, the rule and the value"},
            "kind": {"type": "string", "description": "invalid_file/submission_failed only: the failure's kind"},
            "retry_at": {"type": "string", "format": "date-time",
                         "description": "quota_exceeded only, where known: when the next submission is allowed"},
            "terms_url": {"type": "string", "description": "terms_not_accepted and terms_version_mismatch: the page "
                                                           "of the benchmark's terms of use"},
            "terms_version": {"type": "string", "description": "terms_not_accepted and terms_version_mismatch: the "
                                                               "current terms' version, to accept with POST "
                                                               "/api/v1/benchmarks/{track}/participation"}}}},
}
# What an upload refused for taking part says (leaderboard.participation.gate).
PARTICIPATION_403 = ("the user may not take part in the benchmark: banned, email_domain_not_allowed, "
                     "email_not_verified, terms_not_accepted (with terms_url and terms_version), "
                     "participation_pending or participation_denied; the message says what to do")


def _responses(ok: dict[str, Any], errors: tuple[int, ...], **texts: str) -> dict[str, Any]:
    """``ok`` plus each error status (and 500) with the Error schema; ``texts``: ``e409="..."`` overrides."""
    responses = dict(ok)
    for status in sorted({*errors, 500}):
        responses[str(status)] = {"description": texts.get(f"e{status}", ERROR_TEXT[status]),
                                  "content": {"application/json": {"schema": ERROR_REF}}}
    return responses


def _get(summary: str, *params: dict[str, Any], auth: bool = False, tag: str = "leaderboards",
         errors: tuple[int, ...] = ()) -> dict[str, Any]:
    if any(p["in"] == "path" for p in params):
        errors = (*errors, 404)
    op: dict[str, Any] = {"summary": summary, "tags": [tag], "parameters": list(params),
                          "responses": _responses({"200": {"description": "OK (JSON)"}},
                                                  (*errors, 401) if auth else errors)}
    if auth:
        op["security"] = [{"token": []}]
    return op


def _write(summary: str, tag: str, *params: dict[str, Any], errors: tuple[int, ...] = (400, 401, 404),
           **texts: str) -> dict[str, Any]:
    return {"summary": summary, "tags": [tag], "parameters": list(params), "security": [{"token": []}],
            "responses": _responses({"200": {"description": "OK (JSON)"}}, errors, **texts)}


TRACK = _param("track", "path", f"Track slug: {', '.join(names())}")
SPLIT = _param("split", "query", "Split name (default: the track's default split)")
VIEW = [SPLIT,
        _param("metric", "query", "One of the track's metrics (default: primary)"),
        _param("sort", "query", "Column to rank by: a metric, or '<group>/<metric>'"),
        _param("order", "query", "desc or asc (default: best first, asc for a metric where lower is better)",
               {"enum": ["desc", "asc"]}),
        _param("paper", "query", "0 hides rows reported in papers", {"enum": ["0", "1"]}),
        _param("extra", "query", "Training-data filter", {"enum": ["any", "no", "only"]}),
        _param("protocol", "query", "Absent: rows of this service's protocol ranked, the other protocols' paper "
               "rows listed apart ('apart'); 'all': every protocol ranked together; a key of the track's "
               "'protocols': only that protocol's rows (a row that declares none counts as this service's, "
               "the first). On a split with synthetic labels paper rows are always apart"),
        _param("iou", "query", "MMScan: the metric and sort column at this IoU threshold (0.25 or 0.5)"),
        _param("field.{name}", "query", "A method field the benchmark declares as a filter (its 'method_fields'): "
               "only the rows with this answer (yes or no for a yes/no field)"),
        _param("page", "query", "Page number (50 rows a page)", {"type": "integer", "minimum": 1})]
SUBMISSION_ID = _param("id", "path", "Submission id", {"type": "integer"})
UPLOAD_ID = _param("id", "path", "Upload (submission) id", {"type": "integer"})

PATHS: dict[str, dict[str, Any]] = {
    "/api/v1/tracks": {"get": _get("Tracks, their splits, metrics and upload limits", tag="tracks")},
    "/api/v1/leaderboards/{track}": {"get": _get(
        "Ranked rows of one leaderboard view (same parameters as the page)", TRACK, *VIEW, errors=(400,))},
    "/api/v1/leaderboards/{track}/compare": {"get": {
        **_get("2-4 entries side by side, with the paired test of each pair on the metric (Holm-adjusted "
               "together). Read anonymously, it shows what is computed; with a token it also asks a worker for "
               "the pairs nobody asked yet, at most PAIRED_TESTS_PER_USER_HOUR an hour",
               TRACK, SPLIT, _param("metric", "query", "One of the track's metrics (default: primary)"),
               _param("e", "query", "Entry id (repeat 2-4 times)", {"type": "integer", "minimum": 1,
                                                                     "maximum": 2**63 - 1}, required=True),
               errors=(401, 404)),
        "security": [{}, {"token": []}]}},
    "/api/v1/leaderboards/{track}/progress": {"get": _get("Best primary score over time", TRACK, SPLIT)},
    "/api/v1/leaderboards/{track}/challenges/{name}": {"get": _get(
        "A challenge: its phases in order and where it stands; once its last phase ended, its archived final "
        "board (never recomputed), the top entries marked", TRACK, _param("name", "path", "Challenge name"))},
    "/api/v1/methods/{id}": {"get": _get("A method's metadata and public results",
                                         _param("id", "path", "Method id", {"type": "integer"}))},
    "/api/v1/submissions": {
        "get": _get("Your team's recent submissions", auth=True, tag="submissions"),
        "post": {"summary": "Upload predictions (multipart: track, split, method_name, file)",
                 "tags": ["submissions"], "security": [{"token": []}],
                 "requestBody": {"content": {"multipart/form-data": {"schema": {
                     "type": "object", "required": ["track", "split", "method_name", "file"],
                     "properties": {"track": {"type": "string"}, "split": {"type": "string"},
                                    "method_name": {"type": "string"},
                                    "file": {"type": "string", "format": "binary"}}}}}},
                 "responses": _responses(
                     {"201": {"description": "Created: id and status"}}, (400, 401, 403, 409, 413, 429, 503),
                     e400="Bad request (invalid_request), or the file was refused (invalid_file: for its content "
                          "the body is the failed submission, its error has the failure's kind; for its name or "
                          "size only the error: nothing is created); submission_failed: the platform failed it, "
                          "refunded",
                     e409="labels_not_loaded: the split is not open yet, its labels are not loaded (it opens "
                          "when they are)",
                     e403="CSRF check failed (session requests without the token), or the split's challenge "
                          "accepts no submission now (phase_closed: not started, frozen, past its deadline), or "
                          + PARTICIPATION_403)}},
    "/api/v1/submissions/{id}": {"get": _get("Status, progress, error and aggregate result", SUBMISSION_ID,
                                             auth=True, tag="submissions")},
    "/api/v1/submissions/{id}/publish": {"post": {
        "summary": "Publish a finished submission as its method's row ({\"anonymous\": true}: as Anonymous "
                   "(under review) until revealed)", "tags": ["submissions"],
        "parameters": [SUBMISSION_ID], "security": [{"token": []}],
        "requestBody": {"required": False, "content": {"application/json": {
            "schema": {"$ref": "#/components/schemas/PublishOptions"}}}},
        "responses": _responses({"200": {"description": "Published"}}, (401, 403, 404, 409),
                                e409="Not publishable yet: not finished, or the method is not described (its "
                                     "details, the benchmark's required method fields); too_many_published: the "
                                     "team has as many rows as the challenge phase allows; or it "
                                     "cannot be anonymous (public under its team, or revealed); or "
                                     "selection_locked: from the split's freeze on the team's selection is final "
                                     "(only a submission sent before the freeze that finished scoring after it "
                                     "may still be published, until the reveal)")}},
    "/api/v1/me": {"get": _get("Who the token belongs to, and their teams", auth=True, tag="accounts")},
    "/api/v1/benchmarks/{track}/participation": {
        "get": _get("Your part in a benchmark: its terms (version, address) and whether you accepted them, its "
                    "registration and your state, and whether (or why not) you may submit", TRACK, auth=True,
                    tag="participation"),
        "post": _write("Accept the benchmark's current terms ({\"accept_terms\": \"<version>\"}; under "
                       "registration approval this also asks to take part), or ask to take part in one without "
                       "terms ({\"join\": true}); answers your state", "participation", TRACK,
                       errors=(400, 401, 404, 409),
                       e409="terms_version_mismatch: the version given is not the current one (error.terms_version "
                            "is; error.terms_url shows it)")},
    "/api/v1/quota": {"get": _get(
        "Your team's and your own limits on a split, and when the next submission is allowed",
        _param("track", "query", "Track slug", required=True), SPLIT,
        _param("team", "query", "Team slug (default: your personal team)"), auth=True, tag="submissions",
        errors=(404,))},
    "/api/v1/tracks/{track}/{split}/manifest": {"get": _get(
        "Public manifest of a split's active labels (ids and counts, never labels), for offline validation",
        TRACK, _param("split", "path", "Split name"), tag="tracks")},
    "/api/v1/uploads": {
        "get": _get("How uploads in parts work here (part size, limits, storage)", auth=True, tag="uploads"),
        "post": _write("Start an upload in parts (JSON or form: track, split, method_name, file_name, size"
                       "[, team]); returns its id and part size", "uploads", errors=(400, 401, 403, 409, 429),
                       e409="labels_not_loaded: the split is not open yet, its labels are not loaded (it opens "
                            "when they are)",
                       e403="CSRF check failed, or the split's challenge accepts no submission now (phase_closed), "
                            "or " + PARTICIPATION_403)},
    "/api/v1/uploads/{id}": {
        "get": _get("An upload and the parts that have arrived (to resume)",
                    _param("id", "path", "Upload (submission) id", {"type": "integer"}), auth=True, tag="uploads"),
        "delete": _write("Abandon an upload; it stops counting against quotas", "uploads", UPLOAD_ID,
                         errors=(401, 403, 404))},
    "/api/v1/uploads/{id}/urls": {"post": _write(
        "PUT URLs for the given part numbers (presigned S3, or the site itself with local storage)", "uploads",
        UPLOAD_ID, errors=(400, 401, 403, 404, 409))},
    "/api/v1/uploads/{id}/parts/{number}": {"put": {
        "summary": "Upload one part to the site (local storage); the signed URL authorises it",
        "tags": ["uploads"], "parameters": [UPLOAD_ID, _param("number", "path", "Part number from 1",
                                                              {"type": "integer", "minimum": 1})],
        "responses": _responses({"200": {"description": "Stored"}}, (400, 403, 409),
                                e400="The part is larger than announced, or its number is out of range",
                                e403="Bad or expired signature, or one made for another upload",
                                e409="The upload was completed, abandoned or cancelled")}},
    "/api/v1/uploads/{id}/complete": {"post": _write(
        "Join the parts and queue the submission; 400 with the reason if the file is refused", "uploads",
        UPLOAD_ID, errors=(400, 401, 403, 404, 409, 503),
        e400="The joined file was refused (invalid_file: the body is the failed submission)")},
    "/api/v1/my/methods": {"get": _get("The methods of your teams",
                                       _param("name", "query", "Filter by name"),
                                       _param("team", "query", "Filter by team slug"), auth=True, tag="methods")},
    "/api/v1/my/methods/{id}": {
        "get": _get("A method of your team", _param("id", "path", "Method id", {"type": "integer"}), auth=True,
                    tag="methods"),
        "patch": _write("Change a method's description, paper, code, authors, extra-data flag, details, and its "
                        "answers to the method fields of the benchmarks it entered ('fields')",
                        "methods", _param("id", "path", "Method id", {"type": "integer"}))},
    "/api/v1/my/methods/{id}/reveal": {"post": _write(
        "Reveal an anonymous method: its team, authors, paper and code show everywhere from now on (audited; "
        "it cannot be anonymous again)", "methods", _param("id", "path", "Method id", {"type": "integer"}),
        errors=(401, 404, 409), e409="The method is not anonymous")},
}


def schema(paths: dict[str, dict[str, Any]] | None = None) -> dict[str, Any]:
    return {
        "openapi": "3.1.0",
        "info": {"title": "3D scene-understanding leaderboards API", "version": "1",
                 "description": "Read endpoints are anonymous. Writes take 'Authorization: Token <key>' "
                                "(python manage.py issue_token, or the API tokens page). Scores are "
                                "fractions in [0, 1] unless a metric's spec says otherwise (metric_specs: a value "
                                "with a unit, lower or higher is better); undefined values are null. Every error is "
                                "{\"error\": {\"code\", \"message\"}} (components.schemas.Error)."},
        "components": {"securitySchemes": {"token": {"type": "apiKey", "in": "header", "name": "Authorization",
                                                     "description": "Token <key>"}},
                       "schemas": {**SCHEMAS, "Error": ERROR_SCHEMA}},
        "paths": attach(paths or PATHS),
    }


def openapi_json(request: HttpRequest) -> JsonResponse:
    return JsonResponse(schema())


def api_docs(request: HttpRequest) -> HttpResponse:
    operations = [(path, method.upper(), op) for path, methods in PATHS.items() for method, op in methods.items()]
    return render(request, "api_docs.html", {"operations": operations,
                                             "site": request.build_absolute_uri("/").rstrip("/")})
