"""The API description covers every API route and is valid enough to use."""

from __future__ import annotations

import re

from django.urls import URLPattern, URLResolver, get_resolver

from leaderboard.openapi import PATHS


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
