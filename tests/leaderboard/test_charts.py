"""Charts of values below zero: a track plugin's metric declared ``MetricSpec.value()`` is unbounded (a gain in
dB, a log-likelihood), so its bars, error bars, record line and radar must reach below the zero line and
never be drawn upside down or outside the plot."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest

from evaluation_workers.tracks.base import MetricSpec
from leaderboard.rankings import charts

GAIN = MetricSpec.value("dB")  # no bounds: a method may lose


def bar_rects(svg: str) -> dict[str, tuple[float, float]]:
    """Each bar's (top y, bottom y) by its title ("label, group: value"); no bar has a negative height."""
    found = re.findall(r'<rect x="[-\d.]+" y="(-?[\d.]+)" width="[\d.]+" height="(-?[\d.]+)" fill="[^"]+">'
                       r'<title>([^<]*)</title>', svg)
    assert found and all(float(h) >= 0 for _, h, _ in found), found
    return {title: (float(y), float(y) + float(h)) for y, h, title in found}


def ticks(svg: str) -> list[str]:
    return re.findall(r'class="tick"[^>]*>(-?[\d.]+)<', svg)


@pytest.mark.parametrize(("top", "bottom", "expected"), [
    (3.2, -1.3, [-2, -1, 0, 1, 2, 3, 4]),
    (0.5, -7.0, [-8, -6, -4, -2, 0, 2]),
    (-0.4, -0.9, [-1.0, -0.8, -0.6, -0.4, -0.2, 0.0]),
])
def test_ticks_reach_below_zero_for_negative_values(top, bottom, expected):
    assert charts.nice_ticks(top, spec=GAIN, bottom=bottom) == pytest.approx(expected)


def test_a_fractions_axis_stays_at_zero_and_up():
    assert charts.nice_ticks(0.7, bottom=-0.2) == charts.nice_ticks(0.7) == pytest.approx([0, 0.2, 0.4, 0.6, 0.8])


def test_bars_below_zero_hang_from_the_zero_line_inside_the_plot():
    svg = charts.bars(["near", "far"], [("M", [2.0, -1.5])], "t", errors=[(1.0, 3.0), (-2.5, -0.5)], metric="gain",
                      spec=GAIN)
    bars = bar_rects(svg)
    (up_top, up_bottom), (down_top, down_bottom) = bars["M, near: 2.00"], bars["M, far: -1.50"]
    assert up_bottom == pytest.approx(down_top, abs=0.11)  # both meet the zero line
    assert (down_bottom - down_top) / (up_bottom - up_top) == pytest.approx(0.75, abs=0.01)
    assert ticks(svg) == ["-4", "-2", "0", "2", "4"]  # down past the interval's -2.5
    plot_top, plot_bottom = 12, 212
    assert plot_top <= up_top and down_bottom <= plot_bottom
    lows = [float(y) for y in re.findall(r'<g class="error-bar"[^>]*><title>[^<]*</title><line x1="[\d.]+" '
                                          r'y1="(-?[\d.]+)"', svg)]
    assert all(plot_top <= y <= plot_bottom for y in lows), lows


def test_the_record_line_keeps_negative_records_inside_the_plot():
    svg = charts.progress([(datetime(2024, 1, 1, tzinfo=UTC), -0.5, "A"),
                           (datetime(2025, 1, 1, tzinfo=UTC), 0.8, "B")], "t", metric="gain", spec=GAIN)
    ys = [float(y) for y in re.findall(r'<circle cx="[\d.]+" cy="(-?[\d.]+)"', svg)]
    assert len(ys) == 2 and all(34 <= y <= 34 + 166 for y in ys), ys
    assert ys[0] > ys[1] and ticks(svg)[0].startswith("-")


def test_a_radar_draws_a_negative_value_on_its_own_spoke_nearer_the_centre():
    svg = charts.radar(list("ABCD"), [("M", [-0.3, 2.0, -0.3, 2.0])], "t", metric="gain", spec=GAIN)
    points = re.search(r'<polygon points="([^"]+)" fill="#', svg).group(1).split()
    (ax, ay), (bx, by) = (tuple(map(float, p.split(","))) for p in points[:2])
    cx, cy = charts.WIDTH / 2, 230
    assert ay <= cy and ax == pytest.approx(cx, abs=0.1)  # A's spoke points up: its point is above the centre
    assert 0 < cy - ay < bx - cx <= 135  # -0.3 nearer the centre (-0.5) than 2, both within the outer ring
