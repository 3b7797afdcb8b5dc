"""Who may do what: every route of the URLconf (the admin aside, which is Django's and staff-only)
for anonymous, owner, team member, outsider, staff and track maintainer.

A route without an entry in MATRIX fails ``test_every_route_has_a_matrix_entry``. The
roles that an entry does not allow run first, and a mutating entry's ``intact`` check
must hold after each of them. API answers are also checked against the OpenAPI
document: every error status seen must be listed for that operation.
"""

from __future__ import annotations

import io
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import pytest
from django.contrib.auth.models import AbstractBaseUser
from django.core import signing
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver

from evaluation_workers.tracks import get_track
from leaderboard.accounts.models import ApiToken, Membership
from leaderboard.accounts.services import do_create_team, do_create_token
from leaderboard.openapi import PATHS
from leaderboard.rankings.models import LeaderboardEntry
from leaderboard.submissions import lifecycle, services, uploads
from leaderboard.submissions.models import Method, Submission
from tests.leaderboard.conftest import describe_method

ROLES = ("anonymous", "outsider", "staff", "track_maintainer", "member", "owner")
# Who is behind the anonymous entry HiddenNet: none of it may reach a public page, API answer or export.
SECRET = {"team": "Zeta Secret Lab", "slug": "zeta-secret-lab", "authors": "Ada Zetauthor",
          "paper": "https://example.org/zeta-paper", "code": "https://example.org/zeta-code"}
FIXTURE_OF = {"staff": "maintainer"}  # conftest's staff user is called "maintainer" (mallory)


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


def _still_anonymous(w: Any) -> bool:
    return Method.objects.get(pk=w.anonymous.method_id).is_anonymous


MATRIX: dict[str, list[Op]] = {
    "/": [Op("get", lambda w: "/", public())],
    "/benchmarks/<slug:track>/": [Op("get", lambda w: "/benchmarks/sqa3d/", public())],
    "/benchmarks/<slug:track>/export.<str:fmt>": [Op("get", lambda w: "/benchmarks/sqa3d/export.csv", public()),
                                                  Op("get", lambda w: "/benchmarks/sqa3d/export.json", public())],
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
        allowed={"owner", "member"}, intact=_still_anonymous)],
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
        who(404, anonymous=401, member=200, owner=409), allowed={"owner", "member"}, intact=_still_anonymous)],
    "/api/v1/leaderboards/<slug:track>": [Op("get", lambda w: "/api/v1/leaderboards/sqa3d", public())],
    "/api/v1/leaderboards/<slug:track>/compare": [Op("get", lambda w: f"/api/v1/leaderboards/sqa3d/compare"
                                                                      f"?e={w.entry.pk}", public())],
    "/api/v1/leaderboards/<slug:track>/progress": [Op("get", lambda w: "/api/v1/leaderboards/sqa3d/progress",
                                                      public())],
    "/api/v1/methods/<int:pk>": [Op("get", lambda w: f"/api/v1/methods/{w.published.method_id}", public()),
                                 Op("get", lambda w: f"/api/v1/methods/{w.anonymous.method_id}", public())],
    "/api/v1/openapi.json": [Op("get", lambda w: "/api/v1/openapi.json", public())],
}


