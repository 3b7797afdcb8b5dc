"""The API description covers every API route and is valid enough to use."""

from __future__ import annotations

import re

import pytest
from django.urls import URLPattern, URLResolver, get_resolver

from leaderboard.openapi import PATHS
from tests.leaderboard.test_format_page import label_folders, splits  # noqa: F401 -- fixtures: labels of each track


def api_routes() -> set[str]:
    routes: set[str] = set()

    def walk(patterns, prefix: str) -> None:
        for p in patterns:
            if isinstance(p, URLResolver):
                walk(p.url_patterns, prefix + str(p.pattern))
            elif isinstance(p, URLPattern):
                routes.add(prefix + str(p.pattern))

    walk(get_resolver().url_patterns, "/")
    return {re.sub(r"<(?:\w+:)?(\w+)>", r"{\1}", r).replace("{pk}", "{id}") for r in routes
            if r.startswith("/api/v1/") and not r.endswith("openapi.json")}


def test_every_api_route_is_described():
    assert api_routes() - set(PATHS) == set()
    assert set(PATHS) - api_routes() == set()


def test_the_schema_is_served_and_the_docs_page_lists_it(client, db):
    body = client.get("/api/v1/openapi.json").json()
    assert body["openapi"].startswith("3.1") and "/api/v1/leaderboards/{track}" in body["paths"]
    for path, methods in body["paths"].items():
        for method, op in methods.items():
            named = set(re.findall(r"{(\w+)}", path))
            declared = {p["name"] for p in op.get("parameters", []) if p["in"] == "path"}
            assert named == declared, (path, method)
    page = client.get("/api/").content.decode()
    assert "/api/v1/submissions/{id}/publish" in page


def test_every_operation_lists_its_error_responses_with_the_error_schema(client, db):
    body = client.get("/api/v1/openapi.json").json()
    error = body["components"]["schemas"]["Error"]
    assert error["properties"]["error"]["required"] == ["code", "message"]
    codes = set(error["properties"]["error"]["properties"]["code"]["enum"])
    assert {"not_found", "forbidden", "method_not_allowed", "invalid_request", "invalid_file", "unauthorized",
            "conflict", "quota_exceeded", "too_large", "server_error"} <= codes
    for path, methods in body["paths"].items():
        for method, op in methods.items():
            errors = {s: r for s, r in op["responses"].items() if int(s) >= 400}
            where = f"{method.upper()} {path}"
            assert "500" in errors, where
            if op.get("security"):
                assert "401" in errors, where
            if "{id}" in path and not path.endswith("/parts/{number}"):
                assert "404" in errors, where
            for status, response in errors.items():
                schema = response["content"]["application/json"]["schema"]
                assert schema == {"$ref": "#/components/schemas/Error"}, (where, status)


def test_every_success_answer_names_its_body_schema(client, db):
    body = client.get("/api/v1/openapi.json").json()
    for path, methods in body["paths"].items():
        for method, op in methods.items():
            for status, response in op["responses"].items():
                if int(status) < 400:
                    schema = response.get("content", {}).get("application/json", {}).get("schema")
                    assert schema and schema["$ref"].split("/")[-1] in body["components"]["schemas"], \
                        (method.upper(), path, status)


@pytest.mark.parametrize("track", ["sqa3d", "mmscan-vg", "openscan"])
def test_the_manifest_answer_of_each_track_is_what_its_schema_says(client, splits, track):  # noqa: F811
    import jsonschema
    from openapi_spec_validator import validate

    doc = client.get("/api/v1/openapi.json").json()
    validate(doc)
    operation = doc["paths"]["/api/v1/tracks/{track}/{split}/manifest"]["get"]
    schema = operation["responses"]["200"]["content"]["application/json"]["schema"]
    answer = client.get(f"/api/v1/tracks/{track}/{splits[track].name}/manifest")
    assert answer.status_code == 200
    body = answer.json()
    jsonschema.validate(body, {**schema, "components": doc["components"]})
    # The schema tells the tracks apart: another track's manifest does not pass as this one's.
    other = {"sqa3d": "MmscanVgManifest", "mmscan-vg": "OpenscanManifest", "openscan": "Sqa3dManifest"}[track]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(body["manifest"], {"$ref": f"#/components/schemas/{other}",
                                               "components": doc["components"]})
