"""Every error under /api/ is {"error": {"code", "message"}} with its HTTP status, Django's own too."""

from __future__ import annotations

import pytest

from leaderboard.accounts.services import do_create_token


def error_of(response, status: int, code: str) -> str:
    assert response.status_code == status, response.content[:500]
    assert response["Content-Type"].startswith("application/json"), response.content[:200]
    body = response.json()
    assert set(body["error"]) >= {"code", "message"} and body["error"]["code"] == code, body
    assert isinstance(body["error"]["message"], str) and body["error"]["message"]
    return str(body["error"]["message"])


@pytest.mark.parametrize("debug", [False, True])
def test_django_404s_under_the_api_are_json(client, db, settings, debug):
    settings.DEBUG = debug
    assert "/api/v1/nope" in error_of(client.get("/api/v1/nope"), 404, "not_found")
    assert error_of(client.get("/api/v1/leaderboards/nope"), 404, "not_found")  # Http404 in a view
    assert error_of(client.get("/api/v1/methods/987654"), 404, "not_found")  # get_object_or_404
    assert error_of(client.get("/api/nope"), 404, "not_found")
    assert client.get("/benchmarks/nope/")["Content-Type"].startswith("text/html"), "pages keep HTML"


@pytest.mark.parametrize("debug", [False, True])
def test_a_crash_under_the_api_is_a_json_500_without_traceback_or_token(client, owner, settings, monkeypatch,
                                                                        debug):
    from leaderboard.accounts import views

    settings.DEBUG = debug

    def crash(user):
        raise RuntimeError("database on fire at /srv/secret/path")

    monkeypatch.setattr(views, "personal_team", crash)
    key = do_create_token(owner)
    response = client.get("/api/v1/me", headers={"Authorization": f"Token {key}"})
    message = error_of(response, 500, "server_error")
    text = response.content.decode()
    assert "GET /api/v1/me" in message
    assert "Traceback" not in text and "on fire" not in text and key not in text and "SECRET" not in text


def test_the_api_names_each_refusal(client, owner, outsider, sqa3d_split, settings):
    key = do_create_token(owner)
    headers = {"Authorization": f"Token {key}"}
    assert "Authentication required" in error_of(client.get("/api/v1/me"), 401, "unauthorized")
    error_of(client.get("/api/v1/me", headers={"Authorization": "Token nope"}), 401, "unauthorized")
    assert "split, method_name, file" in error_of(
        client.post("/api/v1/submissions", {"track": "sqa3d"}, headers=headers), 400, "invalid_request")
    assert "Expected GET or POST" in error_of(client.delete("/api/v1/submissions", headers=headers),
                                              405, "method_not_allowed")
    assert "metric" in error_of(client.get("/api/v1/leaderboards/sqa3d?metric=nope"), 400, "invalid_request")
    error_of(client.put("/api/v1/uploads/1/parts/1?signature=x", b"x"), 403, "forbidden")
    settings.QUOTA_IN_FLIGHT = 0
    body = {"track": "sqa3d", "split": "test", "method_name": "M", "file_name": "p.json", "size": 10}
    assert "Quota reached" in error_of(client.post("/api/v1/uploads", body, content_type="application/json",
                                                   headers=headers), 429, "quota_exceeded")


def test_a_refused_file_keeps_the_submission_next_to_the_error(client, owner, sqa3d_split, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"not": "a list"')
    with open(bad, "rb") as f:
        response = client.post("/api/v1/submissions", {"track": "sqa3d", "split": "test", "method_name": "M",
                                                       "file": f},
                               headers={"Authorization": f"Token {do_create_token(owner)}"})
    assert "bad.json" in error_of(response, 400, "invalid_file")
    body = response.json()
    assert body["status"] == "failed" and body["error"]["kind"] == "invalid_input" and body["id"]


def test_a_one_request_upload_too_large_is_413_too_large(client, owner, sqa3d_split, settings):
    settings.UPLOAD_DIRECT_MAX_BYTES = 10
    response = client.generic("POST", "/api/v1/submissions", b"x" * (2 << 20),
                              content_type="multipart/form-data; boundary=b",
                              headers={"Authorization": f"Token {do_create_token(owner)}"})
    assert "in parts" in error_of(response, 413, "too_large")
