"""Numbers as pages show them (METRICS.md, issue 27): one decimal of a percentage; a value
that rounds to 0.0 but is not zero shows as <0.1; nothing ever shows as -0.0."""

from __future__ import annotations

import pytest

from leaderboard.benchmarks.bundle_apply import load_bundled_benchmarks
from leaderboard.rankings import charts
from leaderboard.rankings.models import LeaderboardEntry, PairedTest
from leaderboard.rankings.templatetags.scores import pct, pm, signed_pct, span
from tests.leaderboard.test_intervals import publish


@pytest.mark.parametrize(("value", "shown"), [
    (None, "—"), ("", "—"), ("n/a", "—"), (0, "0.0"), (0.0, "0.0"), (-0.0, "0.0"),
    (1e-17, "0.0"), (-1e-17, "0.0"),  # float round-off of identical results is zero
    (0.0003, "<0.1"), (0.0004999, "<0.1"), (0.0005, "0.1"), (0.123, "12.3"), (1.0, "100.0"),
    (-0.0003, "-<0.1"), (-0.05, "-5.0"),
])
def test_pct_writes_tiny_values_as_less_than_the_step_and_never_minus_zero(value, shown):
    assert pct(value) == shown


@pytest.mark.parametrize(("value", "shown"), [
    (None, "—"), (0.0, "0.0"), (-0.0, "0.0"), (-1e-17, "0.0"), (0.0003, "+<0.1"), (-0.0003, "-<0.1"),
    (0.1, "+10.0"), (-0.1, "-10.0"),
])
def test_a_difference_carries_its_sign_except_when_it_is_zero(value, shown):
    assert signed_pct(value) == shown


def test_intervals_use_the_same_rule():
    assert pm([0.5, 0.5]) == "±0.0" and pm([0.5, 0.5006]) == "±<0.1" and pm([0.4, 0.6]) == "±10.0"
    assert span([-0.0, 0.0003]) == "95 % interval [0.0, <0.1]"


def test_charts_write_their_numbers_by_the_same_rule():
    svg = charts.bars(["What"], [("A", [0.0003]), ("B", [-0.0])], "t")
    assert "A, What: &lt;0.1" in svg and "B, What: 0.0" in svg and "-0.0" not in svg


def test_pla_s_tiny_miou_shows_as_less_than_a_tenth_on_the_board(client, db):
    from leaderboard.benchmarks.bundle_apply import load_bundled_paper_rows

    load_bundled_benchmarks()
    load_bundled_paper_rows("openscan")
    pla = LeaderboardEntry.objects.get(name="PLA")
    assert 0 < pla.scores["mIoU"] < 0.0005
    page = client.get("/benchmarks/openscan/?metric=mIoU").content.decode()
    row = page[page.index(">PLA<"):]
    row = row[:row.index("</tr>")]
    assert "&lt;0.1" in row and ">0.0<" not in row.replace(" ", "")


def test_identical_files_compare_as_zero_never_minus_zero(client, owner, sqa3d_split, sqa3d_files, sent_tasks):
    a, _ = publish(owner, sqa3d_files, "Same A")
    b, _ = publish(owner, sqa3d_files, "Same B")
    # The worker's answer for identical files: a zero difference and interval, stored for the
    # smaller result id; the page asks for the other order, which turns the signs round.
    found = {"test": "paired-permutation-by-scene", "difference": 0.0, "p_value": 1.0, "interval": [0.0, 0.0]}
    PairedTest.objects.update_or_create(result_a_id=min(a.result_id, b.result_id),
                                        result_b_id=max(a.result_id, b.result_id),
                                        defaults={"findings": {"EM": found}, "resamples": 1000,
                                                  "computed_at": a.published_at})
    low, high = sorted((a, b), key=lambda e: e.result_id)
    page = client.get(f"/benchmarks/sqa3d/compare/?split=test&e={high.pk}&e={low.pk}").content.decode()
    assert "-0.0" not in page
    assert '>0.0</td><td class="num" data-label="95 % paired interval">[0.0, 0.0]</td>' in page
    assert '<span class="diff">(0.0)</span>' in page
