"""Every URL pattern of the URLconf in a real browser at 1280 and 390 px: no page is
wider than its viewport (wide tables scroll inside their own ``.table-wrap``; hiding
the overflow on the page does not count).

The URLconf is walked, not listed by hand: a pattern added without a visit below
fails ``test_every_url_pattern_has_a_visit``. Screenshots of every page at both
widths go to test-artifacts/widths/.
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterator
from typing import Any

import pytest
from django.urls import URLPattern, URLResolver, get_resolver

from tests.leaderboard.test_browser import ARTIFACTS, page  # noqa: F401  (fixture)

SHOTS = ARTIFACTS / "widths"
WIDTHS = {"desktop": (1280, 900), "phone": (390, 844)}
# Django's own admin: its index and one change list and change form are walked; every
# other model's pages are the same templates (Django's, not ours).
ADMIN_SAMPLE = {"admin:index", "admin:login", "admin:submissions_submission_changelist",
                "admin:submissions_submission_change"}


def url_patterns() -> Iterator[tuple[str, str]]:
    """(key, route) of every pattern: the key is ``namespace:name``, or the route when unnamed."""

    def walk(patterns: list[Any], prefix: str, namespace: str) -> Iterator[tuple[str, str]]:
        for p in patterns:
            route = prefix + str(p.pattern)
            if isinstance(p, URLResolver):
                ns = ":".join(filter(None, [namespace, p.namespace]))
                yield from walk(p.url_patterns, route, ns)
            elif isinstance(p, URLPattern):
                key = ":".join(filter(None, [namespace, p.name])) if p.name else route
                yield key, route

    yield from walk(get_resolver().url_patterns, "/", "")


def _exempt(key: str) -> bool:
    return key.startswith("admin:") and key not in ADMIN_SAMPLE or key.startswith("/admin/")


@pytest.fixture
def site(transactional_db, maintainer, sqa3d_split, sqa3d_files, sent_tasks, tmp_path):
    """Real objects behind every pattern: scored and published methods on SQA3D and on MMScan
    (14 metrics), paper rows, a team with a member, a token, an upload in parts."""
    from django.contrib.auth.tokens import default_token_generator
    from django.utils.encoding import force_bytes
    from django.utils.http import urlsafe_base64_encode

    from evaluation_workers.synthetic import mmscan_vg
    from evaluation_workers.tracks import get_track
    from leaderboard.accounts.emails import verification_token
    from leaderboard.accounts.models import ApiToken, Membership
    from leaderboard.accounts.services import do_create_team, do_create_token, personal_team
    from leaderboard.benchmarks.bundle_apply import load_bundled_paper_rows
    from leaderboard.benchmarks.models import Split
    from leaderboard.benchmarks.services import do_load_labels
    from leaderboard.rankings.models import LeaderboardEntry
    from leaderboard.submissions import lifecycle, services
    from leaderboard.submissions.models import Method

    user = maintainer
    type(user).objects.filter(pk=user.pk).update(is_superuser=True)
    load_bundled_paper_rows("sqa3d")
    load_bundled_paper_rows("openscan")
    load_bundled_paper_rows("mmscan-vg")
    load_bundled_paper_rows("scanrefer")
    mm_split = Split.objects.select_related("benchmark").get(benchmark__track="mmscan-vg", name="val")
    mm_labels, written = mmscan_vg.write_demo(tmp_path / "mmscan", "val")
    mm_predictions = written.rename(tmp_path / written.name)  # the labels folder holds labels only
    do_load_labels(mm_split, mm_labels.parent)

    def publish(track: str, split: str, name: str, predictions: Any, labels: Any) -> Any:
        result = get_track(track).score(labels, predictions, lambda f, m="": None)
        sub = services.check_create_submission(user=user, track=track, split=split, method_name=name,
                                               file=io.BytesIO(predictions.read_bytes()),
                                               file_name=predictions.name)
        lifecycle.record_result(submission_id=sub.pk, attempt=1, result=result)
        Method.objects.filter(name=name).update(description="A `clean_answer` model.", authors="A. Author",
                                                uses_extra_data=False, paper_url="https://example.org/p")
        services.check_publish(user, sub)
        return sub

    sqa = publish("sqa3d", "test", "AlphaQA-with-a-rather-long-name", sqa3d_files["predictions"],
                  sqa3d_files["labels"])
    mm = publish("mmscan-vg", "val", "GroundNet", mm_predictions, mm_labels.parent)
    team = do_create_team(user, "Lab of Long Names")
    other = type(user).objects.create_user("dora", password="correct horse battery", email="dora@example.org")
    Membership.objects.create(team=team, user=other)
    do_create_token(user, "laptop")
    token = ApiToken.objects.filter(user=user).latest("pk")
    paper = LeaderboardEntry.objects.filter(split=sqa3d_split, is_paper=True).first()
    sqa_entry = LeaderboardEntry.objects.get(submission=sqa)
    mm_entry = LeaderboardEntry.objects.get(submission=mm)
    # A challenge on sqa3d/test whose final board was archived (the split open again afterwards).
    from datetime import timedelta

    from django.utils import timezone

    from leaderboard.benchmarks.models import Challenge, Phase
    from leaderboard.rankings.archive import do_archive

    challenge = Challenge.objects.create(benchmark=sqa3d_split.benchmark, name="sqa3d-2026", title="SQA3D 2026",
                                         post_challenge=False)
    Phase.objects.create(challenge=challenge, order=0, name="test", title="Test", split=sqa3d_split)
    Split.objects.filter(pk=sqa3d_split.pk).update(deadline=timezone.now() - timedelta(hours=1))
    do_archive(challenge)
    Split.objects.filter(pk=sqa3d_split.pk).update(deadline=None)
    return {"user": user, "sqa": sqa, "mm": mm, "team": team, "other": other, "token": token,
            "paper": paper, "sqa_entry": sqa_entry, "mm_entry": mm_entry, "personal": personal_team(user),
            "uid": urlsafe_base64_encode(force_bytes(other.pk)),
            "verify_token": verification_token(other, other.email),
            "reset_token": default_token_generator.make_token(other)}


def visits(s: dict[str, Any]) -> dict[str, list[str]]:
    """The URLs visited for each pattern key (several where one pattern has distinct pages)."""
    sqa, mm = s["sqa"].pk, s["mm"].pk
    method = s["sqa"].method_id
    compare = f"?split=test&e={s['sqa_entry'].pk}&e={s['paper'].pk}"
    return {
        "benchmarks:home": ["/"],
        "benchmarks:metrics": ["/metrics/"],
        "benchmarks:bundle_schema": ["/schemas/benchmark-bundle.json"],
        "benchmarks:format": ["/benchmarks/sqa3d/format/", "/benchmarks/openscan/format/",
                              "/benchmarks/mmscan-vg/format/", "/benchmarks/scanrefer/format/"],
        "benchmarks:format_sample": ["/benchmarks/sqa3d/format/sample/jsonl",
                                     "/benchmarks/mmscan-vg/format/sample/json.gz"],
        "rankings:leaderboard": ["/benchmarks/sqa3d/", "/benchmarks/sqa3d/?metric=EM_R",
                                 "/benchmarks/openscan/", "/benchmarks/mmscan-vg/",
                                 "/benchmarks/mmscan-vg/?split=test", "/benchmarks/mmscan-vg/?extra=only",
                                 "/benchmarks/scanrefer/"],  # the plugin track, with its paper rows
        "rankings:export": ["/benchmarks/sqa3d/export.csv", "/benchmarks/mmscan-vg/export.json"],
        "rankings:compare": [f"/benchmarks/sqa3d/compare/{compare}", "/benchmarks/sqa3d/compare/"],
        "rankings:method": [f"/methods/{method}/", f"/methods/{s['mm'].method_id}/"],
        "rankings:bibtex": [f"/methods/{method}/bibtex"],
        "rankings:entry": [f"/entries/{s['paper'].pk}/"],
        "benchmarks:page": ["/benchmarks/mmscan-vg/pages/overview/", "/benchmarks/mmscan-vg/pages/rules/"],
        "rankings:challenge": ["/benchmarks/mmscan-vg/challenges/mmscan-vg-demo/",
                               "/benchmarks/sqa3d/challenges/sqa3d-2026/"],
        "rankings:challenge-export": ["/benchmarks/sqa3d/challenges/sqa3d-2026/export.csv",
                                      "/benchmarks/sqa3d/challenges/sqa3d-2026/export.json"],
        "rankings:challenge-bibtex": ["/benchmarks/sqa3d/challenges/sqa3d-2026/bibtex"],
        "rankings:entry_bibtex": [f"/entries/{s['paper'].pk}/bibtex"],
        "favicon": ["/favicon.ico"],
        "submissions:mine": ["/submissions/"],
        "submissions:submit": ["/submissions/new/mmscan-vg/"],
        "submissions:team": [f"/submissions/teams/{s['personal'].slug}/", f"/submissions/teams/{s['team'].slug}/"],
        "submissions:methods": ["/submissions/methods/"],
        "submissions:method": [f"/submissions/methods/{method}/"],
        "submissions:reveal": [f"/submissions/methods/{method}/reveal/"],
        "submissions:detail": [f"/submissions/{sqa}/", f"/submissions/{mm}/"],
        "submissions:status": [f"/submissions/{sqa}/status.json"],
        "submissions:publish": [f"/submissions/{sqa}/publish/"],
        "submissions:cancel": [f"/submissions/{sqa}/cancel/"],
        "accounts:signup": ["/accounts/signup/"],
        "accounts:email": ["/accounts/email/"],
        "accounts:verify_email": [f"/accounts/email/verify/{s['verify_token']}/"],
        "accounts:tokens": ["/accounts/tokens/"],
        "accounts:revoke_token": [f"/accounts/tokens/{s['token'].pk}/revoke/"],
        "accounts:teams": ["/accounts/teams/"],
        "accounts:team": [f"/accounts/teams/{s['team'].slug}/"],
        "accounts:remove_member": [f"/accounts/teams/{s['team'].slug}/members/{s['other'].pk}/remove/"],
        "login": ["/accounts/login/"],
        "logout": ["/accounts/logout/"],
        "password_change": ["/accounts/password_change/"],
        "password_change_done": ["/accounts/password_change/done/"],
        "password_reset": ["/accounts/password_reset/"],
        "password_reset_done": ["/accounts/password_reset/done/"],
        "password_reset_confirm": [f"/accounts/reset/{s['uid']}/{s['reset_token']}/"],
        "password_reset_complete": ["/accounts/reset/done/"],
        "api-tracks": ["/api/v1/tracks"],
        "api-submissions": ["/api/v1/submissions"],
        "api-submission": [f"/api/v1/submissions/{sqa}"],
        "api-publish": [f"/api/v1/submissions/{sqa}/publish"],
        "api-manifest": ["/api/v1/tracks/sqa3d/test/manifest"],
        "api-me": ["/api/v1/me"],
        "api-quota": ["/api/v1/quota?track=sqa3d"],
        "api-uploads": ["/api/v1/uploads"],
        "api-upload": [f"/api/v1/uploads/{sqa}"],
        "api-upload-urls": [f"/api/v1/uploads/{sqa}/urls"],
        "api-upload-part": [f"/api/v1/uploads/{sqa}/parts/1"],
        "api-upload-complete": [f"/api/v1/uploads/{sqa}/complete"],
        "api-my-methods": ["/api/v1/my/methods"],
        "api-my-method": [f"/api/v1/my/methods/{method}"],
        "api-my-method-reveal": [f"/api/v1/my/methods/{method}/reveal"],
        "api-leaderboard": ["/api/v1/leaderboards/sqa3d"],
        "api-compare": [f"/api/v1/leaderboards/sqa3d/compare{compare}"],
        "api-progress": ["/api/v1/leaderboards/sqa3d/progress"],
        "api-method": [f"/api/v1/methods/{method}"],
        "api-challenge": ["/api/v1/leaderboards/mmscan-vg/challenges/mmscan-vg-demo"],
        "api-openapi": ["/api/v1/openapi.json"],
        "api-docs": ["/api/"],
        "moderation:desk": ["/moderation/", "/moderation/?queue=all"],
        "moderation:audit": ["/moderation/audit/"],
        "moderation:health": ["/moderation/health/"],
        "moderation:submission": [f"/moderation/submissions/{mm}/"],
        "moderation:act": [f"/moderation/submissions/{mm}/verify/"],
        "moderation:track": ["/moderation/tracks/mmscan-vg/"],
        "moderation:finals": ["/moderation/tracks/sqa3d/finals/test.zip"],
        "moderation:participants": ["/moderation/tracks/sqa3d/participants/"],
        "moderation:participants_csv": ["/moderation/tracks/sqa3d/participants.csv"],
        "moderation:outreach": ["/moderation/tracks/sqa3d/announcements/"],
        "moderation:bans": ["/moderation/bans/"],
        "participation:terms": ["/benchmarks/sqa3d/terms/"],
        "api-participation": ["/api/v1/benchmarks/sqa3d/participation"],
        "admin:index": ["/admin/"],
        "admin:login": ["/admin/login/"],
        "admin:submissions_submission_changelist": ["/admin/submissions/submission/"],
        "admin:submissions_submission_change": [f"/admin/submissions/submission/{sqa}/change/"],
    }


# Pages that are the same for everyone and are looked at signed out (the rest, signed in).
SIGNED_OUT = ["/", "/benchmarks/sqa3d/", "/accounts/login/", "/accounts/signup/", "/moderation/",
              "/submissions/", "/nope/", "/api/"]

# Files, not pages: fetched, not photographed.
DOWNLOADS = {"rankings:export", "rankings:bibtex", "rankings:entry_bibtex", "favicon", "benchmarks:format_sample",
             "benchmarks:bundle_schema", "moderation:participants_csv", "rankings:challenge-export",
             "rankings:challenge-bibtex", "moderation:finals"}
# Forms post here; a GET is answered 405 without a page (the page they lead to is visited).
POST_ONLY = {"submissions:publish", "submissions:cancel", "submissions:reveal", "accounts:revoke_token", "accounts:remove_member",
             "logout", "moderation:act"}

OVERFLOW = """() => {
  const html = document.documentElement, body = document.body;
  const hidden = [html, body].filter((el) => el && ["hidden", "clip"].includes(getComputedStyle(el).overflowX));
  const wide = [...document.querySelectorAll("body *")].filter((el) => el.getBoundingClientRect().right
      > innerWidth + 1 && !el.closest(".table-wrap")).slice(0, 5).map((el) => el.tagName + "." + el.className);
  return {scrollWidth: html.scrollWidth, innerWidth, hidden: hidden.map((el) => el.tagName), wide};
}"""


def _name(url: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "_", url).strip("_") or "home"


def _says_synthetic(url: str) -> bool:
    """Whether a page of this site may name synthetic labels: the API's answers and its description do
    (``labels.synthetic: false``); no other page of a site with real labels may (issue 35)."""
    return url.startswith(("/api/", "/admin/"))


def _check(page, base: str, url: str, tag: str, problems: list[str]) -> None:  # noqa: F811
    page.set_viewport_size({"width": 1280, "height": 900})
    try:
        page.goto(base + url)
    except Exception as exc:  # noqa: BLE001 - reported with the others
        problems.append(f"{url}: {exc}".splitlines()[0])
        return
    # This site's labels are real (loaded without --synthetic): no page says "synthetic", not even hidden.
    if not _says_synthetic(url) and "synthetic" in page.content().lower():
        problems.append(f"{url}: says 'synthetic' on a site with real labels")
    # A document that is not a page of ours (the OpenAPI JSON, as the browser shows it) is shot as far as
    # the viewport: its whole length at 390 px is tens of thousands of pixels, which a loaded CI machine
    # did not shoot within playwright's 30 s.
    whole = page.evaluate("document.contentType") == "text/html"
    for label, (w, h) in WIDTHS.items():
        page.set_viewport_size({"width": w, "height": h})
        measure = page.evaluate(OVERFLOW)
        page.screenshot(path=SHOTS / f"{tag}-{_name(url)}-{label}.png", full_page=whole)
        if measure["hidden"]:
            problems.append(f"{url} at {w}px: overflow-x hidden on {measure['hidden']}")
        if measure["scrollWidth"] > measure["innerWidth"]:
            problems.append(f"{url} at {w}px: {measure['scrollWidth']}px wide ({measure['wide']})")


def test_every_url_pattern_has_a_visit(db) -> None:
    """A pattern added to the URLconf without a visit in ``visits`` fails here."""
    keys = {key for key, _ in url_patterns() if not _exempt(key)}
    listed = set(visits({k: _Any() for k in ("sqa", "mm", "team", "other", "token", "paper", "sqa_entry",
                                              "personal", "uid", "reset_token", "verify_token")}))
    assert keys - listed == set(), "patterns without a visit"
    assert listed - keys == set(), "visits of patterns that do not exist"


class _Any:
    """Stands in for the fixture's objects when only the keys of ``visits`` are wanted."""

    pk = method_id = 1
    slug = "x"

    def __str__(self) -> str:
        return "x"


