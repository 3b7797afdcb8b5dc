"""A researcher in a real browser: sign in, upload, watch the status, publish.

Drives the system's Chromium (Debian package) through Playwright against a live
server with the real pipeline behind it. Screenshots go to test-artifacts/.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.live]
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture
def page(monkeypatch):
    if CHROMIUM is None:
        pytest.skip("no chromium on PATH (install Debian's chromium package)")
    sync_api = pytest.importorskip("playwright.sync_api")
    # Playwright's sync API runs an event loop in this thread; the ORM calls the
    # test makes between browser steps are still synchronous.
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    ARTIFACTS.mkdir(exist_ok=True)
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=[
            "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync"])
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.set_default_timeout(30_000)
        yield page
        browser.close()


def test_a_researcher_uploads_watches_scoring_and_publishes(page, live_server, live_pipeline, owner,
                                                            sqa3d_split, sqa3d_files):
    from evaluation_workers.tracks import get_track
    from leaderboard.benchmarks.bundle_apply import load_bundled_paper_rows

    load_bundled_paper_rows("sqa3d")
    expected = get_track("sqa3d").score(sqa3d_files["labels"], sqa3d_files["predictions"], lambda f, m="": None)
    em = f"{expected['metrics']['EM'] * 100:.1f}"

    page.goto(f"{live_server.url}/")
    page.screenshot(path=ARTIFACTS / "home.png", full_page=True)
    page.click("text=Sign in")
    page.fill("input[name=username]", owner.username)
    page.fill("input[name=password]", "correct horse battery")
    page.click("button:has-text('Sign in')")
    page.goto(f"{live_server.url}/submissions/new/sqa3d/")
    page.fill("input[name=method_name]", "BrowserNet")
    page.set_input_files("input[name=file]", str(sqa3d_files["predictions"]))
    page.screenshot(path=ARTIFACTS / "submit.png", full_page=True)
    page.click("button:has-text('Upload and score')")

    page.wait_for_url(re.compile(r"/submissions/\d+/$"))
    page.wait_for_selector("#status.finished", timeout=60_000)
    page.wait_for_selector("#scores")
    assert page.inner_text("td[data-metric=EM]") == em
    page.screenshot(path=ARTIFACTS / "submission.png", full_page=True)

    from leaderboard.submissions.models import Method
    from tests.leaderboard.conftest import describe_method

    describe_method(Method.objects.get(name="BrowserNet"))
    page.reload()
    page.click("button:has-text('Publish on the leaderboard')")
    page.goto(f"{live_server.url}/benchmarks/sqa3d/")
    row = page.locator("tr", has_text="BrowserNet")
    assert em in row.inner_text()
    assert page.locator("tr.paper").count() == 11
    page.screenshot(path=ARTIFACTS / "leaderboard.png", full_page=True)
    page.set_viewport_size({"width": 390, "height": 844})
    page.screenshot(path=ARTIFACTS / "leaderboard-phone.png", full_page=True)
    assert os.path.getsize(ARTIFACTS / "leaderboard.png") > 0
