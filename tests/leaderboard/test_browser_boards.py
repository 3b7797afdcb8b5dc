"""Issue 27's layouts in a real browser at 1280 and 390 px: MMScan's board, method,
paper-row and compare pages, SQA3D's board with its reference row, and the moderation
track and health pages. None scrolls sideways, not even inside a table's own wrapper
(the widths test lets a wide table scroll in its ``.table-wrap``; these may not); chart
text stays legible. Issue 35's items at both widths: SQA3D's compare page (its verdicts),
the format page's limits and the submit page's quota fit too; a board ranks one protocol
and lists the others apart, each paper row credited to its method's paper; a split with
synthetic labels says so with its loaded counts wherever its numbers appear, and a real
one never does. Screenshots go to test-artifacts/boards/ for a person to look at."""

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
        (f"/benchmarks/sqa3d/compare/?split=test&e={site['sqa_entry'].pk}&e={site['paper'].pk}", "sqa3d-compare",
         False),
        ("/benchmarks/mmscan-vg/format/", "mmscan-format", False),
        ("/submissions/new/mmscan-vg/", "mmscan-submit", False),
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


def test_a_board_ranks_like_with_like_credits_methods_and_says_what_its_labels_are(page, live_server, site,  # noqa: F811
                                                                                   sqa3d_files):
    """Issue 35 at 1280 and 390 px, on one site: SQA3D's real labels, then the same labels loaded as synthetic."""
    from leaderboard.benchmarks.models import Split
    from leaderboard.benchmarks.services import do_load_labels

    SHOTS.mkdir(parents=True, exist_ok=True)
    base = live_server.url
    split = Split.objects.select_related("benchmark").get(pk=site["sqa_entry"].split_id)
    counts = f"300 questions in {split.labels_scenes} scenes"
    mcan = site["paper"].__class__.objects.get(split=split, name="MCAN")
    compare = f"/benchmarks/sqa3d/compare/?e={site['sqa_entry'].pk}&e={mcan.pk}"
    for label, (w, h) in WIDTHS.items():
        page.set_viewport_size({"width": w, "height": h})
        # Real labels: the loaded counts, never "synthetic"; one protocol ranked, the paper's 706-way
        # classification apart, each row with its protocol and its method's own paper.
        page.goto(f"{base}/benchmarks/sqa3d/")
        assert page.locator("#labels-note").inner_text() == counts
        assert "synthetic" not in page.content().lower()
        assert page.locator("table.leaderboard.ranked tbody tr").count() == 1  # the scored row alone
        row = page.locator("#apart tr", has_text="MCAN")
        assert row.locator(".protocol.other").is_visible() and "706-way" in row.inner_text()
        credit = row.locator("a.method-paper")
        assert credit.is_visible() and credit.inner_text() == "Yu et al., CVPR 2019"
        assert credit.get_attribute("href") == "https://arxiv.org/abs/1906.10770"
        assert "ICLR 2023" in row.locator(".source").inner_text()
        assert page.locator("#rank-all").is_visible()
        page.screenshot(path=SHOTS / f"sqa3d-like-with-like-{label}.png", full_page=True)
        page.goto(f"{base}/benchmarks/sqa3d/?protocol=all")
        assert page.locator("table.leaderboard.ranked tbody tr", has_text="MCAN").locator("td.rank").inner_text() != ""
        assert page.locator("#apart").count() == 0
        # Compare marks the other protocol and the difference that is not like with like.
        page.goto(base + compare)
        assert page.locator("fieldset.picker label", has_text="MCAN").locator(".protocol.other").is_visible()
        marked = (page.locator("table.compare thead .protocol.other") if w > 600 else
                  page.locator("table.compare td[data-label='MCAN (other protocol)']").first)
        assert marked.is_visible(), w
        assert page.locator("#unlike-note").is_visible() and page.locator(".diff.unlike").first.is_visible()
        # The paper row's page names both papers.
        page.goto(f"{base}/entries/{mcan.pk}/")
        assert "Yu et al." in page.inner_text("#method-paper") and "Table 3" in page.inner_text("#paper-meta")
    # Two scored rows with a computed paired test beside a paper row: at 1280 px the verdicts are in
    # view, nothing scrolls in its box (the Verdict column was clipped); at 390 px the tables stack.
    beta = _second_scored_row(site, sqa3d_files)
    three = f"/benchmarks/sqa3d/compare/?e={site['sqa_entry'].pk}&e={beta.pk}&e={mcan.pk}"
    for label, (w, h) in WIDTHS.items():
        page.set_viewport_size({"width": w, "height": h})
        page.goto(base + three)
        verdict = page.locator("table.significance td.not-signif, table.significance td.signif").first
        assert verdict.is_visible() and "(p = 0.412)" in verdict.inner_text()
        wrap = page.locator("table.significance").locator("xpath=..").bounding_box()
        box = verdict.bounding_box()
        assert box["x"] + box["width"] <= wrap["x"] + wrap["width"] + 1, (w, box, wrap)
        fits = page.evaluate(FITS)
        assert fits["page"] <= 0 and not fits["wraps"], (w, fits)
        page.screenshot(path=SHOTS / f"sqa3d-compare-three-{label}.png", full_page=True)
    # The same labels, loaded as synthetic: every page that shows the split's numbers says so.
    do_load_labels(split, sqa3d_files["labels"], synthetic=True)
    for label, (w, h) in WIDTHS.items():
        page.set_viewport_size({"width": w, "height": h})
        for url in ["/benchmarks/sqa3d/", "/", f"/methods/{site['sqa'].method_id}/", compare, f"/entries/{mcan.pk}/"]:
            page.goto(base + url)
            note = page.locator(".card.track[data-track=sqa3d] .labels-note" if url == "/" else ".labels-note").first
            assert note.locator(".badge.synthetic").is_visible(), (url, w)
            assert "synthetic labels" in note.inner_text() and counts in note.inner_text(), (url, w)
            if url == "/benchmarks/sqa3d/":
                apart = page.locator("#apart")
                assert "on the real split" in apart.locator("h2").inner_text() and apart.locator("tr", has_text="MCAN").count() == 1
                page.screenshot(path=SHOTS / f"sqa3d-synthetic-board-{label}.png", full_page=True)
        fits = page.evaluate(FITS)
        assert fits["page"] <= 0, (w, fits)


