"""Rows that must stay hidden: a private subset's results until the reveal, and who is behind an
anonymous entry, for each of the six roles of ``permission_world``, through pages, API and exports.
"""

from __future__ import annotations

import io
from typing import Any

import pytest
from django.test import Client

from evaluation_workers.tracks import get_track
from leaderboard.submissions import lifecycle, services
from tests.leaderboard import permission_world
from tests.leaderboard.conftest import describe_method
from tests.leaderboard.permission_world import ROLES, SECRET, World, client_for, still_anonymous

fast_passwords = pytest.fixture(autouse=True)(permission_world.fast_passwords)
world = pytest.fixture(permission_world.world)


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
    # A challenge's archived final board holds the anonymous row as it was: still naming nobody.
    "/benchmarks/sqa3d/challenges/sqa3d-2026/", "/benchmarks/sqa3d/challenges/sqa3d-2026/export.csv",
    "/benchmarks/sqa3d/challenges/sqa3d-2026/export.json", "/api/v1/leaderboards/sqa3d/challenges/sqa3d-2026",
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
    assert still_anonymous(world) and not AuditEntry.objects.filter(action="reveal").exists()
    owner, _ = client_for(world, "owner", api=False)
    with django_capture_on_commit_callbacks(execute=True):
        owner.post(f"/submissions/methods/{world.anonymous.method_id}/reveal/")
    assert not still_anonymous(world)
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
