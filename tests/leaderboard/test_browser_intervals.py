"""Intervals and paired tests in a real browser: the ± toggle (a link, no script needed), the
"no significant difference" mark, the compare page's verdicts and the method chart's error bars.
Screenshots go to test-artifacts/pages/."""

from __future__ import annotations

import pytest

from tests.leaderboard.test_browser import page  # noqa: F401  (fixture)
from tests.leaderboard.test_browser_pages import board, shoot  # noqa: F401  (fixture)

pytestmark = [pytest.mark.browser]


def test_plus_minus_toggle_no_significant_difference_mark_and_error_bars(page, live_server, board):  # noqa: F811
    from leaderboard.rankings import paired_tests
    from leaderboard.rankings.models import LeaderboardEntry, PairedTest

    [test] = PairedTest.objects.all()  # asked when BetaQA was published under AlphaQA
    paired_tests.record_paired_test(test_id=test.pk, revision_a=test.result_a.revision,
                                    revision_b=test.result_b.revision, resamples=1000, error="", findings={
        "EM": {"test": "paired-permutation-by-scene", "difference": 0.05, "p_value": 0.42, "interval": [-0.01, 0.11]}})
    alpha, beta = (LeaderboardEntry.objects.get(name=n) for n in ("AlphaQA", "BetaQA"))

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
    mark = beta_row.locator(".badge.no-sig-diff")
    assert mark.is_visible() and mark.inner_text() == "no significant difference (p = 0.420)"
    assert [page.locator("tbody tr td.rank").nth(i).inner_text().split()[0] for i in range(2)] == ["1", "2"]
    assert "Holm-adjusted over the 1 adjacent pair" in page.locator("#significance-note").inner_text()
    shoot(page, "leaderboard-no-significant-difference")

    page.goto(f"{live_server.url}/benchmarks/sqa3d/compare/?split=test&e={alpha.pk}&e={beta.pk}")
    verdict = page.locator("#significance tbody tr").first.inner_text()
    assert "no significant difference (p = 0.420)" in verdict and "tied" not in verdict
    shoot(page, "compare-significance")

    page.goto(f"{live_server.url}/methods/{alpha.method_id}/")
    assert page.locator("svg .error-bar").count() == 6
    shoot(page, "method-error-bars")
