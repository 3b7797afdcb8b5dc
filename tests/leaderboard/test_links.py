"""Every internal link answers 2xx or 3xx, for an anonymous visitor, a researcher and a maintainer, and
no page it reaches names a path of this repository (``tests/``, ``evaluation_workers/``, a ``.py``).

A crawl from the home page follows every same-site ``href`` of the pages it reaches (redirects
too), bounded: each view is visited at most ``PER_VIEW`` times (a board's sort and filter links
are many URLs of one view), and at most ``MAX_PAGES`` pages in all. A link with a fragment
(``/metrics/#sqa3d``) must also land on an element with that id.
"""

from __future__ import annotations

import io
import re
from collections import Counter, deque
from html.parser import HTMLParser
from typing import Any
from urllib.parse import urldefrag, urljoin, urlsplit

import pytest
from django.test import Client
from django.urls import Resolver404, path, resolve

from leaderboard import urls as site_urls

SITE = "http://testserver"  # the test client's host
PER_VIEW = 12
MAX_PAGES = 600


class _Links(HTMLParser):
    """The ``href`` of every ``<a>`` and ``<link>``, and every ``id`` of the page."""

    def __init__(self) -> None:
        super().__init__()
        self.hrefs: list[str] = []
        self.ids: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if found.get("id"):
            self.ids.add(str(found["id"]))
        if tag in ("a", "link") and found.get("href"):
            self.hrefs.append(str(found["href"]))


# What a visitor can never use: paths inside this repository. (``manage.py`` is the command a maintainer
# runs, as the moderation desk says, not a file to read.)
INTERNAL = ("tests/", "evaluation_workers/", ".py")
COMMANDS = ("manage.py",)


class _Visible(HTMLParser):
    """A page's text and internal hrefs, leaving out what lies inside links to other sites (a path
    such as ScanNet's ``evaluate_semantic_instance.py`` is fine as a link to ScanNet's repository)."""

    def __init__(self) -> None:
        super().__init__()
        self.parts: list[str] = []
        self.external = 0  # depth of <a href="https://..."> we are in

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        href = dict(attrs).get("href") or ""
        if tag == "a" and re.match(r"https?://", href):
            self.external += 1
        elif href:
            self.parts.append(href)

    def handle_endtag(self, tag: str) -> None:
        if tag == "a" and self.external:
            self.external -= 1

    def handle_data(self, data: str) -> None:
        if not self.external:
            self.parts.append(data)


def internal_paths(html: str) -> list[str]:
    """The lines of a page's text that name a path of this repository."""
    parser = _Visible()
    parser.feed(html)
    lines = "\n".join(parser.parts).splitlines()
    return [line.strip() for line in lines
            if any(word in re.sub("|".join(map(re.escape, COMMANDS)), "", line) for word in INTERNAL)]


def _parse(html: str) -> _Links:
    parser = _Links()
    parser.feed(html)
    return parser


def _view(path: str) -> str:
    try:
        return resolve(path).view_name
    except Resolver404:
        return path  # an unknown path is its own view: it is fetched, and answers 404


def crawl(client: Client, start: str = "/") -> dict[str, Any]:
    """Fetch every same-site link reachable from ``start``; the broken ones with the page that links them."""
    queue: deque[tuple[str, str]] = deque([(start, "(start)")])
    seen: set[str] = set()
    per_view: Counter[str] = Counter()
    ids: dict[str, set[str] | None] = {}  # page -> its ids (None: not HTML)
    fragments: list[tuple[str, str, str]] = []  # (page, fragment, linked from)
    broken: list[str] = []
    paths: list[str] = []  # pages naming a path of the repository
    while queue and len(seen) < MAX_PAGES:
        url, source = queue.popleft()
        if url in seen:
            continue
        path = urlsplit(url).path
        view = _view(path)
        if per_view[view] >= PER_VIEW:
            continue
        seen.add(url)
        per_view[view] += 1
        response = client.get(url)
        if response.status_code >= 400:
            broken.append(f"{url} -> {response.status_code} (linked from {source})")
            continue
        if 300 <= response.status_code < 400:
            queue.append((urljoin(SITE + url, response["Location"]).removeprefix(SITE), url))
            continue
        if not response["Content-Type"].startswith("text/html") or path.startswith("/admin/"):
            ids[url] = None  # a file, or Django's admin: fetched, not read
            continue
        html = response.content.decode()
        page = _parse(html)
        ids[url] = page.ids
        if found := internal_paths(html):
            paths.append(f"{url}: {found[:3]}")
        for href in page.hrefs:
            target, fragment = urldefrag(urljoin(SITE + url, href))
            parts = urlsplit(target)
            if f"{parts.scheme}://{parts.netloc}" != SITE:
                continue  # another site, mailto:, javascript:
            target = target.removeprefix(SITE)
            if fragment:
                fragments.append((target, fragment, url))
            queue.append((target, url))
    for target, fragment, source in fragments:
        known = ids.get(target)
        if known is not None and fragment not in known:
            broken.append(f"{target}#{fragment}: no element with that id (linked from {source})")
    return {"broken": broken, "paths": paths, "visited": seen, "views": per_view}


