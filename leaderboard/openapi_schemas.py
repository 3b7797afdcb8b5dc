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
          "description": "Flat scores, each as its metric's spec says (metric_specs: a fraction in [0, 1], or a "
                         "value in its unit): '<metric>' overall, '<group>/<metric>' per group (and "
                         "'<group>/count'); null where undefined"}
METRIC_SPECS = {"type": "object", "description": "Each metric's spec: which way is better, what its values are, "
                                                 "the decimals pages show",
                "additionalProperties": _obj({
                    "direction": {"type": "string", "enum": ["higher", "lower"],
                                  "description": "Which values are better: ranks and 'best' follow it"},
                    "kind": {"type": "string", "enum": ["fraction", "value"],
                             "description": "fraction: in [0, 1], shown as a percentage; value: shown in its unit"},
                    "unit": {"type": "string", "description": "A value's unit ('cm'); '' for a fraction"},
                    "low": nullable(NUM), "high": nullable(NUM),
                    "precision": {"type": "integer", "description": "Decimals shown (of the percentage, for a "
                                                                    "fraction); the benchmark's bundle may set them"}})}

PHASE = {
    "phase": {"type": "string", "enum": ["upcoming", "open", "frozen", "closed", "revealed", "after"],
              "description": "The split's challenge phase (open for ever without a schedule); closed: past the "
                             "deadline, waiting for the maintainers' reveal; after: its challenge ended and was "
                             "archived, and the board goes on (open again, rows sent since marked)"},
    "board": {"type": "string", "enum": ["live", "hidden"],
              "description": "hidden: a challenge phase whose board shows new rows only at its deadline"},
    "max_published_per_team": {**nullable(INT), "description": "How many rows a team may have published here "
                                                               "(a challenge phase's rule); null: any"},
    "post_challenge_from": {**nullable(DATE), "description": "When its challenge ended (and was archived)"},
    "challenge": nullable(_obj({"name": STR, "title": STR, "phase": STR, "phase_title": STR},
                               description="The challenge this split is a phase of")),
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
FIELD_ANSWERS = {"type": "object", "additionalProperties": {"type": ["string", "number", "boolean"]},
                 "description": "Answers to the benchmark's method fields, by field name"}
METHOD_FIELD = _obj({"name": STR, "label": STR,
                     "type": {"type": "string", "enum": ["choice", "text", "number", "url", "bool"]},
                     "choices": {"type": "array", "items": STR}, "required": BOOL,
                     "column": {"type": "boolean", "description": "A column of the board"},
                     "filter": {"type": "boolean", "description": "A filter of the board: field.<name>=<value>"},
                     "help": STR}, description="A fact every method is asked on a benchmark")
QUOTA_USE = _obj({"used": INT, "limit": INT})
QUOTA = {"per_day": QUOTA_USE, "total": QUOTA_USE, "in_flight": QUOTA_USE, "rejected_per_day": QUOTA_USE,
         "min_interval": _obj({"seconds": INT, "next_at": nullable(DATE)}), "resets_at": DATE}
INTERVALS = {"type": "object",
             "additionalProperties": {"type": "array", "items": NUM, "minItems": 2, "maxItems": 2},
             "description": "95 % bootstrap percentile intervals [lo, hi] of the scores, keyed like them; a key "
                            "is absent where there is none (paper rows have none)"}
PAIRED_TEST = _obj({
    "a": INT, "b": INT, "metric": STR,
    "status": {"type": "string", "enum": ["done", "pending", "recomputing", "not_requested", "unavailable"],
               "description": "pending: a scoring worker computes it; recomputing: one of the two results changed "
                              "since it was computed (a re-score, new labels, late intervals), so its earlier answer "
                              "is not given and a worker computes it again; not_requested: nobody asked yet (a "
                              "signed-in request asks, within PAIRED_TESTS_PER_USER_HOUR; 'notice' says when it may "
                              "not)"},
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
STATE = {"type": "string", "enum": ["current", "awaiting_rescore", "rescore_failed"],
         "description": "current: scored on the split's current labels; awaiting_rescore: its scores are from the "
                        "split's earlier labels and a re-score on the current ones is due; rescore_failed: that "
                        "re-score failed. A row that is not current is listed apart (never ranked or tested)"}
SIGNIFICANCE = _obj({
    "adjustment": {"type": "string", "enum": ["holm"]},
    "key": {"type": "string", "description": "The score key tested: the sorted column, or the compared metric"},
    "over": {"type": "string", "description": "The tests adjusted together, in words"},
    "pairs": {"type": "integer", "description": "How many tests the adjustment is over"},
    "not_computed": {"type": "integer", "description": "Of them, not answered yet (counted as p = 1)"},
    "level": NUM,
    "test": {"type": "string", "description": "The test whose p-values these are (paired-permutation-by-scene)"}},
    description="How the p-values shown together were adjusted for multiplicity")

LABELS = _obj({
    "loaded": {"type": "boolean", "description": "Labels are loaded on the split (the rest is null until then)"},
    "synthetic": {"type": "boolean", "description": "The labels are synthetic (a demo's) or a subset standing in "
                                                   "for the real split: the scored rows' numbers say nothing of "
                                                   "the real split, and paper rows are not ranked with them"},
    "unit": {"type": "string", "description": "What one unit is (question, prompt, scene, description)"},
    "units": {**nullable(INT), "description": "How many units the loaded labels hold (not the real split's count)"},
    "scenes": {**nullable(INT), "description": "How many scenes they are in"},
    "checksum": {**nullable(STR), "description": "The loaded labels' sha256: a result scored on them carries it"}},
    description="What the split's numbers are scored on: the labels loaded now")
METHOD_PAPER = nullable(_obj({
    "authors": {"type": "string", "description": "As cited: 'Chen et al.'"}, "title": STR, "venue": STR,
    "year": INT, "url": STR,
    "none": {"type": "string", "description": "Instead of the rest: why the method has no paper of its own"}}, [],
    description="Paper rows: the method's own paper (not the source of the numbers: paper_url, venue, note); "
                "null for a scored row, or where the benchmark gives none"))


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
        "listed_apart": {"type": "boolean", "description": "A paper row listed under 'apart', not ranked (rank "
                                                           "null): another protocol than this service's, or any "
                                                           "paper row on a split with synthetic labels"},
        "note": {"type": "string", "description": "Paper rows: where the numbers were copied from (paper, table)"},
        "paper_url": {"type": "string", "description": "Paper rows: the publication the numbers come from"},
        "venue": {"type": "string", "description": "Paper rows: where that publication appeared"},
        "method_paper": METHOD_PAPER,
        "protocol": {"type": "string", "description": "The track's scoring protocol that produced "
                                                      "the row (GET /api/v1/tracks lists them)"},
        "uses_extra_data": BOOL, "verified": BOOL, "scorer_version": STR, "submission_id": nullable(INT),
        "published_at": {"type": "string", "format": "date-time",
                         "description": "Published here; for a paper row, the paper's publication date"},
        "fields": FIELD_ANSWERS, "after_challenge": {
            "type": "boolean", "description": "Sent after the end of the challenge this split was a phase of: "
                                              "not on its archived final board"},
        "state": STATE, "scores": SCORES, "intervals": INTERVALS,
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
        "metric_specs": METRIC_SPECS, "groups": {"type": "array", "items": STR}, "sort": STR, "order": {"type": "string", "enum": ["asc", "desc"]},
        "method_fields": {"type": "array", "items": METHOD_FIELD, "description": "What every method is asked here"},
        "scorer_version": STR, "page": INT, "pages": INT, "count": INT, "results_embargoed": BOOL, **PHASE,
        "scores_of": {"type": "string", "enum": ["all", "public", "private"],
                      "description": "The units the rows' scores cover"},
        "labels": LABELS,
        "protocol": {**nullable(STR), "description": "The protocol parameter: null (this service's protocol "
                                                     "ranked, the others' paper rows under 'apart'), 'all' (every "
                                                     "protocol ranked together) or one protocol's key"},
        "apart_reason": {**nullable({"type": "string", "enum": ["other_protocols", "synthetic_labels"]}),
                         "description": "Why paper rows are under 'apart'; null when none is"},
        "significance": nullable(SIGNIFICANCE),
        "rows": {"type": "array", "items": ref("LeaderboardRow"), "description": "The ranked rows of the page"},
        "apart": {"type": "array", "items": ref("LeaderboardRow"),
                  "description": "Every paper row the filters keep that is not ranked with the rows (rank null): "
                                 "see apart_reason; not paged"},
        "references": {"type": "array", "items": ref("LeaderboardRow"),
                       "description": "Every reference row the filters keep (rank null), not paged"},
        "not_current": {"type": "array", "items": ref("LeaderboardRow"),
                        "description": "Every row the filters keep whose scores are from the split's earlier "
                                       "labels (state awaiting_rescore or rescore_failed; rank null), not paged"}}),
    "Compare": _obj({"track": STR, "split": STR, "columns": {"type": "array", "items": STR}, "metric": STR,
                     "labels": LABELS,
                     "entries": {"type": "array", "items": _obj({
                         "entry_id": INT, "method": STR, "reported_in_paper": BOOL, "reference": BOOL,
                         "protocol": STR,
                         "other_protocol": {"type": "boolean", "description": "Produced under another protocol "
                                                                              "than this service's"},
                         "state": STATE, "scores": SCORES, "intervals": INTERVALS})},
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
        "results": {"type": "array", "items": _obj({"track": STR, "split": STR, "labels": LABELS, "scores": SCORES,
                                                     "intervals": INTERVALS, "scorer_version": STR,
                                                     "verified": BOOL, "protocol": STR,
                                                     "fields": FIELD_ANSWERS, "state": STATE})}}),
    "Method": _obj({
        "id": INT, "name": STR, "team": {"type": "string", "description": "Team slug"}, "description": STR,
        "authors": STR, "paper_url": STR, "code_url": STR, "uses_extra_data": nullable(BOOL), "details": STR,
        "anonymous": {"type": "boolean", "description": "Public as 'Anonymous (under review)'"},
        "revealed_at": nullable(DATE),
        "fields": {"type": "object", "additionalProperties": FIELD_ANSWERS,
                   "description": "Its answers to each benchmark's method fields, by track"},
        "declared_fields": {"type": "object", "additionalProperties": {"type": "array", "items": METHOD_FIELD},
                            "description": "The method fields of each benchmark it entered that declares some"},
        "missing_for_publishing": {"type": "array", "items": STR,
                                   "description": "Its details, then each benchmark's required fields, unanswered"}}),
    "PublishOptions": _obj({"anonymous": {"type": "boolean", "description": "Publish as 'Anonymous (under "
                                                                            "review)' (default false)"}}, []),
    "MethodList": _obj({"methods": {"type": "array", "items": ref("Method")}}),
    "MethodChange": _obj({"name": STR, "description": STR, "authors": STR, "paper_url": STR, "code_url": STR,
                          "uses_extra_data": BOOL, "details": STR,
                          "fields": {"type": "object", "additionalProperties": FIELD_ANSWERS,
                                     "description": "Answers to change by track ({\"mmscan-vg\": {\"input\": "
                                                    "\"points\"}}); null clears one"}},
                         [], description="Only the fields to change"),
    "Track": _obj({
        "track": STR, "title": STR, "primary_metric": STR, "metrics": {"type": "array", "items": STR},
        "metric_specs": METRIC_SPECS, "groups": {"type": "array", "items": STR}, "scorer_version": STR,
        "upload_suffixes": {"type": "array", "items": STR}, "max_upload_bytes": INT,
        "protocols": {"type": "array", "description": "How rows' numbers were produced, this service's first; "
                                                      "empty when there is only one",
                      "items": _obj({"key": STR, "label": STR, "description": STR})},
        "splits": {"type": "array", "items": _obj({"name": STR, "default": BOOL, "labels": LABELS, **PHASE})},
        "challenges": {"type": "array", "items": ref("Challenge")},
        "method_fields": {"type": "array", "items": METHOD_FIELD},
        "pages": {"type": "array", "items": _obj({"key": STR, "title": STR, "url": STR}),
                  "description": "The pages its hosts wrote, as tabs of the benchmark's page"}}),
    "TrackList": _obj({"tracks": {"type": "array", "items": ref("Track")}}),
    "Challenge": _obj({
        "name": STR, "title": STR, "description": STR,
        "state": {"type": "string", "enum": ["upcoming", "running", "ended", "archived"]},
        "current_phase": nullable(STR), "ends_at": nullable(DATE),
        "top": {"type": "integer", "description": "How many entries the final board marks"},
        "post_challenge": {"type": "boolean", "description": "Its splits go on after it, as post-challenge boards"},
        "phases": {"type": "array", "items": _obj({
            "name": STR, "title": STR, "split": STR, "state": {"type": "string", "enum": ["upcoming", "running",
                                                                                          "ended"]},
            "starts_at": nullable(DATE), "freeze_at": nullable(DATE), "deadline": nullable(DATE),
            "board": {"type": "string", "enum": ["live", "hidden"]},
            "reveal": {"type": "string", "enum": ["deadline", "maintainer"]},
            "max_published_per_team": nullable(INT), "split_phase": STR})},
        "archived_at": nullable(DATE),
        "url": STR, "export_csv": STR, "export_json": STR, "bibtex": STR},
        ["name", "title", "state", "phases", "archived_at"],
        description="A challenge: phases in order, each on its own split; archived once its last phase ended"),
    "ChallengeDetail": {"allOf": [ref("Challenge"), _obj({"final_board": nullable(_obj({
        "track": STR, "challenge": STR, "title": STR, "split": STR, "ended_at": DATE, "archived_at": DATE,
        "board": {"type": "object", "description": "The board's facts when archived: metric, sort, columns, "
                                                   "metric_specs, method_fields, scorer_version, phases"},
        "rows": {"type": "array", "items": {"type": "object"}, "description": "Ranked as they were; 'top': the "
                                                                              "place among the entries, or null"},
        "unranked": {"type": "array", "items": {"type": "object"},
                     "description": "References, paper rows listed apart, rows awaiting a re-score"}}))})]},
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
    "Me": _obj({"username": STR, "email": STR,
                "email_verified": {"type": "boolean", "description": "The address was verified (a link mailed to "
                                                                    "it was opened)"},
                "teams": {"type": "array", "items": _obj({"slug": STR, "name": STR, "personal": BOOL, "role": STR})}}),
    "Participation": _obj({
        "track": STR,
        "registration": {"type": "string", "enum": ["open", "approval", "invite"],
                         "description": "open: accepting the terms is enough; approval: the maintainers approve "
                                        "each participant; invite: invited users only"},
        "terms_version": {**nullable(STR), "description": "The sha256 of the current terms; null: no terms"},
        "terms_url": {**nullable(STR), "description": "The page that shows the terms (and accepts them)"},
        "terms_accepted": {"type": "boolean", "description": "You accepted the current version"},
        "accepted_version": {**nullable(STR), "description": "The version you accepted last, if any"},
        "accepted_at": nullable(DATE),
        "state": {"type": "string", "enum": ["approved", "pending", "not_requested", "denied", "not_invited"],
                  "description": "Your registration state (approved under open registration unless denied)"},
        "verified_email_required": BOOL,
        "email_domains": {"type": "array", "items": STR, "description": "Only verified addresses at these "
                                                                        "domains (or subdomains) may submit"},
        "email_verified": BOOL, "banned": BOOL,
        "may_submit": {"type": "boolean", "description": "An upload would pass these checks now (the split, its "
                                                         "phase and quotas aside)"},
        "refusal": nullable(_obj({"code": STR, "message": STR, "terms_url": STR, "terms_version": STR},
                                 ["code", "message"]))},
        description="The caller's part in a benchmark (its participation section)"),
    "ParticipationRequest": _obj({"accept_terms": {"type": "string", "description": "The version accepted "
                                                                                    "(terms_version)"},
                                  "join": {"type": "boolean", "description": "Ask to take part (a benchmark "
                                                                            "without terms, under approval)"}},
                                 [], description="One of accept_terms or join"),
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
    ("/api/v1/leaderboards/{track}/challenges/{name}", "get"): "ChallengeDetail",
    ("/api/v1/methods/{id}", "get"): "PublicMethod",
    ("/api/v1/submissions", "get"): "SubmissionList",
    ("/api/v1/submissions", "post"): "Submission",
    ("/api/v1/submissions/{id}", "get"): "Submission",
    ("/api/v1/submissions/{id}/publish", "post"): "Submission",
    ("/api/v1/me", "get"): "Me",
    ("/api/v1/benchmarks/{track}/participation", "get"): "Participation",
    ("/api/v1/benchmarks/{track}/participation", "post"): "Participation",
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
    ("/api/v1/benchmarks/{track}/participation", "post"): "ParticipationRequest",
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