class World:
    """The objects every route is tried on; alice (owner) and bob (member) share alice's team."""

    def __init__(self, users: dict[str, AbstractBaseUser], files: dict[str, Any], django_user_model: Any) -> None:
        from leaderboard.rankings.services import do_seed_paper_rows

        owner = users["owner"]
        self.users, self.predictions, self.n = users, files["predictions"].read_bytes(), 0
        result = get_track("sqa3d").score(files["labels"], files["predictions"], lambda f, m="": None)

        def scored(name: str) -> Submission:
            s = services.check_create_submission(user=owner, track="sqa3d", split="test", method_name=name,
                                                 file=io.BytesIO(self.predictions), file_name="p.json")
            lifecycle.record_result(submission_id=s.pk, attempt=1, result=result)
            describe_method(s.method)
            return Submission.objects.select_related("method").get(pk=s.pk)

        self.published, self.finished = scored("PublicNet"), scored("PrivateNet")
        type(self.published.method).objects.filter(pk=self.published.method_id).update(
            paper_url="https://example.org/paper")
        services.check_publish(owner, self.published)
        self.entry = LeaderboardEntry.objects.get(method=self.published.method)
        do_seed_paper_rows("sqa3d")
        self.paper_entry = LeaderboardEntry.objects.filter(is_paper=True).first()
        self.queued = services.check_create_submission(user=owner, track="sqa3d", split="test", method_name="Q",
                                                       file=io.BytesIO(self.predictions), file_name="p.json")
        self.upload = uploads.check_start_upload(user=owner, track="sqa3d", split="test", method_name="Big",
                                                 file_name="p.json", size=5000)
        self.part_url = self.signed_part_url(self.upload, 1)
        self.owner_token = ApiToken.objects.get(prefix=do_create_token(owner).split("_")[1])
        self.lab = do_create_team(owner, "Lab")
        self.dave = django_user_model.objects.create_user("dave", password="x")
        Membership.objects.create(team=self.lab, user=users["member"])
        Membership.objects.create(team=self.lab, user=self.dave)
        # HiddenNet: published by alice's "Zeta Secret Lab" (bob a member too) as Anonymous (under review).
        self.secret_lab = do_create_team(owner, SECRET["team"])
        Membership.objects.create(team=self.secret_lab, user=users["member"])
        hidden = services.check_create_submission(user=owner, track="sqa3d", split="test", method_name="HiddenNet",
                                                  file=io.BytesIO(self.predictions), file_name="p.json",
                                                  team=self.secret_lab)
        lifecycle.record_result(submission_id=hidden.pk, attempt=1, result=result)
        Method.objects.filter(pk=hidden.method_id).update(
            description="Under double-blind review.", authors=SECRET["authors"], uses_extra_data=False,
            paper_url=SECRET["paper"], code_url=SECRET["code"])
        services.check_publish(owner, hidden, anonymous=True)
        self.anonymous = Submission.objects.select_related("method").get(pk=hidden.pk)
        self.anonymous_entry = LeaderboardEntry.objects.get(method=self.anonymous.method)

    def counter(self) -> int:
        self.n += 1
        return self.n

    @staticmethod
    def signed_part_url(upload: Any, number: int) -> str:
        url = uploads.part_urls(upload, [number], lambda n, sig: f"/api/v1/uploads/{upload.submission_id}/parts/"
                                                                   f"{n}?signature={sig}")[0]["url"]
        return str(url)