@pytest.fixture
def world(sqa3d_split: Any, sqa3d_files: dict[str, Any], owner: Any, maintainer: Any, sent_tasks: Any,
          tmp_path: Any) -> dict[str, Any]:
    """Every track with its paper rows; a published and a failed SQA3D submission, a published
    MMScan one, so that boards, method and entry pages, submissions and the desk have rows."""
    from evaluation_workers.synthetic import mmscan_vg
    from evaluation_workers.tracks import get_track
    from leaderboard.benchmarks.bundle_apply import load_bundled_paper_rows
    from leaderboard.benchmarks.models import Split
    from leaderboard.benchmarks.services import do_load_labels
    from leaderboard.submissions import lifecycle, services
    from tests.leaderboard.conftest import describe_method

    for track in ("sqa3d", "openscan", "mmscan-vg"):
        load_bundled_paper_rows(track)
    mm_split = Split.objects.get(benchmark__track="mmscan-vg", name="val")
    mm_labels, written = mmscan_vg.write_demo(tmp_path / "mmscan", "val")
    mm_predictions = written.rename(tmp_path / written.name)
    do_load_labels(mm_split, mm_labels.parent)

    def publish(track: str, split: str, name: str, predictions: Any, labels: Any) -> Any:
        result = get_track(track).score(labels, predictions, lambda f, m="": None)
        sub = services.check_create_submission(user=owner, track=track, split=split, method_name=name,
                                               file=io.BytesIO(predictions.read_bytes()), file_name=predictions.name)
        lifecycle.record_result(submission_id=sub.pk, attempt=1, result=result)
        describe_method(sub.method)
        services.check_publish(owner, sub)
        return sub

    publish("sqa3d", "test", "AlphaQA", sqa3d_files["predictions"], sqa3d_files["labels"])
    publish("mmscan-vg", "val", "GroundNet", mm_predictions, mm_labels.parent)
    failed = services.check_create_submission(user=owner, track="sqa3d", split="test", method_name="Broken",
                                              file=io.BytesIO(b"not json"), file_name="p.json")
    assert failed.status == "failed"
    return {"researcher": owner, "maintainer": maintainer}


@pytest.mark.parametrize("role", ["anonymous", "researcher", "maintainer"])
def test_every_internal_link_answers_2xx_or_3xx(client: Client, world: dict[str, Any], role: str) -> None:
    if role != "anonymous":
        client.force_login(world[role])
    found = crawl(client)
    assert not found["broken"], "\n".join(found["broken"])
    assert not found["paths"], "\n".join(found["paths"])
    # The crawl reached the pages it is meant to check (a crawl stopped at the home page proves nothing).
    reached = set(found["views"])
    assert {"benchmarks:home", "rankings:leaderboard", "benchmarks:format", "benchmarks:metrics",
            "rankings:method", "api-docs"} <= reached, reached
    if role != "anonymous":
        assert "submissions:mine" in reached, reached
    if role == "researcher":
        assert "submissions:detail" in reached, reached  # the published one and the failed one
    if role == "maintainer":
        assert {"moderation:desk", "moderation:submission"} <= reached, reached


def _bad_home(request: Any) -> Any:
    from django.http import HttpResponse

    return HttpResponse('<a href="/nope/">x</a> <a href="/api/#nowhere">y</a> <a href="/api/#here">w</a> '
                        '<a href="https://example.org/">z</a>')


def _api(request: Any) -> Any:
    from django.http import HttpResponse

    return HttpResponse('<h1 id="here">API</h1><p>Every case is in <code>tests/hostile/</code>.</p>')


# The URLconf of the test below (``pytest.mark.urls`` points here): the site's, under two pages of its own.
urlpatterns = [path("", _bad_home), path("api/", _api), *site_urls.urlpatterns]


@pytest.mark.urls("tests.leaderboard.test_links")
def test_the_crawl_reports_a_broken_link_a_missing_anchor_and_a_repository_path(client: Client) -> None:
    """The crawl itself can fail: a page linking a 404 and an anchor that is not there, a page naming a path."""
    found = crawl(client)
    assert found["broken"] == ["/nope/ -> 404 (linked from /)",
                               "/api/#nowhere: no element with that id (linked from /)"]
    assert found["paths"] == ["/api/: ['tests/hostile/']"]
