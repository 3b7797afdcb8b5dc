"""The bodies of /api/v1/ as JSON Schemas (``components.schemas`` of the OpenAPI document).

Each schema describes what the view really returns (``submission_as_json``,
``entry_as_json``, ``method_as_json``, ``upload_as_json``...); the tests check
real answers against them, so a field added to a view without its schema fails.
``OK`` names the body of each operation's success answer, ``REQUESTS`` the
JSON bodies operations accept.
"""

from __future__ import annotations

from typing import Any

from evaluation_workers.tracks import all_tracks


def ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _obj(properties: dict[str, Any], required: list[str] | None = None, **extra: Any) -> dict[str, Any]:
    return {"type": "object", "properties": properties,
            "required": list(properties) if required is None else required, **extra}


STR, INT, BOOL, NUM = {"type": "string"}, {"type": "integer"}, {"type": "boolean"}, {"type": "number"}
DATE = {"type": "string", "format": "date-time"}


def nullable(schema: dict[str, Any]) -> dict[str, Any]:
    return {"anyOf": [schema, {"type": "null"}]}


SCORES = {"type": "object", "additionalProperties": nullable(NUM),
          "description": "Flat scores, fractions in [0, 1]: '<metric>' overall, '<group>/<metric>' per group "
                         "(and '<group>/count'); null where undefined"}

PHASE = {
    "phase": {"type": "string", "enum": ["upcoming", "open", "frozen", "closed", "revealed"],
              "description": "The split's challenge phase (open for ever without a schedule); closed: past the "
                             "deadline, waiting for the maintainers' reveal"},
    "starts_at": nullable(DATE), "freeze_at": nullable(DATE), "deadline": nullable(DATE),
    "reveal": {"type": "string", "enum": ["deadline", "maintainer"], "description": "What reveals the full board"},
    "revealed_at": nullable(DATE), "reopened": BOOL,
    "next_phase": nullable({"type": "string"}), "next_phase_at": nullable(DATE),
    "seconds_to_next_phase": nullable(INT),
    "labels_loaded": {"type": "boolean", "description": "The split's labels are loaded; until then it is not open "
                                                        "yet (it opens when they are)"},
    "accepting_submissions": {"type": "boolean", "description": "Accepting now: not paused by the maintainers, "
                                                                "labels loaded, and a phase that takes submissions"},
    "refusal": {**nullable({"type": "string"}), "description": "Why a submission would be refused now, in the "
                                                               "words of the refusal (paused, 'not open yet (labels "
                                                               "not loaded yet: opens when they are)', its phase); "
                                                               "null when it is accepting"},
    "public_subset": {"type": "boolean", "description": "Scored on a public subset (shown until the reveal) "
                                                         "and on the private remainder (shown after it)"},
}
QUOTA_USE = _obj({"used": INT, "limit": INT})
QUOTA = {"per_day": QUOTA_USE, "total": QUOTA_USE, "in_flight": QUOTA_USE, "rejected_per_day": QUOTA_USE,
         "min_interval": _obj({"seconds": INT, "next_at": nullable(DATE)}), "resets_at": DATE}
INTERVALS = {"type": "object",
             "additionalProperties": {"type": "array", "items": NUM, "minItems": 2, "maxItems": 2},
             "description": "95 % bootstrap percentile intervals [lo, hi] of the scores, keyed like them; a key "
                            "is absent where there is none (paper rows have none)"}