def _second_scored_row(world, sqa3d_files):
    """A second published SQA3D method with a long name, and the paired test of it with the first as a
    scoring worker would have recorded it."""
    import io

    from django.utils import timezone

    from evaluation_workers.tracks import get_track
    from leaderboard.rankings.models import LeaderboardEntry, PairedTest
    from leaderboard.rankings.paired_tests import pair_of
    from leaderboard.submissions import lifecycle, services
    from leaderboard.submissions.models import Method

    user, name = world["user"], "BetaQA-also-with-a-rather-long-name"
    predictions = sqa3d_files["predictions"]
    sub = services.check_create_submission(user=user, track="sqa3d", split="test", method_name=name,
                                           file=io.BytesIO(predictions.read_bytes()), file_name=predictions.name)
    result = get_track("sqa3d").score(sqa3d_files["labels"], predictions, lambda f, m="": None)
    lifecycle.record_result(submission_id=sub.pk, attempt=1, result=result)
    Method.objects.filter(name=name).update(description="Another model.", authors="B. Author", uses_extra_data=False)
    services.check_publish(user, sub)
    beta = LeaderboardEntry.objects.get(submission=sub)
    a, b = pair_of(world["sqa_entry"].result_id, beta.result_id)
    finding = {"test": "paired-bootstrap-by-scene", "difference": 0.012, "p_value": 0.412, "interval": [-0.02, 0.04]}
    PairedTest.objects.update_or_create(result_a_id=a, result_b_id=b, defaults={
        "findings": {"EM": finding}, "resamples": 1000, "computed_at": timezone.now()})
    return beta