@pytest.mark.browser
@pytest.mark.live
def test_no_page_is_wider_than_its_viewport(page, live_server, site):  # noqa: F811
    SHOTS.mkdir(parents=True, exist_ok=True)
    problems: list[str] = []
    for url in SIGNED_OUT:
        _check(page, live_server.url, url, "anon", problems)
    page.goto(f"{live_server.url}/accounts/login/")
    page.fill("input[name=username]", site["user"].username)
    page.fill("input[name=password]", "correct horse battery")
    page.click("button:has-text('Sign in')")
    page.wait_for_selector("text=Sign out")
    for key, urls in visits(site).items():
        for url in urls:
            if key in DOWNLOADS or key in POST_ONLY:
                response = page.request.get(live_server.url + url, max_redirects=0 if key in POST_ONLY else 5)
                expected = 405 if key in POST_ONLY else 200
                if response.status != expected:
                    problems.append(f"{url}: expected {expected}, got {response.status}")
                continue
            _check(page, live_server.url, url, "user", problems)
    assert not problems, "\n".join(problems)


def _box(page, selector: str) -> dict:  # noqa: F811
    return page.locator(selector).first.bounding_box()


@pytest.mark.browser
@pytest.mark.live
def test_the_first_hours_pages_read_right_in_a_browser(page, live_server, site):  # noqa: F811
    """Issue 14's layout items, measured: each page is also photographed under test-artifacts/first-hour/."""
    shots = ARTIFACTS / "first-hour"
    shots.mkdir(parents=True, exist_ok=True)
    base = live_server.url
    # The MMScan toolbar keeps Submit on the line of the filters at 1280 px.
    page.set_viewport_size({"width": 1280, "height": 900})
    page.goto(f"{base}/benchmarks/mmscan-vg/?split=test")
    assert abs(_box(page, "#submit-link")["y"] - _box(page, "select[name=split]")["y"]) < 40
    assert "not open yet" in page.inner_text("#empty-state")  # the demo loads no labels for MMScan test
    page.screenshot(path=shots / "mmscan-empty-desktop.png", full_page=True)
    # An MMScan method page: the chart is under the scores table, never over it; the table shows one
    # IoU threshold (7 of the 14 metrics) and fits without scrolling (issue 27).
    page.goto(f"{base}/methods/{site['mm'].method_id}/")
    table, chart = _box(page, "table.scores"), _box(page, "svg.chart")
    wrap = _box(page, ".card.result .table-wrap")
    assert chart["y"] >= wrap["y"] + wrap["height"] and table["width"] <= wrap["width"], "the table fits its wrap"
    page.screenshot(path=shots / "mmscan-method-desktop.png", full_page=True)
    # Inline code never breaks inside a word ("T|oken") on the API page at 390 px.
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(f"{base}/api/")
    broken = page.evaluate("""() => [...document.querySelectorAll("p code")].flatMap((code) => {
      const text = code.firstChild; if (!text || text.nodeType !== 3) return [];
      return [...text.data.matchAll(/\\S+/g)].filter((m) => {
        const r = document.createRange(); r.setStart(text, m.index); r.setEnd(text, m.index + m[0].length);
        const lines = new Set([...r.getClientRects()].map((b) => Math.round(b.top)));
        return lines.size > 1 && m[0].length < 24;
      }).map((m) => m[0]);
    })""")
    assert broken == []
    page.screenshot(path=shots / "api-phone.png", full_page=True)
    # Compare at 390 px: checkboxes to pick, the table scrolls in its wrapper with its first column in view.
    compare = f"?split=test&e={site['sqa_entry'].pk}&e={site['paper'].pk}"
    page.goto(f"{base}/benchmarks/sqa3d/compare/{compare}")
    assert page.locator("fieldset.picker input[type=checkbox][name=e]:checked").count() == 2
    page.locator("table.compare").evaluate("(t) => t.closest('.table-wrap').scrollLeft = 400")
    first = _box(page, "table.compare tbody th")
    assert first["x"] >= 0, "the row names stay in view while the columns scroll"
    page.screenshot(path=shots / "compare-phone.png", full_page=True)
    # The best-over-time chart at 390 px: its smallest text is still 10 px or more.
    page.goto(f"{base}/benchmarks/sqa3d/")
    smallest = page.evaluate("""() => Math.min(...[...document.querySelectorAll("svg.progress text")]
      .map((t) => t.getBoundingClientRect().height))""")
    assert smallest >= 10
    best_row = page.locator("table.leaderboard tbody tr").first.locator("td.num").first.inner_text()
    assert best_row in page.locator("svg.progress").text_content()
    page.locator("#progress").screenshot(path=shots / "progress-phone.png")
    # The home page: leaders and counts on each card.
    page.goto(f"{base}/")
    assert page.locator(".card.track ol.leaders li").count() >= 3
    page.screenshot(path=shots / "home-phone.png", full_page=True)
    # A 403 for someone signed out: the reason and a sign-in link that comes back.
    page.goto(f"{base}/moderation/")
    assert "maintainers" in page.inner_text("main")
    page.click("text=Sign in >> nth=1")
    page.wait_for_url(re.compile(r"/accounts/login/\?next=/moderation/"))
    page.goto(f"{base}/moderation/")
    page.screenshot(path=shots / "403-phone.png", full_page=True)
