"""Issue 27's layouts in a real browser at 1280 and 390 px: MMScan's board, method,
paper-row and compare pages, SQA3D's board with its reference row, and the moderation
track and health pages. None scrolls sideways, not even inside a table's own wrapper
(the widths test lets a wide table scroll in its ``.table-wrap``; these may not); chart
text stays legible. Screenshots go to test-artifacts/boards/ for a person to look at."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from tests.leaderboard.test_browser import ARTIFACTS, page  # noqa: F401  (fixture)
from tests.leaderboard.test_browser_widths import site  # noqa: F401  (fixture)

pytestmark = [pytest.mark.browser, pytest.mark.live]
SHOTS = ARTIFACTS / "boards"
WIDTHS = {"desktop": (1280, 900), "phone": (390, 844)}

FITS = """() => ({
  page: document.documentElement.scrollWidth - innerWidth,
  wraps: [...document.querySelectorAll(".table-wrap")].filter((w) => w.offsetParent !== null
      && w.scrollWidth > w.clientWidth + 1).map((w) => `${w.querySelector("table").className}: `
      + `${w.scrollWidth} px in ${w.clientWidth}`),
})"""
# The size a reader sees each chart's text at: its font size times the drawing's scale.
CHART_TEXT = """() => [...document.querySelectorAll("svg.chart")].filter((svg) => svg.getBoundingClientRect().width)
  .flatMap((svg) => { const scale = svg.getBoundingClientRect().width / svg.viewBox.baseVal.width;
    return [...svg.querySelectorAll("text")].map((t) => parseFloat(getComputedStyle(t).fontSize) * scale); })"""


@pytest.fixture
def worker_of_every_queue() -> Iterator[None]:
    """A scoring worker's presence as it writes it (12 queues: the health page's widest row), gone after
    the test: other tests on the same Redis (CI's) read which workers serve a queue."""
    from evaluation_workers import contracts
    from evaluation_workers.worker import presence
    from leaderboard.submissions import broker, lifecycle

    info = presence.describe("eval@a-rather-long-host-name.example.org", list(lifecycle.all_queues()))
    broker.client().set(contracts.worker_key(info["name"]), json.dumps(info), ex=300)
    yield
    broker.client().delete(contracts.worker_key(info["name"]))


def _measure(page, base: str, url: str, name: str, problems: list[str], *, open_details: bool = False) -> None:  # noqa: F811
    page.set_viewport_size({"width": 1280, "height": 900})
    page.goto(base + url)
    if open_details:
        page.evaluate("() => document.querySelectorAll('details').forEach((d) => d.open = true)")
    for label, (w, h) in WIDTHS.items():
        page.set_viewport_size({"width": w, "height": h})
        fits = page.evaluate(FITS)
        if fits["page"] > 0 or fits["wraps"]:
            problems.append(f"{url} at {w} px: {fits['page']} px too wide; scrolling tables: {fits['wraps']}")
        sizes = page.evaluate(CHART_TEXT)
        if sizes and min(sizes) < (10 if label == "phone" else 11):
            problems.append(f"{url} at {w} px: chart text drawn at {min(sizes):.1f} px")
        page.screenshot(path=SHOTS / f"{name}-{label}.png", full_page=True)


def test_boards_charts_and_moderation_pages_fit_both_widths(page, live_server, site,  # noqa: F811
                                                           worker_of_every_queue):
    from leaderboard.rankings.models import LeaderboardEntry

    SHOTS.mkdir(parents=True, exist_ok=True)
    base = live_server.url
    page.goto(f"{base}/accounts/login/")
    page.fill("input[name=username]", site["user"].username)
    page.fill("input[name=password]", "correct horse battery")
    page.click("button:has-text('Sign in')")
    page.wait_for_selector("text=Sign out")
    mm_paper = LeaderboardEntry.objects.get(split__benchmark__track="mmscan-vg", name="EmbodiedScan")
    mm_method = site["mm"].method_id
    problems: list[str] = []
    for url, name, details in [
        ("/benchmarks/mmscan-vg/?split=val", "mmscan-board", False),
        ("/benchmarks/mmscan-vg/?split=val&iou=0.5", "mmscan-board-iou-0.5", False),
        (f"/methods/{mm_method}/", "mmscan-method", True),
        (f"/methods/{mm_method}/?iou=0.5", "mmscan-method-iou-0.5", True),
        (f"/entries/{mm_paper.pk}/", "mmscan-paper-row", False),
        (f"/benchmarks/mmscan-vg/compare/?split=val&e={site['mm_entry'].pk}&e={mm_paper.pk}", "mmscan-compare",
         False),
        ("/benchmarks/sqa3d/", "sqa3d-board", False),
        (f"/methods/{site['sqa'].method_id}/", "sqa3d-method", False),
        ("/benchmarks/openscan/", "openscan-board", False),
        ("/moderation/tracks/mmscan-vg/", "moderation-track", False),
        ("/moderation/health/", "moderation-health", False),
    ]:
        _measure(page, base, url, name, problems, open_details=details)
    assert not problems, "\n".join(problems)


def test_the_reference_row_reads_apart_and_the_live_board_shows_its_scores(page, live_server, site):  # noqa: F811
    base = live_server.url
    page.set_viewport_size({"width": 1280, "height": 900})
    page.goto(f"{base}/benchmarks/sqa3d/")
    ranked = page.locator("table.leaderboard.ranked").inner_text()
    assert "Human (amateur)" not in ranked
    reference = page.locator("#references")
    assert "Human (amateur)" in reference.inner_text() and "not ranked" in reference.inner_text()
    assert page.locator("svg.progress .reference").count() == 1
    assert "Human (amateur)" in page.locator("svg.progress").text_content()
    # At 390 px a board row is a block: the method on one line, its scores under it.
    page.set_viewport_size({"width": 390, "height": 844})
    row = page.locator("table.leaderboard.ranked tbody tr").first
    method, score = row.locator("td.method").bounding_box(), row.locator("td.num").first.bounding_box()
    assert score["y"] >= method["y"] + method["height"] - 1 and method["width"] > 250
    # The moderation track page at 1280 px: every column of the live board in view.
    page.goto(f"{base}/accounts/login/")
    page.set_viewport_size({"width": 1280, "height": 900})
    page.fill("input[name=username]", site["user"].username)
    page.fill("input[name=password]", "correct horse battery")
    page.click("button:has-text('Sign in')")
    page.wait_for_selector("text=Sign out")
    page.goto(f"{base}/moderation/tracks/sqa3d/")
    shown = page.locator("table.live-board th", has_text="shown now").bounding_box()
    wrap = page.locator("table.live-board").locator("xpath=..").bounding_box()
    assert shown["x"] + shown["width"] <= wrap["x"] + wrap["width"]
    assert page.locator("table.live-board td.num").first.is_visible()