@pytest.fixture(autouse=True)
def fast_passwords(settings):
    """Six users a test: a fast hasher keeps the matrix quick (passwords are not what it tests)."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def world(request, owner, member, outsider, maintainer, track_maintainer, sqa3d_split, sqa3d_files,
          small_parts, sent_tasks, settings, django_user_model):
    settings.QUOTA_PER_DAY = settings.QUOTA_IN_FLIGHT = settings.QUOTA_TOTAL = 100
    users = {role: request.getfixturevalue(FIXTURE_OF.get(role, role)) for role in ROLES if role != "anonymous"}
    return World(users, sqa3d_files, django_user_model)


def client_for(w: World, role: str, api: bool) -> tuple[Client, dict[str, str]]:
    client = Client()
    if role == "anonymous":
        return client, {}
    if api:
        return client, {"Authorization": f"Token {do_create_token(w.users[role])}"}
    client.force_login(w.users[role])
    return client, {}


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


PRIVATE_EM = 0.913579  # a number no other row, paper row or page of the world carries


def _partitioned(result: dict[str, Any], name: str, value: float) -> dict[str, Any]:
    return {**result, "partition": name, "metrics": {k: value for k in result["metrics"]},
            "breakdown": {g: {k: value for k in row if k != "count"} for g, row in result["breakdown"].items()},
            "details": {"partition": name}}


def test_private_subset_results_stay_hidden_from_everyone_but_maintainers_until_the_reveal(world, sqa3d_files,
                                                                                           settings):
    """A submission scored on a public subset and a private remainder: no page, export or API answer shows
    the private numbers before the reveal, not even to its owner; the maintainers' desk does."""
    from leaderboard.benchmarks.models import LabelSet
    from leaderboard.rankings.services import do_reveal

    settings.PAGE_CACHE_SECONDS = 0  # the reveal's cache bump runs on commit, which tests never reach
    owner = world.users["owner"]
    split = world.published.split
    LabelSet.objects.filter(split=split, is_active=True).update(has_partition=True)
    result = get_track("sqa3d").score(sqa3d_files["labels"], sqa3d_files["predictions"], lambda f, m="": None)
    s = services.check_create_submission(user=owner, track="sqa3d", split="test", method_name="SubsetNet",
                                         file=io.BytesIO(world.predictions), file_name="p.json")
    lifecycle.record_result(submission_id=s.pk, attempt=1, result=_partitioned(result, "public", 0.424242),
                            more_results=[_partitioned(result, "private", PRIVATE_EM)])
    describe_method(s.method)
    services.check_publish(owner, s)
    team = s.team.slug
    pages = [f"/submissions/{s.pk}/", f"/submissions/{s.pk}/status.json", "/submissions/", f"/submissions/teams/{team}/",
             "/benchmarks/sqa3d/", "/benchmarks/sqa3d/export.json", "/benchmarks/sqa3d/export.csv",
             f"/methods/{s.method_id}/", f"/moderation/submissions/{s.pk}/", "/moderation/tracks/sqa3d/"]
    api = [f"/api/v1/submissions/{s.pk}", "/api/v1/submissions", "/api/v1/leaderboards/sqa3d",
           f"/api/v1/methods/{s.method_id}", f"/api/v1/leaderboards/sqa3d/compare?e={world.entry.pk}"]
    # The number itself (JSON, CSV, charts' titles) and as a table cell shows it (``pct``); a bare "91.4"
    # may be a chart's coordinate.
    private_marks = (str(PRIVATE_EM)[:6], ">91.4<")
    for role in ROLES:
        for url, is_api in [(u, False) for u in pages] + [(u, True) for u in api]:
            client, headers = client_for(world, role, is_api)
            response = client.get(url, headers=headers)
            body = response.content.decode()
            shows = response.status_code == 200 and any(mark in body for mark in private_marks)
            may = role in {"staff", "track_maintainer"} and url.startswith("/moderation/")
            assert shows == may, (url, role, response.status_code)
        client, headers = client_for(world, role, True)
        if role in {"owner", "member"}:
            seen = client.get(f"/api/v1/submissions/{s.pk}", headers=headers).json()["result"]
            assert seen["partition"] == "public" and seen["metrics"]["EM"] == 0.424242

    do_reveal(split)
    client, headers = client_for(world, "owner", True)
    seen = client.get(f"/api/v1/submissions/{s.pk}", headers=headers).json()["result"]
    assert seen["partition"] == "private" and seen["metrics"]["EM"] == PRIVATE_EM
    rows = Client().get("/api/v1/leaderboards/sqa3d").json()["rows"]
    assert [r["scores"]["EM"] for r in rows if r["method"] == "SubsetNet"] == [PRIVATE_EM]
# Anonymous entries: what each role sees of HiddenNet, through pages and API, before and after the reveal.

ANONYMOUS_READS = [
    "/", "/benchmarks/sqa3d/", "/benchmarks/sqa3d/?paper=0&sort=What/EM", "/benchmarks/sqa3d/export.csv",
    "/benchmarks/sqa3d/export.json", "/api/v1/leaderboards/sqa3d", "/api/v1/leaderboards/sqa3d/progress",
]


def _anonymous_urls(w: World) -> list[str]:
    pair = f"e={w.anonymous_entry.pk}&e={w.entry.pk}"
    return [*ANONYMOUS_READS, f"/benchmarks/sqa3d/compare/?{pair}", f"/api/v1/leaderboards/sqa3d/compare?{pair}",
            f"/methods/{w.anonymous.method_id}/", f"/api/v1/methods/{w.anonymous.method_id}",
            f"/entries/{w.anonymous_entry.pk}/"]


def _leaks(text: str) -> list[str]:
    return [v for v in SECRET.values() if v.lower() in text.lower()]


