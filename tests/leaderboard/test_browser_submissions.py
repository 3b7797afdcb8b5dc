"""The submission pages in a real browser at 1280 and 390 px (issue 27): "My submissions", a failed
submission's page, a queued one's and a team's history fit their width (no sideways scroll, in the
page or in their table), keep metric names and dates whole and show no raw backtick. Screenshots
go to test-artifacts/submissions/."""

from __future__ import annotations

import io
from typing import Any

import pytest

from tests.leaderboard.test_browser import ARTIFACTS, page  # noqa: F401  (fixture)

pytestmark = [pytest.mark.browser, pytest.mark.live]
SHOTS = ARTIFACTS / "submissions"
WIDTHS = {"desktop": (1280, 900), "phone": (390, 844)}
LONG_MESSAGE = ("predictions.json: item 3 (`sample_id` 'scene0011_00__VG_inter_attr_OR__1'): Expected `pred_scores` "
                "to have one score per box, but got 14 scores for 1 box; `lb validate --track mmscan-vg "
                "predictions.json` checks a file offline")

MEASURE = """() => {
  const html = document.documentElement;
  const wraps = [...document.querySelectorAll(".table-wrap")].map((wrap) => ({
    scroll: wrap.scrollWidth, client: wrap.clientWidth,
    created: (() => { const th = [...wrap.querySelectorAll("th")].find((t) => t.textContent.startsWith("Created"));
                      return th && getComputedStyle(th).display !== "none"
                        ? th.getBoundingClientRect().right <= wrap.getBoundingClientRect().right + 1 : null; })()}));
  const broken = [...document.querySelectorAll(".metric, td.date, .status")].filter((el) =>
    new Set([...el.getClientRects()].map((r) => Math.round(r.top))).size > 1).map((el) => el.textContent);
  const text = [...document.querySelectorAll("main")].map((m) => m.innerText).join("");
  return {page: html.scrollWidth, width: innerWidth, wraps, broken, backticks: (text.match(/`/g) || []).length};
}"""


@pytest.fixture
def submissions(transactional_db, owner, sqa3d_split, sqa3d_files, sent_tasks, tmp_path) -> dict[str, Any]:
    """A finished MMScan submission (primary gTop-1@0.25), a failed one with a long message, a queued one."""
    from evaluation_workers.synthetic import mmscan_vg
    from evaluation_workers.tracks import get_track
    from leaderboard.accounts.services import personal_team
    from leaderboard.benchmarks.models import Split
    from leaderboard.benchmarks.services import do_load_labels
    from leaderboard.submissions import lifecycle, services
    from leaderboard.submissions.models import Submission

    labels, predictions = mmscan_vg.write_demo(tmp_path / "mmscan", "val")
    predictions = predictions.rename(tmp_path / "grounding_predictions_with_a_long_name_val.json")
    do_load_labels(Split.objects.get(benchmark__track="mmscan-vg", name="val"), labels.parent)

    def create(track: str, split: str, method: str, data: bytes, name: str) -> Submission:
        return services.check_create_submission(user=owner, track=track, split=split, method_name=method,
                                                file=io.BytesIO(data), file_name=name)

    done = create("mmscan-vg", "val", "GroundingTransformerWithAVeryLongMethodName", predictions.read_bytes(),
                  predictions.name)
    result = get_track("mmscan-vg").score(labels.parent, predictions, lambda f, m="": None)
    lifecycle.record_result(submission_id=done.pk, attempt=1, result=result)
    bad = create("mmscan-vg", "val", "BrokenNet", b"not json", "predictions.json")
    Submission.objects.filter(pk=bad.pk).update(status_detail=LONG_MESSAGE)
    queued = create("sqa3d", "test", "WaitingNet", sqa3d_files["predictions"].read_bytes(), "answers.json")
    return {"done": done, "bad": bad, "queued": queued, "team": personal_team(owner)}


