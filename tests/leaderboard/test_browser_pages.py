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
    from leaderboard.benchmarks.bundle_apply import load_bundled_paper_rows
    from leaderboard.submissions import lifecycle, services
    from leaderboard.submissions.models import Method

    load_bundled_paper_rows("sqa3d")
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
    values = [float(t) for t in page.locator("table.leaderboard.ranked tbody tr td:nth-child(9)").all_inner_texts()]
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


@pytest.fixture
def anonymous_board(board, owner, sqa3d_files):
    """The board plus ReviewQA, published by alice's "Blind Lab" as Anonymous (under review)."""
    from evaluation_workers.tracks import get_track
    from leaderboard.accounts.services import do_create_team
    from leaderboard.benchmarks.bundle_apply import load_bundled_paper_rows
    from leaderboard.submissions import lifecycle, services
    from leaderboard.submissions.models import Method

    load_bundled_paper_rows("mmscan-vg")
    lab = do_create_team(owner, "Blind Lab")
    sub = services.check_create_submission(user=owner, track="sqa3d", split="test", method_name="ReviewQA",
                                           file=io.BytesIO(sqa3d_files["predictions"].read_bytes()),
                                           file_name="p.json", team=lab)
    result = get_track("sqa3d").score(sqa3d_files["labels"], sqa3d_files["predictions"], lambda f, m="": None)
    lifecycle.record_result(submission_id=sub.pk, attempt=1, result=result)
    Method.objects.filter(pk=sub.method_id).update(description="Situated QA under double-blind review.",
                                                   authors="B. Hidden", uses_extra_data=False,
                                                   paper_url="https://example.org/hidden")
    services.check_publish(owner, sub, anonymous=True)
    return sub


def sign_in(page, live_server, user) -> None:  # noqa: F811
    page.context.clear_cookies()
    page.goto(f"{live_server.url}/accounts/login/")
    page.fill("input[name=username]", user.username)
    page.fill("input[name=password]", "correct horse battery")
    page.click("button:has-text('Sign in')")


def test_an_anonymous_row_and_paper_rows_that_say_what_they_are(page, live_server, anonymous_board, owner,  # noqa: F811
                                                               maintainer):
    from leaderboard.rankings.models import LeaderboardEntry

    sub = anonymous_board
    page.goto(f"{live_server.url}/benchmarks/sqa3d/")
    row = page.locator("tr", has_text="ReviewQA")
    assert "Anonymous (under review)" in row.inner_text() and "Blind Lab" not in page.content()
    assert "EM on the open answer" in row.inner_text()
    human = page.locator("tr", has_text="Human (amateur)")
    assert "ICLR 2023" in human.inner_text() and "706-way answer classification" in human.inner_text()
    assert human.locator("a.venue").get_attribute("href") == "https://arxiv.org/abs/2210.07474"
    shoot(page, "leaderboard-anonymous-and-paper-rows")

    page.click("text=ReviewQA")
    page.wait_for_selector("#anonymous")
    assert "Blind Lab" not in page.content() and "B. Hidden" not in page.content()
    assert page.locator("text=BibTeX").count() == 0
    shoot(page, "method-anonymous")

    paper = LeaderboardEntry.objects.get(name="Human (amateur)")
    page.goto(f"{live_server.url}/entries/{paper.pk}/")
    assert "published 2022-10-14" in page.inner_text("#paper-meta")
    shoot(page, "paper-row")
    page.goto(f"{live_server.url}/benchmarks/mmscan-vg/?split=val")
    # The devkit's IoU is not this service's: its rows are listed apart, each saying its protocol (issue 35).
    assert page.locator("tr.paper").count() == 7 and "devkit (pytorch3d) IoU" in page.inner_text("#apart")
    shoot(page, "leaderboard-mmscan-devkit-rows")

    sign_in(page, live_server, maintainer)  # maintainers see who it is
    page.goto(f"{live_server.url}/moderation/submissions/{sub.pk}/")
    assert "team Blind Lab" in page.inner_text("body") and "public as Anonymous" in page.inner_text("body")
    shoot(page, "moderation-anonymous")

    sign_in(page, live_server, owner)  # the owner reveals it
    page.goto(f"{live_server.url}/submissions/methods/{sub.method_id}/")
    page.wait_for_selector("#anonymity")
    shoot(page, "method-before-reveal")
    page.click("#reveal-button")
    page.wait_for_selector(".alert.success")
    page.context.clear_cookies()
    page.goto(f"{live_server.url}/methods/{sub.method_id}/")
    assert "by team Blind Lab" in page.inner_text("body") and "B. Hidden" in page.inner_text("body")
    shoot(page, "method-revealed")


def test_the_drilldown_per_attribute_and_per_sub_class(page, live_server, transactional_db, owner, sent_tasks,  # noqa: F811
                                                       tmp_path, settings):
    from evaluation_workers.synthetic import mmscan_vg, openscan
    from evaluation_workers.tracks import get_track
    from leaderboard.benchmarks.bundle_apply import load_bundled_benchmarks
    from leaderboard.benchmarks.models import Split
    from leaderboard.benchmarks.services import do_load_labels
    from leaderboard.submissions import lifecycle, services
    from leaderboard.submissions.models import Method

    load_bundled_benchmarks()
    os_labels, os_predictions = openscan.write_demo(tmp_path / "openscan", "val")
    mm_labels, mm_predictions = mmscan_vg.write_demo(tmp_path / "mmscan" / "labels", "val")
    mm_predictions = mm_predictions.rename(tmp_path / mm_predictions.name)
    methods = {}
    for track, labels, predictions in (("openscan", os_labels, os_predictions), ("mmscan-vg", mm_labels,
                                                                                  mm_predictions)):
        split = Split.objects.select_related("benchmark").get(benchmark__track=track, name="val")
        do_load_labels(split, labels)
        result = get_track(track).score(labels, predictions, lambda f, m="": None)
        sub = services.check_create_submission(user=owner, track=track, split="val", method_name=f"Drill-{track}",
                                               file=io.BytesIO(predictions.read_bytes()), file_name=predictions.name)
        lifecycle.record_result(submission_id=sub.pk, attempt=1, result=result)
        Method.objects.filter(pk=sub.method_id).update(description="d", authors="A. Author", uses_extra_data=False)
        services.check_publish(owner, sub)
        methods[track] = sub.method_id
    Split.objects.filter(benchmark__track="openscan").update(labels_public=True)  # its val labels are published
    page.goto(f"{live_server.url}/methods/{methods['openscan']}/")
    page.click("details.drilldown summary")
    assert page.locator("table.drilldown tbody tr").count() == 341
    assert "count" in page.inner_text("table.drilldown thead")
    shoot(page, "method-drilldown-attributes-public")
    settings.DRILLDOWN_MIN_GROUP_SIZE = 40
    page.goto(f"{live_server.url}/methods/{methods['mmscan-vg']}/")
    page.click("details.drilldown summary")
    assert "count" not in page.inner_text("table.drilldown thead")
    assert "at least 40 prompts are shown, without counts" in page.inner_text("details.drilldown")
    shoot(page, "method-drilldown-sub-classes-hidden")