PAIRED_TEST = _obj({
    "a": INT, "b": INT, "metric": STR,
    "status": {"type": "string", "enum": ["done", "pending", "not_requested", "unavailable"],
               "description": "pending: a scoring worker computes it; not_requested: nobody asked yet (a signed-in "
                              "request asks, within PAIRED_TESTS_PER_USER_HOUR; 'notice' says when it may not)"},
    "reason": STR,
    "test": {"type": "string", "description": "The test that gave p_value (paired-permutation-by-scene: the two "
                                              "methods' outcomes swapped scene by scene); empty unless done"},
    "difference": nullable(NUM),
    "p_value": {**nullable(NUM), "description": "Two-sided, before adjustment; it decides the verdict"},
    "adjusted_p_value": {**nullable(NUM), "description": "Holm-adjusted over the answer's 'significance' family"},
    "interval": {**nullable({"type": "array", "items": NUM, "minItems": 2, "maxItems": 2}),
                 "description": "95 % paired interval of the difference, from the scene bootstrap"},
    "significant": {**nullable(BOOL), "description": "adjusted_p_value below the level; false means no "
                                                     "significant difference, not equality"},
    "permutations": {**nullable(INT), "description": "The swaps of scenes p_value counts (every one when exact)"},
    "exact": nullable(BOOL),
    "disagreement": {"type": "string", "description": "Where p < 0.05 and the interval disagree (the interval "
                                                      "holds 0, or the reverse): that the permutation test decided, "
                                                      "in words; empty where they agree"}},
    description="Entry a against entry b (a - b) on the metric, paired on the split's units; only aggregates")
SIGNIFICANCE = _obj({
    "adjustment": {"type": "string", "enum": ["holm"]},
    "key": {"type": "string", "description": "The score key tested: the sorted column, or the compared metric"},
    "over": {"type": "string", "description": "The tests adjusted together, in words"},
    "pairs": {"type": "integer", "description": "How many tests the adjustment is over"},
    "not_computed": {"type": "integer", "description": "Of them, not answered yet (counted as p = 1)"},
    "level": NUM,
    "test": {"type": "string", "description": "The test whose p-values these are (paired-permutation-by-scene)"}},
    description="How the p-values shown together were adjusted for multiplicity")

def _manifest_name(track: str) -> str:
    """``mmscan-vg`` -> ``MmscanVgManifest``."""
    return "".join(part.capitalize() for part in track.split("-")) + "Manifest"


# Each installed track's public manifest (``Track.manifest_schema``; every property present unless it says).
TRACK_MANIFESTS: dict[str, dict[str, Any]] = {
    _manifest_name(t.name): {"required": list(t.manifest_schema.get("properties", {})), **t.manifest_schema}
    for t in all_tracks() if t.manifest_schema}

