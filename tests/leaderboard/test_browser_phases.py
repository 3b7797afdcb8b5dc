"""The leaderboard of a challenge in each phase (upcoming, open, frozen, closed, revealed), and the
maintainers' challenge controls, in a real browser at desktop and phone widths. Screenshots go to
test-artifacts/pages/leaderboard-phase-<phase>-<width>.png."""

from __future__ import annotations

import io
from datetime import timedelta

import pytest
from django.db import transaction
from django.utils import timezone

from tests.leaderboard.test_browser import page  # noqa: F401  (fixture)
from tests.leaderboard.test_browser_pages import board, shoot  # noqa: F401  (fixture)

pytestmark = [pytest.mark.browser]
HOUR = timedelta(hours=1)


def schedule(split, **offsets) -> None:
    from leaderboard.benchmarks.models import Split
    from leaderboard.lib.pagecache import bump

    now = timezone.now()
    with transaction.atomic():
        Split.objects.filter(pk=split.pk).update(**{k: now + v if v is not None else None for k, v in offsets.items()})
        bump("sqa3d")  # the dates move instead of the clock: the cached page would have expired at the change


def test_the_leaderboard_shows_each_phase_and_the_time_left(page, live_server, board, owner,  # noqa: F811
                                                            sqa3d_split, sqa3d_files):
    from evaluation_workers.tracks import get_track
    from leaderboard.benchmarks.models import LabelSet
    from leaderboard.submissions import lifecycle, services
    from leaderboard.submissions.models import Method, Submission

    LabelSet.objects.filter(split=sqa3d_split, is_active=True).update(has_partition=True)
    url = f"{live_server.url}/benchmarks/sqa3d/?paper=0"
    steps = [
        ("upcoming", {"starts_at": 5 * HOUR, "freeze_at": 50 * HOUR, "deadline": 74 * HOUR},
         "submissions open on", "Open in"),
        ("open", {"starts_at": -HOUR, "freeze_at": 50 * HOUR, "deadline": 74 * HOUR},
         "Submissions to test are open until the deadline", "Frozen in"),
        ("frozen", {"starts_at": -50 * HOUR, "freeze_at": -HOUR, "deadline": 23 * HOUR},
         "The board is frozen since", "Revealed in"),
    ]
    for phase, offsets, says, next_label in steps:
        schedule(sqa3d_split, **offsets)
        page.goto(url)
        banner = page.locator("#phase")
        assert banner.get_attribute("data-phase") == phase
        text = banner.inner_text()
        assert says in text and next_label in text, text
        assert "public subset" in text
        shoot(page, f"leaderboard-phase-{phase}")
    lock = page.inner_text("#selection-lock")  # frozen: the final selection, and the one exception
    assert "selection is final since the freeze" in lock and "may still be published until the reveal" in lock

    # Frozen: a late entry is held back.
    result = get_track("sqa3d").score(sqa3d_files["labels"], sqa3d_files["predictions"], lambda f, m="": None)
    schedule(sqa3d_split, starts_at=-50 * HOUR, freeze_at=HOUR, deadline=23 * HOUR)  # still open: it is sent
    late = services.check_create_submission(user=owner, track="sqa3d", split="test", method_name="GammaQA",
                                            file=io.BytesIO(sqa3d_files["predictions"].read_bytes()),
                                            file_name="p.json")
    schedule(sqa3d_split, starts_at=-50 * HOUR, freeze_at=-HOUR, deadline=23 * HOUR)  # frozen: scored, published
    # Sent before the freeze the dates just moved to, finished after it: publishable until the reveal.
    Submission.objects.filter(pk=late.pk).update(created_at=timezone.now() - 2 * HOUR)
    lifecycle.record_result(submission_id=late.pk, attempt=1, result=result)
    Method.objects.filter(name="GammaQA").update(description="Late.", authors="L. Ate", uses_extra_data=False)
    services.check_publish(owner, late)
    page.goto(url)
    assert "GammaQA" not in page.inner_text("table.leaderboard")

    from leaderboard.benchmarks.models import Split

    Split.objects.filter(pk=sqa3d_split.pk).update(reveal_at_deadline=False)
    schedule(sqa3d_split, starts_at=-74 * HOUR, freeze_at=-25 * HOUR, deadline=-HOUR)
    page.goto(url)
    assert page.locator("#phase").get_attribute("data-phase") == "closed"
    assert "the maintainers will reveal the full board" in page.inner_text("#phase")
    shoot(page, "leaderboard-phase-closed")

    Split.objects.filter(pk=sqa3d_split.pk).update(reveal_at_deadline=True)
    schedule(sqa3d_split, starts_at=-74 * HOUR, freeze_at=-25 * HOUR, deadline=-HOUR)
    page.goto(url)
    assert page.locator("#phase").get_attribute("data-phase") == "revealed"
    assert "scored on the private test subset" in page.inner_text("#phase")
    assert "GammaQA" in page.inner_text("table.leaderboard")
    shoot(page, "leaderboard-phase-revealed")


def test_a_maintainer_sets_the_schedule_and_sees_the_live_board(page, live_server, board, maintainer,  # noqa: F811
                                                                 sqa3d_split):
    page.goto(f"{live_server.url}/accounts/login/")
    page.fill("input[name=username]", maintainer.username)
    page.fill("input[name=password]", "correct horse battery")
    page.click("button:has-text('Sign in')")
    page.goto(f"{live_server.url}/moderation/tracks/sqa3d/")
    card = page.locator("#challenge-test")
    start = (timezone.now() + 2 * HOUR).strftime("%Y-%m-%dT%H:%M")
    deadline = (timezone.now() + 100 * HOUR).strftime("%Y-%m-%dT%H:%M")
    card.locator("input[name=starts_at]").fill(start)
    card.locator("input[name=deadline]").fill(deadline)
    card.locator("button[value=phases]").click()
    page.wait_for_selector("text=Schedule of sqa3d/test saved")
    card = page.locator("#challenge-test")
    assert card.locator(".phase-badge").inner_text() == "Upcoming"
    assert "AlphaQA" in card.locator("table.live-board").inner_text()
    shoot(page, "moderation-challenge")
    page.goto(f"{live_server.url}/benchmarks/sqa3d/")
    assert page.locator("#phase").get_attribute("data-phase") == "upcoming"
