"""Every public page and a moderation action in a real browser, at desktop and
phone widths. Screenshots go to test-artifacts/pages/ for a person to look at."""

from __future__ import annotations

import io
import re

import pytest

from tests.leaderboard.test_browser import ARTIFACTS, page  # noqa: F401  (fixture)

pytestmark = [pytest.mark.browser]
SHOTS = ARTIFACTS / "pages"
WIDTHS = {"desktop": (1280, 900), "phone": (390, 844)}


def shoot(page, name: str) -> None:  # noqa: F811
    SHOTS.mkdir(parents=True, exist_ok=True)
    for label, (w, h) in WIDTHS.items():
        page.set_viewport_size({"width": w, "height": h})
        page.screenshot(path=SHOTS / f"{name}-{label}.png", full_page=True)
    page.set_viewport_size({"width": 1280, "height": 900})


@pytest.fixture
def board(transactional_db, owner, sqa3d_split, sqa3d_files, sent_tasks):
    """Paper rows plus two scored, published methods."""
    from evaluation_workers.tracks import get_track
    from leaderboard.rankings.services import do_seed_paper_rows
    from leaderboard.submissions import lifecycle, services
    from leaderboard.submissions.models import Method

    do_seed_paper_rows("sqa3d")
    result = get_track("sqa3d").score(sqa3d_files["labels"], sqa3d_files["predictions"], lambda f, m="": None)
    made = []
    for name, shift in (("AlphaQA", 0.0), ("BetaQA", -0.05)):
        sub = services.check_create_submission(user=owner, track="sqa3d", split="test", method_name=name,
                                               file=io.BytesIO(sqa3d_files["predictions"].read_bytes()),
                                               file_name="p.json")
        shifted = {**result, "metrics": {k: v + shift for k, v in result["metrics"].items()},
                   "breakdown": {g: {k: (v + shift if k != "count" else v) for k, v in d.items()}
                                 for g, d in result["breakdown"].items()}}
        lifecycle.record_result(submission_id=sub.pk, attempt=1, result=shifted)
        Method.objects.filter(name=name).update(description="A situated QA model.", authors="A. Author",
                                                uses_extra_data=False, paper_url="https://example.org/p")
        services.check_publish(owner, sub)
        made.append(sub)
    return made


def test_public_pages_sort_switch_compare_and_charts(page, live_server, board):  # noqa: F811
    page.goto(f"{live_server.url}/")
    shoot(page, "home")
    page.click("text=SQA3D")
    page.wait_for_selector("table.leaderboard")
    shoot(page, "leaderboard")

    page.click("th a[data-column='Which/EM']")
    page.wait_for_url(re.compile(r"sort=Which%2FEM"))
    values = [float(t) for t in page.locator("table.leaderboard tbody tr td:nth-child(9)").all_inner_texts()]
    assert values == sorted(values, reverse=True)

    page.select_option("select[name=metric]", "EM_R")
    page.wait_for_url(re.compile(r"metric=EM_R"))
    assert page.locator("tr.sub th.num").inner_text() == "EM_R"
    page.select_option("select[name=paper]", "0")
    page.wait_for_url(re.compile(r"paper=0"))
    assert page.locator("tr.paper").count() == 0
    assert page.locator("table.leaderboard tbody tr").count() == 2
    shoot(page, "leaderboard-filtered")

    page.check("input[name=e] >> nth=0")
    page.check("input[name=e] >> nth=1")
    page.click("#compare-button")
    page.wait_for_selector("table.compare")
    assert "(-5.0)" in page.inner_text("table.compare")
    shoot(page, "compare")

    page.goto(f"{live_server.url}/benchmarks/sqa3d/")
    page.click("text=AlphaQA")
    page.wait_for_selector("svg.chart")
    assert page.locator("svg.chart rect").count() >= 18  # 6 types x (method, best, median)
    shoot(page, "method")

    page.goto(f"{live_server.url}/api/")
    shoot(page, "api-docs")


def test_a_maintainer_hides_a_row_and_the_audit_log_records_it(page, live_server, board, maintainer):  # noqa: F811
    page.goto(f"{live_server.url}/accounts/login/")
    page.fill("input[name=username]", maintainer.username)
    page.fill("input[name=password]", "correct horse battery")
    page.click("button:has-text('Sign in')")
    page.click("nav >> text=Moderation")
    page.wait_for_selector("text=Moderation desk")
    shoot(page, "moderation-desk")
    page.click(f"a[href='/moderation/submissions/{board[1].pk}/']")
    page.fill("#moderate input[name=reason]", "Duplicate of AlphaQA")
    page.click("button:has-text('Hide from leaderboard')")
    page.wait_for_selector("text=Duplicate of AlphaQA")
    assert "(BetaQA) is hidden: its row is off the leaderboard" in page.inner_text(".alert.success")
    shoot(page, "moderation-submission")
    page.goto(f"{live_server.url}/benchmarks/sqa3d/?paper=0")
    assert page.locator("table.leaderboard tbody tr").count() == 1
    page.goto(f"{live_server.url}/moderation/audit/")
    assert "Duplicate of AlphaQA" in page.inner_text("table.audit")
    shoot(page, "moderation-audit")
    page.goto(f"{live_server.url}/moderation/tracks/sqa3d/")
    shoot(page, "moderation-track")
