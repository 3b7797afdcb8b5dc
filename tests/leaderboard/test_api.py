"""The REST API: tokens, submissions, leaderboards, and who may see what."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.management import call_command
from django.utils import timezone

from leaderboard.accounts.models import ApiToken
from leaderboard.accounts.services import do_create_token, do_revoke_token


def auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Token {key}"}


def post_submission(client, headers, path, method="ApiNet", **extra):
    with open(path, "rb") as f:
        data = {"track": "sqa3d", "split": "test", "method_name": method, "file": f, **extra}
        return client.post("/api/v1/submissions", data, headers=headers)


def test_issue_token_prints_a_key_that_is_stored_only_as_a_hash(db, capsys):
    call_command("issue_token", "newbie", "--create-user", "--name", "laptop")
    key = capsys.readouterr().out.strip()
    token = ApiToken.objects.get(user__username="newbie")
    assert key.startswith(f"lb_{token.prefix}_") and token.name == "laptop"
    assert key not in token.key_hash and len(token.key_hash) == 64


def test_a_user_may_hold_several_tokens(owner, client, sqa3d_split):
    keys = [do_create_token(owner, name=n) for n in ("a", "b")]
    for key in keys:
        assert client.get("/api/v1/submissions", headers=auth(key)).status_code == 200


@pytest.mark.parametrize("mangle, reason", [
    (lambda owner, key: (do_revoke_token(ApiToken.objects.get(user=owner)), key)[1], "revoked"),
    (lambda owner, key: (ApiToken.objects.filter(user=owner).update(
        expires_at=timezone.now() - timedelta(seconds=1)), key)[1], "expired"),
    (lambda owner, key: key[:-3] + "xyz", "Invalid"),
    (lambda owner, key: "garbage", "Malformed"),
])
def test_a_bad_token_gets_a_401_that_says_why(owner, client, mangle, reason):
    key = mangle(owner, do_create_token(owner))
    response = client.get("/api/v1/submissions", headers=auth(key))
    assert response.status_code == 401 and reason in response.json()["error"]["message"]


def test_it_requires_authentication_to_submit(client, sqa3d_split, sqa3d_files):
    response = post_submission(client, {}, sqa3d_files["predictions"])
    assert response.status_code == 401


def test_it_creates_a_submission_and_reports_its_status(owner, client, sqa3d_split, sqa3d_files, sent_tasks,
                                                       django_capture_on_commit_callbacks):
    headers = auth(do_create_token(owner))
    with django_capture_on_commit_callbacks(execute=True):
        response = post_submission(client, headers, sqa3d_files["predictions"])
    assert response.status_code == 201
    body = response.json()
    assert body["status"] == "queued" and body["track"] == "sqa3d" and body["method"] == "ApiNet"
    assert len(sent_tasks) == 1
    detail = client.get(f"/api/v1/submissions/{body['id']}", headers=headers).json()
    assert detail["id"] == body["id"] and detail["result"] is None and detail["progress"] == 0.0


def test_it_answers_400_with_the_reason_for_a_bad_file(owner, client, sqa3d_split, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"not": "a list"')
    response = post_submission(client, auth(do_create_token(owner)), bad)
    assert response.status_code == 400
    assert response.json()["status"] == "failed" and "bad.json" in response.json()["error"]["message"]


def test_it_names_missing_fields(owner, client, sqa3d_split):
    response = client.post("/api/v1/submissions", {"track": "sqa3d"}, headers=auth(do_create_token(owner)))
    assert response.status_code == 400
    assert response.json()["error"]["message"] == "Missing multipart field(s): split, method_name, file."


def test_it_rejects_an_unknown_track(owner, client, sqa3d_split, sqa3d_files):
    response = post_submission(client, auth(do_create_token(owner)), sqa3d_files["predictions"], track="nope")
    assert response.status_code == 400
    assert response.json()["error"]["message"] == ("Unknown track/split nope/test. "
                                                   "No active benchmark of track 'nope' takes submissions.")


def test_session_posts_to_the_api_need_csrf(owner, sqa3d_split, sqa3d_files):
    from django.test import Client

    client = Client(enforce_csrf_checks=True)
    client.force_login(owner)
    assert post_submission(client, {}, sqa3d_files["predictions"]).status_code == 403


@pytest.mark.parametrize("who, status", [("owner", 200), ("member", 200), ("outsider", 404),
                                         ("maintainer", 200), ("anonymous", 401)])
def test_only_the_team_and_maintainers_see_a_submission(request, who, status, owner, member, client,
                                                        sqa3d_split, sqa3d_files, sent_tasks):
    created = post_submission(client, auth(do_create_token(owner)), sqa3d_files["predictions"]).json()
    headers = {} if who == "anonymous" else auth(do_create_token(request.getfixturevalue(who)))
    assert client.get(f"/api/v1/submissions/{created['id']}", headers=headers).status_code == status


def test_the_leaderboard_is_public_and_ranked(client, sqa3d_split):
    from leaderboard.benchmarks.bundle_apply import load_bundled_paper_rows

    load_bundled_paper_rows("sqa3d")
    # The paper's 706-way classification is not this service's protocol: ranked together only when asked.
    assert client.get("/api/v1/leaderboards/sqa3d?split=test").json()["rows"] == []
    body = client.get("/api/v1/leaderboards/sqa3d?split=test&protocol=all").json()
    assert body["primary_metric"] == "EM" and body["groups"] == ["What", "Is", "How", "Can", "Which", "Others"]
    ems = [row["scores"]["EM"] for row in body["rows"]]
    assert ems == sorted(ems, reverse=True) and len(ems) == 10
    assert body["rows"][0]["method"] == "ScanQA + aux. task" and body["rows"][0]["reported_in_paper"]
    # Human performance is a reference, not a contestant (issue 27): apart, unranked.
    [human] = body["references"]
    assert (human["method"], human["rank"], human["reference"]) == ("Human (amateur)", None, True)
    assert human["scores"]["What/EM"] == pytest.approx(0.8853)


def test_an_unknown_leaderboard_is_404(client, db):
    assert client.get("/api/v1/leaderboards/nope").status_code == 404


def test_a_one_request_upload_above_the_direct_limit_is_refused_before_it_is_read(owner, client, sqa3d_split,
                                                                                   settings):
    settings.UPLOAD_DIRECT_MAX_BYTES = 10
    body = b"x" * (2 << 20)
    response = client.generic("POST", "/api/v1/submissions", body, content_type="multipart/form-data; boundary=b",
                              headers=auth(do_create_token(owner)))
    assert response.status_code == 413
    assert "larger files go in parts" in response.json()["error"]["message"]
    client.force_login(owner)
    page = client.generic("POST", "/submissions/new/sqa3d/", body, content_type="multipart/form-data; boundary=b")
    assert page.status_code == 413 and b"in parts" in page.content