def test_an_anonymous_entry_names_nobody_on_public_pages_api_and_exports_for_any_role(world):
    for role in ROLES:
        for url in _anonymous_urls(world):
            client, headers = client_for(world, role, api=url.startswith("/api/"))
            response = client.get(url, headers=headers, follow=True)
            assert response.status_code == 200, (role, url)
            assert _leaks(response.content.decode()) == [], (role, url)
    client = Client()
    board = client.get("/benchmarks/sqa3d/").content.decode()
    assert "HiddenNet" in board and "Anonymous (under review)" in board
    row = next(r for r in client.get("/api/v1/leaderboards/sqa3d").json()["rows"] if r["method"] == "HiddenNet")
    assert row["team"] is None and row["anonymous"] is True
    exported = next(r for r in client.get("/benchmarks/sqa3d/export.json").json()["rows"]
                    if r["method"] == "HiddenNet")
    assert exported["team"] is None and exported["anonymous"] is True
    assert "HiddenNet,Anonymous (under review),False" in client.get("/benchmarks/sqa3d/export.csv").content.decode()
    method = client.get(f"/api/v1/methods/{world.anonymous.method_id}").json()
    assert (method["team"], method["authors"], method["paper_url"], method["code_url"]) == (None, "", "", "")
    assert method["anonymous"] is True and method["description"] == "Under double-blind review."


def test_maintainers_and_the_team_see_who_it_is_and_nobody_else_does(world):
    pages = {"staff": [f"/moderation/submissions/{world.anonymous.pk}/", "/moderation/?queue=all"],
             "track_maintainer": [f"/moderation/submissions/{world.anonymous.pk}/", "/moderation/?queue=all"],
             "owner": [f"/submissions/methods/{world.anonymous.method_id}/", f"/submissions/{world.anonymous.pk}/"],
             "member": [f"/submissions/methods/{world.anonymous.method_id}/"]}
    for role, urls in pages.items():
        client, _ = client_for(world, role, api=False)
        for url in urls:
            page = client.get(url).content.decode()
            assert SECRET["team"] in page and "Anonymous" in page, (role, url)
    for role in ("anonymous", "outsider"):
        client, _ = client_for(world, role, api=False)
        for url in [*pages["staff"], *pages["owner"]]:
            response = client.get(url)
            assert response.status_code in (302, 403, 404) and _leaks(response.content.decode()) == [], (role, url)
    client, headers = client_for(world, "owner", api=True)
    mine = client.get(f"/api/v1/my/methods/{world.anonymous.method_id}", headers=headers).json()
    assert mine["anonymous"] is True and mine["authors"] == SECRET["authors"]
    client, headers = client_for(world, "outsider", api=True)
    assert client.get(f"/api/v1/my/methods/{world.anonymous.method_id}", headers=headers).status_code == 404


def test_the_reveal_is_audited_and_shows_at_once_through_the_page_cache(world, django_capture_on_commit_callbacks):
    from leaderboard.moderation.models import AuditEntry

    public = Client()
    urls = _anonymous_urls(world)
    for url in urls:
        public.get(url, follow=True)
    for url in ANONYMOUS_READS:  # cached now, and still naming nobody
        response = public.get(url)
        assert response["X-Page-Cache"] == "hit" and _leaks(response.content.decode()) == [], url
    for role in ("outsider", "staff"):  # only the team may reveal it, maintainers included
        client, _ = client_for(world, role, api=False)
        assert client.post(f"/submissions/methods/{world.anonymous.method_id}/reveal/").status_code == 404
    assert _still_anonymous(world) and not AuditEntry.objects.filter(action="reveal").exists()
    owner, _ = client_for(world, "owner", api=False)
    with django_capture_on_commit_callbacks(execute=True):
        owner.post(f"/submissions/methods/{world.anonymous.method_id}/reveal/")
    assert not _still_anonymous(world)
    audit = AuditEntry.objects.get(action="reveal")
    assert (audit.actor_name, audit.track, audit.split) == ("alice", "sqa3d", "test")
    assert SECRET["team"] in audit.target and AuditEntry.objects.filter(action="anonymize").count() == 1
    for url in ["/benchmarks/sqa3d/", "/benchmarks/sqa3d/export.csv", "/api/v1/leaderboards/sqa3d",
                f"/methods/{world.anonymous.method_id}/", f"/api/v1/methods/{world.anonymous.method_id}"]:
        response = public.get(url)
        assert SECRET["team"] in response.content.decode(), url
    page = public.get(f"/methods/{world.anonymous.method_id}/").content.decode()
    assert SECRET["authors"] in page and SECRET["paper"] in page and SECRET["code"] in page
    assert public.get(f"/methods/{world.anonymous.method_id}/bibtex").status_code == 200
    staff, _ = client_for(world, "staff", api=False)
    assert "alice" in staff.get("/moderation/audit/").content.decode()
