"""Intervals and ties in a real browser: the ± toggle (a link, no script needed), the
"tied" marker, the compare page's verdicts and the method chart's error bars.
Screenshots go to test-artifacts/pages/."""

from __future__ import annotations

import pytest

from tests.leaderboard.test_browser import page  # noqa: F401  (fixture)
from tests.leaderboard.test_browser_pages import board, shoot  # noqa: F401  (fixture)

pytestmark = [pytest.mark.browser]


def test_plus_minus_toggle_tied_marker_and_error_bars(page, live_server, board):  # noqa: F811
    from leaderboard.rankings import ties
    from leaderboard.rankings.models import LeaderboardEntry, PairedTest

    [test] = PairedTest.objects.all()  # asked when BetaQA was published under AlphaQA
    ties.record_paired_test(test_id=test.pk, test="mcnemar-exact", difference=0.05, p_value=0.42,
                            interval=[-0.01, 0.11], resamples=1000, error="")
    alpha, beta = (LeaderboardEntry.objects.get(name=n) for n in ("AlphaQA", "BetaQA"))
    assert beta.tied_with_id == alpha.pk

    page.goto(f"{live_server.url}/benchmarks/sqa3d/?split=test")
    assert page.locator(".pm").count() == 0
    page.click("#ci-toggle")
    assert "ci=1" in page.url
    lo, hi = alpha.intervals["EM"]
    alpha_row = page.locator("tr", has_text="AlphaQA")
    assert f"±{(hi - lo) * 50:.1f}" in alpha_row.inner_text()
    assert page.locator("tr.paper .pm").count() == 0, "paper rows have no intervals"
    shoot(page, "leaderboard-intervals")
    page.click("#ci-toggle")
    assert page.locator(".pm").count() == 0

    page.goto(f"{live_server.url}/benchmarks/sqa3d/?split=test&paper=0&ci=1")
    beta_row = page.locator("tr", has_text="BetaQA")
    assert beta_row.locator(".badge.tied").is_visible()
    assert [page.locator("tbody tr td.rank").nth(i).inner_text().split()[0] for i in range(2)] == ["1", "2"]
    shoot(page, "leaderboard-tied")

    page.goto(f"{live_server.url}/benchmarks/sqa3d/compare/?split=test&e={alpha.pk}&e={beta.pk}")
    verdict = page.locator("#significance tbody tr").first.inner_text()
    assert "statistically tied" in verdict and "0.420" in verdict
    shoot(page, "compare-significance")

    page.goto(f"{live_server.url}/methods/{alpha.method_id}/")
    assert page.locator("svg .error-bar").count() == 6
    shoot(page, "method-error-bars")