def test_the_submission_pages_fit_both_widths_and_render_their_messages(page, live_server, owner,  # noqa: F811
                                                                        submissions):
    SHOTS.mkdir(parents=True, exist_ok=True)
    base = live_server.url
    page.goto(f"{base}/accounts/login/")
    page.fill("input[name=username]", owner.username)
    page.fill("input[name=password]", "correct horse battery")
    page.click("button:has-text('Sign in')")
    page.wait_for_selector("text=Sign out")
    urls = {"mine": "/submissions/", "failed": f"/submissions/{submissions['bad'].pk}/",
            "scored": f"/submissions/{submissions['done'].pk}/",  # MMScan's scores: one IoU threshold, fitting
            "queued": f"/submissions/{submissions['queued'].pk}/",
            "history": f"/submissions/teams/{submissions['team'].slug}/"}
    problems = []
    for name, url in urls.items():
        for label, (w, h) in WIDTHS.items():
            page.set_viewport_size({"width": w, "height": h})
            page.goto(base + url)
            m = page.evaluate(MEASURE)
            page.screenshot(path=SHOTS / f"{name}-{label}.png", full_page=True)
            where = f"{url} at {w}px"
            if m["page"] > m["width"]:
                problems.append(f"{where}: the page is {m['page']}px wide")
            for wrap in m["wraps"]:
                if wrap["scroll"] > wrap["client"] + 1:
                    problems.append(f"{where}: a table scrolls sideways ({wrap['scroll']} in {wrap['client']}px)")
                if wrap["created"] is False:
                    problems.append(f"{where}: the Created column is cut")
            if m["broken"]:
                problems.append(f"{where}: broken inside {m['broken']}")
            if m["backticks"]:
                problems.append(f"{where}: {m['backticks']} raw backticks")
    assert not problems, "\n".join(problems)
    # The failed submission's message shows its code as code, and says what to run and where to read.
    page.set_viewport_size({"width": 1280, "height": 900})
    page.goto(base + urls["failed"])
    assert page.locator("#detail code", has_text="pred_scores").count() == 1
    assert page.locator("#format-link").get_attribute("href") == "/benchmarks/mmscan-vg/format/"
    assert "lb validate --track mmscan-vg --split val predictions.json" in page.inner_text("#validator-command")
    # "My submissions": the score with its metric name, and the failure's reason, on their rows.
    page.goto(base + urls["mine"])
    done = page.locator("#my-submissions tr", has_text="GroundingTransformer")
    assert "gTop-1@0.25" in done.locator("td.score").inner_text()
    assert "Expected pred_scores to have one score per box" in page.locator(
        "#my-submissions tr", has_text="BrokenNet").locator("td.reason").inner_text()
    # The queued one's place is on its row of "My submissions" too, in words, at both widths (issue 35).
    for w, h in WIDTHS.values():
        page.set_viewport_size({"width": w, "height": h})
        waiting = page.locator("#my-submissions tr", has_text="WaitingNet").locator(".queue-place")
        assert waiting.is_visible() and waiting.inner_text() == "next in line to be scored"
    page.set_viewport_size({"width": 1280, "height": 900})
    # The queued one: its place and the workers of its queue, and no empty progress bar.
    page.goto(base + urls["queued"])
    assert page.inner_text("#queue-position").startswith("Next in line to be scored")
    assert "No scoring worker serves SQA3D right now" in page.inner_text("#queue-workers")
    assert not page.locator("#progress").is_visible()


def test_an_mmscan_result_shows_one_iou_threshold_at_a_time(client, owner, submissions):
    client.force_login(owner)
    url = f"/submissions/{submissions['done'].pk}/"
    for iou, other in (("0.25", "0.5"), ("0.5", "0.25")):
        html = client.get(f"{url}?iou={iou}").content.decode()
        table = html.split('<table class="scores stackable">')[1].split("</table>")[0]
        assert f"gTop-1@{iou}</th>" in table and f"@{other}</th>" not in table
        assert f'href="?iou={other}"' in html.split('id="iou-toggle"')[1].split("</nav>")[0]
    assert "gTop-1@0.25</th>" in client.get(url).content.decode()  # the primary metric's threshold by default
