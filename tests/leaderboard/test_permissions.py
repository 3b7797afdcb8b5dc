"""Who may do what: every route of the URLconf (the admin aside, which is Django's and staff-only)
for anonymous, owner, team member, outsider, staff and track maintainer.

A route without an entry in MATRIX fails ``test_every_route_has_a_matrix_entry``. The
roles that an entry does not allow run first, and a mutating entry's ``intact`` check
must hold after each of them. API answers are also checked against the OpenAPI
document: every error status seen must be listed for that operation.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import pytest
from django.core import signing
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import URLPattern, URLResolver, get_resolver

from leaderboard.accounts.models import ApiToken, Membership
from leaderboard.openapi import PATHS
from leaderboard.participation.models import Participant
from leaderboard.submissions import uploads
from leaderboard.submissions.models import Submission
from tests.leaderboard import permission_world
from tests.leaderboard.permission_world import ROLES, client_for, still_anonymous

fast_passwords = pytest.fixture(autouse=True)(permission_world.fast_passwords)
world = pytest.fixture(permission_world.world)


def routes() -> set[str]:
    found: set[str] = set()

    def walk(patterns: list[Any], prefix: str) -> None:
        for p in patterns:
            if isinstance(p, URLResolver):
                walk(p.url_patterns, prefix + str(p.pattern))
            elif isinstance(p, URLPattern):
                found.add(prefix + str(p.pattern))

    walk(get_resolver().url_patterns, "/")
    return {r for r in found if not r.startswith("/admin/")}


def who(default: int | None = None, **statuses: int) -> dict[str, int]:
    """Expected status per role: ``default`` for those not named."""
    table = {role: default for role in ROLES} | statuses
    assert set(table) == set(ROLES) and None not in table.values(), table
    return table  # type: ignore[return-value]


def public(status: int = 200) -> dict[str, int]:
    return who(status)


def signed_in(status: int = 200, anonymous: int = 302, **others: int) -> dict[str, int]:
    return who(status, anonymous=anonymous, **others)


def team_only(status: int = 200, anonymous: int = 302, refused: int = 404, **others: int) -> dict[str, int]:
    return who(refused, anonymous=anonymous, owner=status, member=status, **others)


def maintainers(status: int = 200) -> dict[str, int]:
    return who(403, staff=status, track_maintainer=status)


@dataclass
class Op:
    method: str
    url: Callable[[Any], str]
    expect: dict[str, int]
    data: Callable[[Any], Any] | None = None
    json: bool = False
    allowed: set[str] = field(default_factory=set)  # roles whose request may change the state
    intact: Callable[[Any], bool] | None = None


def _published(w: Any) -> bool:
    return Submission.objects.get(pk=w.finished.pk).is_published


MATRIX: dict[str, list[Op]] = {
    "/": [Op("get", lambda w: "/", public())],
    "/benchmarks/<slug:track>/": [Op("get", lambda w: "/benchmarks/sqa3d/", public())],
    "/benchmarks/<slug:track>/export.<str:fmt>": [Op("get", lambda w: "/benchmarks/sqa3d/export.csv", public()),
                                                  Op("get", lambda w: "/benchmarks/sqa3d/export.json", public())],
    "/metrics/": [Op("get", lambda w: "/metrics/", public())],
    "/schemas/benchmark-bundle.json": [Op("get", lambda w: "/schemas/benchmark-bundle.json", public())],
    "/benchmarks/<slug:track>/format/": [Op("get", lambda w: "/benchmarks/sqa3d/format/", public())],
    "/benchmarks/<slug:track>/format/sample/<str:form>": [
        Op("get", lambda w: "/benchmarks/sqa3d/format/sample/list", public())],
    "/benchmarks/<slug:track>/compare/": [Op("get", lambda w: f"/benchmarks/sqa3d/compare/?e={w.entry.pk}",
                                             public())],
    "/methods/<int:pk>/": [Op("get", lambda w: f"/methods/{w.published.method_id}/", public()),
                           # An anonymous method's page is public too; what it shows is test_anonymous_entries'.
                           Op("get", lambda w: f"/methods/{w.anonymous.method_id}/", public())],
    "/methods/<int:pk>/bibtex": [Op("get", lambda w: f"/methods/{w.published.method_id}/bibtex", public()),
                                 # Its authors and paper are nobody's to see until revealed, the team's included.
                                 Op("get", lambda w: f"/methods/{w.anonymous.method_id}/bibtex", public(404))],
    "/entries/<int:pk>/": [Op("get", lambda w: f"/entries/{w.paper_entry.pk}/", public())],
    "/entries/<int:pk>/bibtex": [Op("get", lambda w: f"/entries/{w.paper_entry.pk}/bibtex", public()),
                                 # A paper row's only: a scored row is cited by its method's BibTeX (or not at all).
                                 Op("get", lambda w: f"/entries/{w.entry.pk}/bibtex", public(404))],
    "/submissions/": [Op("get", lambda w: "/submissions/", signed_in())],
    "/submissions/new/<slug:track>/": [Op("get", lambda w: "/submissions/new/sqa3d/", signed_in())],
    "/submissions/methods/": [Op("get", lambda w: "/submissions/methods/", signed_in())],
    "/submissions/methods/<int:pk>/": [
        Op("get", lambda w: f"/submissions/methods/{w.finished.method_id}/", team_only()),
        Op("post", lambda w: f"/submissions/methods/{w.finished.method_id}/", team_only(302),
           data=lambda w: {"name": "PrivateNet", "description": "changed", "authors": "X",
                           "uses_extra_data": "false"},
           allowed={"owner", "member"}, intact=lambda w: type(w.finished.method).objects.get(
               pk=w.finished.method_id).description == "A test method.")],
    "/submissions/methods/<int:pk>/reveal/": [Op(
        "post", lambda w: f"/submissions/methods/{w.anonymous.method_id}/reveal/", team_only(302),
        allowed={"owner", "member"}, intact=still_anonymous)],
    "/submissions/<int:pk>/": [Op("get", lambda w: f"/submissions/{w.finished.pk}/", team_only(staff=200))],
    "/submissions/<int:pk>/status.json": [Op("get", lambda w: f"/submissions/{w.finished.pk}/status.json",
                                             team_only(staff=200))],
    "/submissions/<int:pk>/publish/": [Op("post", lambda w: f"/submissions/{w.finished.pk}/publish/",
                                          team_only(302, staff=403), allowed={"owner", "member"},
                                          intact=lambda w: not _published(w))],
    "/submissions/<int:pk>/cancel/": [Op("post", lambda w: f"/submissions/{w.queued.pk}/cancel/",
                                         team_only(302, staff=403), allowed={"owner", "member"},
                                         intact=lambda w: Submission.objects.get(pk=w.queued.pk).status == "queued")],
    "/accounts/signup/": [Op("get", lambda w: "/accounts/signup/", public())],
    "/accounts/email/": [Op("get", lambda w: "/accounts/email/", signed_in())],
    # The signed link is the authorisation; a damaged one says why (400) to whoever opens it.
    "/accounts/email/verify/<str:token>/": [Op("get", lambda w: "/accounts/email/verify/damaged/", public(400))],
    "/accounts/tokens/": [Op("get", lambda w: "/accounts/tokens/", signed_in()),
                          Op("post", lambda w: "/accounts/tokens/", signed_in(), data=lambda w: {"name": "m"})],
    "/accounts/tokens/<int:pk>/revoke/": [Op(
        "post", lambda w: f"/accounts/tokens/{w.owner_token.pk}/revoke/", who(404, anonymous=302, owner=302),
        allowed={"owner"}, intact=lambda w: ApiToken.objects.get(pk=w.owner_token.pk).revoked_at is None)],
    "/accounts/teams/": [Op("get", lambda w: "/accounts/teams/", signed_in()),
                         Op("post", lambda w: "/accounts/teams/", signed_in(302),
                            data=lambda w: {"name": f"team {w.counter()}"})],
    "/accounts/teams/<slug:slug>/": [Op("get", lambda w: f"/accounts/teams/{w.lab.slug}/", team_only())],
    "/submissions/teams/<slug:slug>/": [Op("get", lambda w: f"/submissions/teams/{w.lab.slug}/", team_only())],
    "/accounts/teams/<slug:slug>/members/<int:user_id>/remove/": [Op(
        "post", lambda w: f"/accounts/teams/{w.lab.slug}/members/{w.dave.pk}/remove/", team_only(302),
        allowed={"owner"}, intact=lambda w: Membership.objects.filter(team=w.lab, user=w.dave).exists())],
    "/accounts/login/": [Op("get", lambda w: "/accounts/login/", public())],
    "/accounts/logout/": [Op("post", lambda w: "/accounts/logout/", public(302))],
    "/accounts/password_change/": [Op("get", lambda w: "/accounts/password_change/", signed_in())],
    "/accounts/password_change/done/": [Op("get", lambda w: "/accounts/password_change/done/", signed_in())],
    "/accounts/password_reset/": [Op("get", lambda w: "/accounts/password_reset/", public())],
    "/accounts/password_reset/done/": [Op("get", lambda w: "/accounts/password_reset/done/", public())],
    "/accounts/reset/<uidb64>/<token>/": [Op("get", lambda w: "/accounts/reset/MQ/bad-token/", public())],
    "/accounts/reset/done/": [Op("get", lambda w: "/accounts/reset/done/", public())],
    "/api/": [Op("get", lambda w: "/api/", public())],
    "/favicon.ico": [Op("get", lambda w: "/favicon.ico", public(301))],
    "/moderation/": [Op("get", lambda w: "/moderation/", maintainers())],
    "/moderation/audit/": [Op("get", lambda w: "/moderation/audit/", maintainers())],
    "/moderation/health/": [Op("get", lambda w: "/moderation/health/", maintainers())],
    "/moderation/submissions/<int:pk>/": [Op("get", lambda w: f"/moderation/submissions/{w.published.pk}/",
                                             maintainers())],
    "/moderation/submissions/<int:pk>/<slug:action>/": [Op(
        "post", lambda w: f"/moderation/submissions/{w.published.pk}/hide/", maintainers(302),
        data=lambda w: {"on": "1", "reason": "matrix"}, allowed={"staff", "track_maintainer"},
        intact=lambda w: not Submission.objects.get(pk=w.published.pk).is_hidden)],
    "/moderation/tracks/<slug:track>/": [Op("get", lambda w: "/moderation/tracks/sqa3d/", maintainers())],
    "/moderation/tracks/<slug:track>/finals/<slug:split>.zip": [Op("get", lambda w: "/moderation/tracks/sqa3d/"
                                                                                    "finals/test.zip", maintainers())],
    "/benchmarks/<slug:track>/pages/<slug:page>/": [Op("get", lambda w: "/benchmarks/sqa3d/pages/rules/", public())],
    "/benchmarks/<slug:track>/challenges/<slug:name>/": [Op("get", lambda w: "/benchmarks/sqa3d/challenges/sqa3d-2026/",
                                                            public())],
    "/benchmarks/<slug:track>/challenges/<slug:name>/export.<str:fmt>": [
        Op("get", lambda w: "/benchmarks/sqa3d/challenges/sqa3d-2026/export.csv", public()),
        Op("get", lambda w: "/benchmarks/sqa3d/challenges/sqa3d-2026/export.json", public())],
    "/benchmarks/<slug:track>/challenges/<slug:name>/bibtex": [
        Op("get", lambda w: "/benchmarks/sqa3d/challenges/sqa3d-2026/bibtex", public())],
    "/moderation/tracks/<slug:track>/participants/": [
        Op("get", lambda w: "/moderation/tracks/sqa3d/participants/", maintainers()),
        Op("post", lambda w: "/moderation/tracks/sqa3d/participants/", maintainers(302),
           data=lambda w: {"action": "invite", "username": "dave"}, allowed={"staff", "track_maintainer"},
           intact=lambda w: not Participant.objects.filter(user=w.dave, invited=True).exists())],
    "/moderation/tracks/<slug:track>/participants.csv": [
        Op("get", lambda w: "/moderation/tracks/sqa3d/participants.csv", maintainers())],
    "/moderation/tracks/<slug:track>/announcements/": [
        Op("get", lambda w: "/moderation/tracks/sqa3d/announcements/", maintainers())],
    # Bans from every benchmark: staff only, a track's maintainers included out.
    "/moderation/bans/": [Op("get", lambda w: "/moderation/bans/", who(403, staff=200)),
                          Op("post", lambda w: "/moderation/bans/", who(403, staff=302),
                             data=lambda w: {"action": "ban", "username": "dave", "reason": "matrix"},
                             allowed={"staff"}, intact=lambda w: not w.dave.bans.exists())],
    "/benchmarks/<slug:track>/terms/": [Op("get", lambda w: "/benchmarks/sqa3d/terms/", public())],
    # The API: tokens, not sessions; 401 for anonymous callers.
    "/api/v1/tracks": [Op("get", lambda w: "/api/v1/tracks", public())],
    "/api/v1/submissions": [
        Op("get", lambda w: "/api/v1/submissions", signed_in(anonymous=401)),
        Op("post", lambda w: "/api/v1/submissions", signed_in(201, anonymous=401), data=lambda w: {
            "track": "sqa3d", "split": "test", "method_name": "MatrixNet",
            "file": SimpleUploadedFile("p.json", w.predictions)})],
    "/api/v1/submissions/<int:pk>": [Op("get", lambda w: f"/api/v1/submissions/{w.finished.pk}",
                                        team_only(anonymous=401, staff=200))],
    "/api/v1/submissions/<int:pk>/publish": [Op(
        "post", lambda w: f"/api/v1/submissions/{w.finished.pk}/publish", team_only(anonymous=401, staff=403),
        allowed={"owner", "member"}, intact=lambda w: not _published(w))],
    "/api/v1/tracks/<slug:track>/<slug:split>/manifest": [Op("get", lambda w: "/api/v1/tracks/sqa3d/test/manifest",
                                                             public())],
    "/api/v1/me": [Op("get", lambda w: "/api/v1/me", signed_in(anonymous=401))],
    "/api/v1/benchmarks/<slug:track>/participation": [
        Op("get", lambda w: "/api/v1/benchmarks/sqa3d/participation", signed_in(anonymous=401)),
        Op("post", lambda w: "/api/v1/benchmarks/sqa3d/participation", signed_in(anonymous=401), json=True,
           data=lambda w: {"join": True})],
    "/api/v1/quota": [Op("get", lambda w: "/api/v1/quota?track=sqa3d&split=test", signed_in(anonymous=401))],
    "/api/v1/uploads": [
        Op("get", lambda w: "/api/v1/uploads", signed_in(anonymous=401)),
        Op("post", lambda w: "/api/v1/uploads", signed_in(201, anonymous=401), json=True, data=lambda w: {
            "track": "sqa3d", "split": "test", "method_name": "M", "file_name": "p.json", "size": 5000})],
    "/api/v1/uploads/<int:pk>": [
        Op("get", lambda w: f"/api/v1/uploads/{w.upload.submission_id}", team_only(anonymous=401, staff=200)),
        Op("delete", lambda w: f"/api/v1/uploads/{w.upload.submission_id}", team_only(anonymous=401, staff=403),
           allowed={"owner", "member"}, intact=lambda w: Submission.objects.get(
               pk=w.upload.submission_id).status == "uploading")],
    "/api/v1/uploads/<int:pk>/urls": [Op("post", lambda w: f"/api/v1/uploads/{w.upload.submission_id}/urls",
                                         team_only(anonymous=401, staff=403), json=True,
                                         data=lambda w: {"parts": [1]})],
    # The signed URL is the authorisation (as on S3): whoever holds it may PUT that part, nobody else.
    "/api/v1/uploads/<int:pk>/parts/<int:number>": [Op("put", lambda w: w.part_url, public())],
    "/api/v1/uploads/<int:pk>/complete": [Op(
        "post", lambda w: f"/api/v1/uploads/{w.upload.submission_id}/complete",
        team_only(409, anonymous=401, staff=403))],
    "/api/v1/my/methods": [Op("get", lambda w: "/api/v1/my/methods", signed_in(anonymous=401))],
    "/api/v1/my/methods/<int:pk>": [
        Op("get", lambda w: f"/api/v1/my/methods/{w.finished.method_id}", team_only(anonymous=401)),
        Op("patch", lambda w: f"/api/v1/my/methods/{w.finished.method_id}", team_only(anonymous=401), json=True,
           data=lambda w: {"description": "changed"}, allowed={"owner", "member"},
           intact=lambda w: type(w.finished.method).objects.get(
               pk=w.finished.method_id).description == "A test method.")],
    # The member (tried before the owner) reveals it; then the owner finds nothing to reveal.
    "/api/v1/my/methods/<int:pk>/reveal": [Op(
        "post", lambda w: f"/api/v1/my/methods/{w.anonymous.method_id}/reveal",
        who(404, anonymous=401, member=200, owner=409), allowed={"owner", "member"}, intact=still_anonymous)],
    "/api/v1/leaderboards/<slug:track>": [Op("get", lambda w: "/api/v1/leaderboards/sqa3d", public())],
    "/api/v1/leaderboards/<slug:track>/compare": [Op("get", lambda w: f"/api/v1/leaderboards/sqa3d/compare"
                                                                      f"?e={w.entry.pk}", public())],
    "/api/v1/leaderboards/<slug:track>/progress": [Op("get", lambda w: "/api/v1/leaderboards/sqa3d/progress",
                                                      public())],
    "/api/v1/methods/<int:pk>": [Op("get", lambda w: f"/api/v1/methods/{w.published.method_id}", public()),
                                 Op("get", lambda w: f"/api/v1/methods/{w.anonymous.method_id}", public())],
    "/api/v1/leaderboards/<slug:track>/challenges/<slug:name>": [
        Op("get", lambda w: "/api/v1/leaderboards/sqa3d/challenges/sqa3d-2026", public())],
    "/api/v1/openapi.json": [Op("get", lambda w: "/api/v1/openapi.json", public())],
}


def openapi_op(route: str, method: str) -> dict[str, Any] | None:
    path = re.sub(r"<(?:\w+:)?(\w+)>", r"{\1}", route).replace("{pk}", "{id}")
    return PATHS.get(path, {}).get(method)


def test_every_route_has_a_matrix_entry():
    assert routes() - set(MATRIX) == set(), "add the new routes to MATRIX"
    assert set(MATRIX) - routes() == set(), "routes in MATRIX that no longer exist"


@pytest.mark.parametrize("route", sorted(MATRIX))
def test_who_may_do_what(route, world):
    api = route.startswith("/api/v1/")
    for op in MATRIX[route]:
        documented = openapi_op(route, op.method) if api else None
        # Refused roles first, so that the state they may not change is still there to check.
        for role in sorted(ROLES, key=lambda r: r in op.allowed):
            client, headers = client_for(world, role, api)
            url = op.url(world)
            data = op.data(world) if op.data else None
            if op.json:
                response = getattr(client, op.method)(url, json.dumps(data), content_type="application/json",
                                                      headers=headers)
            elif op.method in ("put", "patch", "delete"):
                response = getattr(client, op.method)(url, b"x" * 4096 if op.method == "put" else b"",
                                                      content_type="application/octet-stream", headers=headers)
            else:
                response = getattr(client, op.method)(url, data or {}, headers=headers)
            where = f"{op.method.upper()} {url} as {role}"
            assert response.status_code == op.expect[role], (where, response.content[:300])
            if op.intact and role not in op.allowed:
                assert op.intact(world), f"{where} changed what it may not"
            if documented is not None and response.status_code >= 400:
                assert str(response.status_code) in documented["responses"], f"{where}: undocumented status"
                assert set(response.json()["error"]) >= {"code", "message"}, where


def test_a_part_url_opens_its_own_upload_and_part_only(world, client, settings):
    theirs = uploads.check_start_upload(user=world.users["outsider"], track="sqa3d", split="test",
                                        method_name="Other", file_name="p.json", size=5000)
    mine = urlsplit(world.part_url)
    # Upload A's signature on upload B, and on another part of A.
    for path in (f"/api/v1/uploads/{theirs.submission_id}/parts/1", mine.path.replace("/parts/1", "/parts/2")):
        response = client.put(f"{path}?{mine.query}", b"x" * 4096, content_type="application/octet-stream")
        assert response.status_code == 403 and response.json()["error"]["code"] == "forbidden", path
    # Forged: signed with the site's key over what the old URLs signed (no upload id), and garbage.
    old_style = signing.TimestampSigner(key=settings.SECRET_KEY, salt=uploads._SIGNER_SALT).sign(
        f"{theirs.submission_id}.1").split(":", 1)[1]
    for signature in (old_style, "x", ""):
        response = client.put(f"/api/v1/uploads/{theirs.submission_id}/parts/1?signature={signature}",
                              b"x" * 4096, content_type="application/octet-stream")
        assert response.status_code == 403, signature
    assert uploads.upload_parts(theirs) == []
    assert [p.number for p in uploads.upload_parts(world.upload)] == []