SCHEMAS: dict[str, dict[str, Any]] = {
    "Result": _obj({
        "scorer_version": STR, "labels_sha256": STR, "predictions_sha256": STR,
        "partition": {"type": "string", "enum": ["", "public", "private"],
                      "description": "The units scored: all (''), the public subset, or the private remainder "
                                     "(never shown before the split is revealed)"},
        "metrics": {"type": "object", "additionalProperties": nullable(NUM), "description": "Overall, fractions"},
        "breakdown": {"type": "object", "additionalProperties": {"type": "object"},
                      "description": "Per group: each metric and 'count'"},
        "details": {"type": "object"}, "warnings": {"type": "array", "items": STR},
        "intervals": INTERVALS,
        "bootstrap": {"type": "object", "description": "How the intervals were drawn: resamples, seed, unit, "
                                                       "units, level, method, block; empty without intervals"}},
        description="Aggregate scores of one scorer version (never per-item results)"),
    "Submission": _obj({
        "id": INT, "track": STR, "split": STR, "method": STR, "team": STR, "file_name": STR,
        "file_size": {"type": "integer", "description": "Bytes stored (0 for a file refused while it was stored)"},
        "predictions_sha256": STR,
        "status": {"type": "string", "enum": ["uploading", "submitted", "queued", "running", "finished", "failed",
                                              "cancelled"]},
        "quota": STR, "progress": NUM, "message": STR,
        "error": nullable(_obj({"kind": STR, "message": STR, "code": STR}, ["kind", "message"])),
        "is_published": BOOL, "created_at": DATE, "finished_at": nullable(DATE), "result": nullable(ref("Result"))}),
    "SubmissionList": _obj({"submissions": {"type": "array", "items": ref("Submission")}}),
    "LeaderboardRow": _obj({
        "rank": nullable(INT), "entry_id": INT, "method": STR, "method_id": nullable(INT),
        "team": {**nullable(STR), "description": "null for an anonymous row (under review); '' for a paper row"},
        "anonymous": {"type": "boolean", "description": "Published as 'Anonymous (under review)': no team until "
                                                         "the team reveals it"},
        "reported_in_paper": BOOL,
        "reference": {"type": "boolean", "description": "A point of reference from a paper (human performance, an "
                                                        "oracle, an upper bound): listed under 'references', never "
                                                        "ranked (rank null)"},
        "note": STR,
        "paper_url": {"type": "string", "description": "Paper rows: the publication the numbers come from"},
        "venue": STR, "protocol": {"type": "string", "description": "The track's scoring protocol that produced "
                                                                    "the row (GET /api/v1/tracks lists them)"},
        "uses_extra_data": BOOL, "verified": BOOL, "scorer_version": STR, "submission_id": nullable(INT),
        "published_at": {"type": "string", "format": "date-time",
                         "description": "Published here; for a paper row, the paper's publication date"},
        "scores": SCORES, "intervals": INTERVALS,
        "no_significant_difference_from_entry_id": {
            **nullable(INT), "description": "The row above, when the paired test of the two on the sorted column "
                                            "finds no significant difference (adjusted_p_value at least the level); "
                                            "not a claim that the two are equal"},
        "adjusted_p_value": {**nullable(NUM), "description": "The paired test against the row above on the sorted "
                                                             "column, Holm-adjusted over the page's 'significance' "
                                                             "family; null when the pair is not tested or not "
                                                             "computed yet"},
        "paired_test_note": {"type": "string", "description": "Where that test's p (before adjustment) and the "
                                                              "bootstrap interval of the difference disagree at 0.05: "
                                                              "that the permutation test decided, in words; else "
                                                              "empty"}}),
    "Leaderboard": _obj({
        "track": STR, "split": STR, "primary_metric": STR, "metrics": {"type": "array", "items": STR},
        "groups": {"type": "array", "items": STR}, "sort": STR, "order": {"type": "string", "enum": ["asc", "desc"]},
        "scorer_version": STR, "page": INT, "pages": INT, "count": INT, "results_embargoed": BOOL, **PHASE,
        "scores_of": {"type": "string", "enum": ["all", "public", "private"],
                      "description": "The units the rows' scores cover"},
        "significance": nullable(SIGNIFICANCE),
        "rows": {"type": "array", "items": ref("LeaderboardRow"), "description": "The ranked rows of the page"},
        "references": {"type": "array", "items": ref("LeaderboardRow"),
                       "description": "Every reference row the filters keep (rank null), not paged"}}),
    "Compare": _obj({"track": STR, "split": STR, "columns": {"type": "array", "items": STR}, "metric": STR,
                     "entries": {"type": "array", "items": _obj({"entry_id": INT, "method": STR,
                                                                 "reported_in_paper": BOOL, "scores": SCORES,
                                                                 "intervals": INTERVALS})},
                     "tests": {"type": "array", "items": PAIRED_TEST}, "significance": SIGNIFICANCE,
                     "notice": {"type": "string", "description": "Why some pairs were not asked for (the "
                                                                 "hourly bound of a signed-in user); empty "
                                                                 "otherwise"}}),
    "Progress": _obj({"track": STR, "split": STR, "metric": STR,
                      "points": {"type": "array", "items": _obj({"date": DATE, "best": NUM, "method": STR}),
                                 "description": "Over the ranked rows; references never set a record"},
                      "references": {"type": "array", "items": _obj({"method": STR, "value": NUM}),
                                     "description": "Reference rows, drawn as lines"}}),
    "PublicMethod": _obj({
        "id": INT, "name": STR, "team": {**nullable(STR), "description": "null while anonymous"},
        "anonymous": BOOL, "description": STR,
        "paper_url": STR, "code_url": STR, "authors": {"type": "string", "description": "'' while anonymous, as "
                                                                                        "paper_url and code_url"},
        "uses_extra_data": nullable(BOOL), "url": STR,
        "results": {"type": "array", "items": _obj({"track": STR, "split": STR, "scores": SCORES,
                                                     "intervals": INTERVALS, "scorer_version": STR,
                                                     "verified": BOOL, "protocol": STR})}}),
    "Method": _obj({
        "id": INT, "name": STR, "team": {"type": "string", "description": "Team slug"}, "description": STR,
        "authors": STR, "paper_url": STR, "code_url": STR, "uses_extra_data": nullable(BOOL), "details": STR,
        "anonymous": {"type": "boolean", "description": "Public as 'Anonymous (under review)'"},
        "revealed_at": nullable(DATE), "missing_for_publishing": {"type": "array", "items": STR}}),
    "PublishOptions": _obj({"anonymous": {"type": "boolean", "description": "Publish as 'Anonymous (under "
                                                                            "review)' (default false)"}}, []),
    "MethodList": _obj({"methods": {"type": "array", "items": ref("Method")}}),
    "MethodChange": _obj({"name": STR, "description": STR, "authors": STR, "paper_url": STR, "code_url": STR,
                          "uses_extra_data": BOOL, "details": STR}, [], description="Only the fields to change"),
    "Track": _obj({
        "track": STR, "title": STR, "primary_metric": STR, "metrics": {"type": "array", "items": STR},
        "groups": {"type": "array", "items": STR}, "scorer_version": STR,
        "upload_suffixes": {"type": "array", "items": STR}, "max_upload_bytes": INT,
        "protocols": {"type": "array", "description": "How rows' numbers were produced, this service's first; "
                                                      "empty when there is only one",
                      "items": _obj({"key": STR, "label": STR, "description": STR})},
        "splits": {"type": "array", "items": _obj({"name": STR, "default": BOOL, **PHASE})}}),
    "TrackList": _obj({"tracks": {"type": "array", "items": ref("Track")}}),
    "Manifest": _obj({
        "track": STR, "split": STR,
        "labels_sha256": {"type": "string", "description": "The active labels' version: a result scored against "
                                                           "them carries the same checksum"},
        "upload_suffixes": {"type": "array", "items": STR, "description": "The file endings the split accepts"},
        "max_upload_bytes": {"type": "integer", "description": "The largest file the split accepts (the track's "
                                                               "limit, or less by the site's settings)"},
        "manifest": {"oneOf": [ref(name) for name in TRACK_MANIFESTS],
                     "description": "The track's public facts (ids and counts, never labels): what `lb validate` "
                                    "checks a file against offline"}},
        description="What lb validate checks a file against, offline"),
    **TRACK_MANIFESTS,
    "Quota": _obj({"track": STR, "split": STR, "team": STR, **QUOTA,
                   "user": _obj(QUOTA, description="Your own limits on the split, over all your teams")},
                  description="Limits of the team and of you on a split, what is used, and when the next is allowed"),
    "Me": _obj({"username": STR, "email": STR, "teams": {"type": "array", "items": _obj(
        {"slug": STR, "name": STR, "personal": BOOL, "role": STR})}}),
    "Upload": _obj({
        "id": {"type": "integer", "description": "The submission's id"},
        "status": {"type": "string", "enum": ["open", "completed", "aborted"]},
        "backend": {"type": "string", "enum": ["local", "s3"]}, "size": INT, "part_size": INT, "part_count": INT,
        "expires_at": DATE, "submission": ref("Submission"),
        "parts": {"type": "array", "items": _obj({"part_number": INT, "size": INT, "etag": STR})}},
        ["id", "status", "backend", "size", "part_size", "part_count", "expires_at", "submission"]),
    "UploadStart": _obj({"track": STR, "split": STR, "method_name": STR, "file_name": STR,
                         "size": {"type": "integer", "description": "Bytes"}, "team": STR},
                        ["track", "split", "method_name", "file_name", "size"]),
    "UploadSettings": _obj({"backend": STR, "direct_max_bytes": INT, "part_size": INT, "url_expiry": INT,
                            "expiry_hours": INT}),
    "PartNumbers": _obj({"parts": {"type": "array", "items": {"type": "integer", "minimum": 1}}}),
    "PartUrls": _obj({"urls": {"type": "object", "additionalProperties": STR,
                               "description": "PUT URL by part number"}, "expires_in": INT}),
    "Part": _obj({"part_number": INT, "size": INT, "etag": STR}),
}

