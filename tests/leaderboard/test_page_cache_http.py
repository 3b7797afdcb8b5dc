"""The public pages that change rarely (tracks, manifests, format pages, 404s of unknown ids)
come from the page cache too, and anonymous answers say so to a reverse proxy (Cache-Control,
Vary, ETag, 304); nothing a signed-in user sees is ever marked public."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from leaderboard.benchmarks.bundle_apply import load_bundled_benchmarks
from leaderboard.benchmarks.models import Benchmark, LabelSet, Split
from leaderboard.benchmarks.services import do_load_labels
from leaderboard.moderation import services as moderation
from leaderboard.submissions import services
from tests.leaderboard.conftest import publish
from tests.leaderboard.test_page_cache import READ_URLS

RARE_URLS = ["/api/v1/tracks", "/api/v1/tracks/sqa3d/test/manifest", "/benchmarks/sqa3d/format/", "/metrics/"]
UNKNOWN_URLS = ["/methods/987654321/", "/api/v1/methods/987654321", "/benchmarks/no-such-track/"]


def max_age(response) -> int:
    """How long a shared cache (a reverse proxy) may keep the answer. A browser keeps it 0 s: it
    asks again each time (a 304 when unchanged), so that a researcher who changed a page and opens
    it signed out sees the change, not the copy it kept a minute ago."""
    match = re.fullmatch(r"public, max-age=0, s-maxage=(\d+)", response["Cache-Control"])
    assert match, response["Cache-Control"]
    return int(match.group(1))


@pytest.fixture
def unlabelled(db):
    """The SQA3D test split with no labels loaded yet."""
    load_bundled_benchmarks()
    return Split.objects.select_related("benchmark").get(benchmark__track="sqa3d", name="test")


def test_rarely_changing_pages_and_unknown_ids_are_served_from_the_cache(client, scored,
                                                                        django_assert_num_queries):
    for url in RARE_URLS + UNKNOWN_URLS:
        first = client.get(url)
        assert first["X-Page-Cache"] == "miss", url
        with django_assert_num_queries(0):
            second = client.get(url)
        assert second["X-Page-Cache"] == "hit", url
        assert (second.status_code, second.content) == (first.status_code, first.content), url
    assert client.get(UNKNOWN_URLS[0]).status_code == 404
    assert client.get(UNKNOWN_URLS[1]).json()["error"]["code"] == "not_found"


def test_a_manifest_and_the_tracks_change_when_labels_load(client, unlabelled, sqa3d_files,
                                                          django_capture_on_commit_callbacks):
    manifest = "/api/v1/tracks/sqa3d/test/manifest"
    assert client.get(manifest).status_code == 404
    assert client.get(manifest)["X-Page-Cache"] == "hit"
    tracks = client.get("/api/v1/tracks").json()["tracks"]
    assert [s["labels_loaded"] for t in tracks if t["track"] == "sqa3d" for s in t["splits"]] == [False]
    format_page = client.get("/benchmarks/sqa3d/format/").content
    with django_capture_on_commit_callbacks(execute=True):
        labels, _ = do_load_labels(unlabelled, sqa3d_files["labels"])
    response = client.get(manifest)
    assert response.status_code == 200 and response.json()["labels_sha256"] == labels.sha256
    tracks = client.get("/api/v1/tracks").json()["tracks"]
    assert [s["labels_loaded"] for t in tracks if t["track"] == "sqa3d" for s in t["splits"]] == [True]
    assert client.get("/benchmarks/sqa3d/format/").content != format_page


def test_labels_activated_in_the_admin_reach_the_manifest(client, sqa3d_split, django_capture_on_commit_callbacks):
    manifest = "/api/v1/tracks/sqa3d/test/manifest"
    assert client.get(manifest).status_code == 200
    with django_capture_on_commit_callbacks(execute=True):
        labels = LabelSet.objects.get(split=sqa3d_split, is_active=True)
        labels.is_active = False
        labels.save()
    assert client.get(manifest).status_code == 404


def test_a_new_benchmark_shows_in_the_tracks_and_its_format_page(client, db, django_capture_on_commit_callbacks):
    load_bundled_benchmarks()
    Benchmark.objects.filter(track="sqa3d").delete()  # as if the track were installed later
    assert "sqa3d" not in [t["track"] for t in client.get("/api/v1/tracks").json()["tracks"]]
    assert client.get("/benchmarks/sqa3d/format/").status_code == 404
    assert client.get("/benchmarks/sqa3d/format/")["X-Page-Cache"] == "hit"
    with django_capture_on_commit_callbacks(execute=True):
        load_bundled_benchmarks()
    assert "sqa3d" in [t["track"] for t in client.get("/api/v1/tracks").json()["tracks"]]
    assert client.get("/benchmarks/sqa3d/format/").status_code == 200


def test_a_cached_404_ends_when_the_method_is_published(client, owner, scored, django_capture_on_commit_callbacks):
    pages = [f"/methods/{scored.method_id}/", f"/api/v1/methods/{scored.method_id}"]
    for page in pages:
        assert client.get(page).status_code == 404
        assert client.get(page)["X-Page-Cache"] == "hit"
    publish(owner, scored, django_capture_on_commit_callbacks)
    for page in pages:
        assert client.get(page).status_code == 200, page


def test_an_id_asked_before_its_method_exists_is_404_until_published(client, owner, scored, sqa3d_files,
                                                                     django_capture_on_commit_callbacks):
    later = f"/methods/{scored.method_id + 1}/"
    assert client.get(later).status_code == 404
    assert client.get(later)["X-Page-Cache"] == "hit"
    with django_capture_on_commit_callbacks(execute=True):
        fresh = services.check_create_submission(user=owner, track="sqa3d", split="test", method_name="Fresh",
                                                 file=sqa3d_files["predictions"].open("rb"), file_name="p.json")
    assert fresh.method_id == scored.method_id + 1
    assert client.get(later).status_code == 404  # created, not published: nothing public yet


def test_anonymous_answers_are_public_for_a_while_with_an_etag(client, scored, settings):
    settings.PAGE_CACHE_MAX_AGE = 45
    for url in READ_URLS + RARE_URLS + UNKNOWN_URLS + ["/"]:
        first, second = client.get(url), client.get(url)
        for response in (first, second):
            assert 0 < max_age(response) <= 45, url
            assert "Cookie" in response["Vary"], url
        assert first["ETag"] and second["ETag"] == first["ETag"], url
        again = client.get(url, HTTP_IF_NONE_MATCH=first["ETag"])
        if first.status_code == 200:
            assert again.status_code == 304 and again.content == b"", url
            assert again["ETag"] == first["ETag"] and again["Cache-Control"].startswith("public"), url
        else:
            assert again.status_code == 404, url  # a 404 is never "not modified"


def test_a_page_unchanged_by_a_change_keeps_its_etag(client, owner, scored, django_capture_on_commit_callbacks):
    url = "/benchmarks/sqa3d/format/"
    etag = client.get(url)["ETag"]
    publish(owner, scored, django_capture_on_commit_callbacks)  # moves the version; the page is the same
    response = client.get(url, HTTP_IF_NONE_MATCH=etag)
    assert response.status_code == 304 and response["X-Page-Cache"] == "miss"


def test_max_age_ends_with_the_embargo(client, owner, maintainer, scored, settings,
                                       django_capture_on_commit_callbacks):
    settings.PAGE_CACHE_MAX_AGE = 600
    publish(owner, scored, django_capture_on_commit_callbacks)
    with django_capture_on_commit_callbacks(execute=True):
        moderation.check_set_visible_after(maintainer, scored.split, timezone.now() + timedelta(seconds=90))
    for url in READ_URLS[:5]:
        assert 0 < max_age(client.get(url)) <= 90, url
        assert 0 < max_age(client.get(url)) <= 90, url
    assert max_age(client.get("/metrics/")) > 90  # no embargo on it


def test_signed_in_visitors_get_nothing_public(client, owner, scored):
    client.force_login(owner)
    urls = [*READ_URLS, *RARE_URLS, *UNKNOWN_URLS, "/", "/submissions/", f"/submissions/{scored.pk}/",
            f"/submissions/{scored.pk}/status.json", "/accounts/tokens/"]
    for url in urls:
        response = client.get(url)
        control = response.get("Cache-Control", "")
        assert "public" not in control and "private" in control and "no-store" in control, (url, control)
        assert not response.has_header("ETag"), url


def test_nothing_personal_is_public_for_anonymous_visitors(client, owner, scored):
    token = Client(HTTP_AUTHORIZATION="Token nonsense")
    for response in [client.get("/submissions/"), client.get(f"/submissions/{scored.pk}/"),
                     client.get("/accounts/login/"), client.get("/accounts/signup/"),
                     token.get("/api/v1/leaderboards/sqa3d"), token.get("/api/v1/tracks"),
                     client.post("/benchmarks/sqa3d/")]:
        assert "public" not in response.get("Cache-Control", ""), response.request["PATH_INFO"]