# The body of each operation's success answer.
OK: dict[tuple[str, str], str] = {
    ("/api/v1/tracks", "get"): "TrackList",
    ("/api/v1/tracks/{track}/{split}/manifest", "get"): "Manifest",
    ("/api/v1/leaderboards/{track}", "get"): "Leaderboard",
    ("/api/v1/leaderboards/{track}/compare", "get"): "Compare",
    ("/api/v1/leaderboards/{track}/progress", "get"): "Progress",
    ("/api/v1/methods/{id}", "get"): "PublicMethod",
    ("/api/v1/submissions", "get"): "SubmissionList",
    ("/api/v1/submissions", "post"): "Submission",
    ("/api/v1/submissions/{id}", "get"): "Submission",
    ("/api/v1/submissions/{id}/publish", "post"): "Submission",
    ("/api/v1/me", "get"): "Me",
    ("/api/v1/quota", "get"): "Quota",
    ("/api/v1/uploads", "get"): "UploadSettings",
    ("/api/v1/uploads", "post"): "Upload",
    ("/api/v1/uploads/{id}", "get"): "Upload",
    ("/api/v1/uploads/{id}", "delete"): "Upload",
    ("/api/v1/uploads/{id}/urls", "post"): "PartUrls",
    ("/api/v1/uploads/{id}/parts/{number}", "put"): "Part",
    ("/api/v1/uploads/{id}/complete", "post"): "Submission",
    ("/api/v1/my/methods", "get"): "MethodList",
    ("/api/v1/my/methods/{id}", "get"): "Method",
    ("/api/v1/my/methods/{id}", "patch"): "Method",
    ("/api/v1/my/methods/{id}/reveal", "post"): "Method",
}
# JSON request bodies.
REQUESTS: dict[tuple[str, str], str] = {
    ("/api/v1/uploads", "post"): "UploadStart",
    ("/api/v1/uploads/{id}/urls", "post"): "PartNumbers",
    ("/api/v1/my/methods/{id}", "patch"): "MethodChange",
}


def attach(paths: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """``paths`` with each success answer and JSON request body pointing at its schema."""
    out: dict[str, dict[str, Any]] = {}
    for path, methods in paths.items():
        out[path] = {}
        for method, op in methods.items():
            op = {**op, "responses": dict(op["responses"])}
            name = OK.get((path, method))
            for status, response in op["responses"].items():
                if name and int(status) < 400:
                    op["responses"][status] = {**response, "content": {"application/json": {"schema": ref(name)}}}
            if (path, method) in REQUESTS:
                op["requestBody"] = {"required": True, "content": {"application/json": {
                    "schema": ref(REQUESTS[(path, method)])}}}
            op["operationId"] = op.get("operationId") or _operation_id(path, method)
            out[path][method] = op
    return out


def _operation_id(path: str, method: str) -> str:
    words = [w.strip("{}") for w in path.removeprefix("/api/v1/").split("/") if w]
    return method + "".join(w.replace("-", "_").title().replace("_", "") for w in words)
