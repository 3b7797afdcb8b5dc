"""Charts drawn on the server as inline SVG: no script, no network, readable
without JavaScript and crisp at any width.

Values are written by their metric's spec (``spec``, a ``MetricSpec``; by default a
fraction in [0, 1] written as a percentage, ``numbers.number``); a metric where lower is
better (an error in cm) is drawn the same way, in its unit, and its "best" is its lowest;
labels are escaped. Each function returns a complete ``<svg>`` element as safe
markup. ``errors`` (bars, radar) are the first series' 95 % intervals, one
``(lo, hi)`` or None per group, drawn as error bars (a paper row has none:
nothing is drawn). ``references`` (human performance, oracles: rows that are not
contestants) are dashed grey lines, never bars, and never a series' best.

Axes have titles (the metric in % or in its unit, the groups' name) and round ticks
(``nice_ticks``). They start at 0, or below the lowest value where a value metric (unbounded
unless its spec says) goes below zero: bars then hang from the zero line, and a radar's
centre is the lowest tick. The drawings are 480 units wide with 15-unit type: a phone
draws them about 320 px wide, so text stays at 10 px or more; ``.chart-box``
caps them at 600 px on a desktop.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from datetime import datetime

from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

from evaluation_workers.tracks.base import FRACTION, MetricSpec
from leaderboard.rankings.numbers import number, scaled, titled

PALETTE = ["#2f5bd3", "#e07a1f", "#1a7f37", "#b42318", "#7a4cc2", "#0e7490"]
REFERENCE = "#475467"
DASHES = ["7 4", "2 3", "10 3 2 3"]
TEXT = 15
WIDTH = 480
Series = tuple[str, Sequence[float | None]]
Reference = tuple[str, Sequence[float | None]]
Errors = Sequence["Sequence[float] | None"]


def _text(value: float | None, spec: MetricSpec = FRACTION) -> str:
    """A value as chart text: ``<0.1`` is markup-escaped."""
    return escape(number(value, spec))


def nice_ticks(top: float, count: int = 5, spec: MetricSpec = FRACTION, bottom: float = 0.0) -> list[float]:
    """Round ticks from 0 to at least ``top`` (in the metric's own values: a fraction, or a value in
    its unit), about ``count`` steps of 1, 2 or 5 times a power of ten as pages show them: 0.70 of
    a fraction gives 0, 20, 40, 60, 80 (%), never 18/35/52/70; a fraction's axis ends at 100 %.
    A value below zero (``bottom``; a value metric may be unbounded) takes the axis down past it:
    -1.3 to 3.2 gives -2 to 4; a fraction's axis starts at 0."""
    high = scaled(min(max(top, 0.0), 1.0) if spec.is_fraction else max(top, 0.0), spec)
    low = 0.0 if spec.is_fraction else scaled(min(bottom, 0.0), spec)
    unit = 100 if spec.is_fraction else 1
    if high - low <= 0:
        return [0.0, 0.1 if spec.is_fraction else 1.0]
    raw = (high - low) / count
    power = 10.0 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw - 1e-9)
    first, last = math.floor(low / step + 1e-9), math.ceil(high / step - 1e-9)
    return [round(i * step, 9) / unit + 0.0 for i in range(first, last + 1)]


def _tick_label(tick: float, spec: MetricSpec = FRACTION) -> str:
    return f"{round(scaled(tick, spec), 9):.10g}"


def _ticks(values: Sequence[float | None], errors: Errors | None = None, spec: MetricSpec = FRACTION) -> list[float]:
    """The axis's ticks for ``values`` and the intervals ``errors``: from 0 (or below the lowest) up."""
    drawn = [v for v in values if v is not None] + [float(b) for e in errors or () if e for b in e]
    return nice_ticks(max(drawn, default=0.0), spec=spec, bottom=min(drawn, default=0.0))


def _share(ticks: Sequence[float]) -> Callable[[float], float]:
    """Where a value lies on the axis of ``ticks``: 0 at the first tick, 1 at the last."""
    low, span = ticks[0], ticks[-1] - ticks[0]
    return lambda value: (value - low) / span


def _values(series: Sequence[Series], references: Sequence[Reference]) -> list[float | None]:
    return [v for _, values in [*series, *references] for v in values]


def _legend(series: Sequence[Series], references: Sequence[Reference], x: float, y: float) -> str:
    parts = []
    for i, (label, _) in enumerate(series):
        parts.append(f'<rect x="{x}" y="{y + i * 22 - 11}" width="13" height="13" fill="{PALETTE[i % len(PALETTE)]}"/>'
                     f'<text x="{x + 20}" y="{y + i * 22}" font-size="{TEXT}">{escape(_short(label))}</text>')
    for j, (label, _) in enumerate(references):
        row = y + (len(series) + j) * 22
        parts.append(f'<line x1="{x}" y1="{row - 5}" x2="{x + 14}" y2="{row - 5}" stroke="{REFERENCE}" '
                     f'stroke-width="2.5" stroke-dasharray="{DASHES[j % len(DASHES)]}"/>'
                     f'<text x="{x + 20}" y="{row}" font-size="{TEXT}">{escape(_short(label))} (reference)</text>')
    return "".join(parts)


def _short(label: str, limit: int = 44) -> str:
    return label if len(label) <= limit else label[:limit - 1] + "…"


def _error_title(label: str, group: str, bounds: Sequence[float], spec: MetricSpec = FRACTION) -> str:
    return escape(f"{label}, {group}: 95 % interval {number(bounds[0], spec)} to {number(bounds[1], spec)}")


def _y_title(metric: str, x: float, y: float, spec: MetricSpec = FRACTION) -> str:
    """The value axis's title, read bottom to top beside it: the metric and its unit, and which way is better."""
    better = ", lower is better" if spec.lower_is_better else ""
    return (f'<text class="axis-title" x="{x}" y="{y:.1f}" font-size="{TEXT}" text-anchor="middle" '
            f'transform="rotate(-90 {x} {y:.1f})" fill="#344054">{escape(titled(metric, spec))}{better}</text>')


def _svg(kind: str, title: str, height: float) -> str:
    return (f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {height:.0f}" role="img" '
            f'class="chart {kind}" aria-label="{escape(title)}"><title>{escape(title)}</title>')


def radar(axes: Sequence[str], series: Sequence[Series], title: str = "", errors: Errors | None = None, *,
          metric: str = "", references: Sequence[Reference] = (), spec: MetricSpec = FRACTION) -> SafeString:
    """A radar chart: one spoke per axis (e.g. OpenScan's aspects), one polygon per series
    (references dashed grey); rings at round ticks; the first series' intervals as segments
    along the spokes."""
    cx, cy, radius = WIDTH / 2, 230, 135
    ticks = _ticks(_values(series, references), errors, spec)
    share = _share(ticks)  # the centre is the lowest tick (0, or below the lowest value)
    n = len(axes)
    angle = [(-math.pi / 2 + 2 * math.pi * i / n) for i in range(n)]
    legend_y = cy + radius + 52
    out = [_svg("radar", title, legend_y + 22 * (len(series) + len(references)))]
    if metric:
        better = ", lower is better" if spec.lower_is_better else ""
        out.append(f'<text class="axis-title" x="8" y="22" font-size="{TEXT}" fill="#344054">'
                   f'{escape(titled(metric, spec))}{better}</text>')
    for tick in ticks[1:]:
        ring = share(tick)
        pts = " ".join(f"{cx + radius * ring * math.cos(a):.1f},{cy + radius * ring * math.sin(a):.1f}"
                       for a in angle)
        out.append(f'<polygon points="{pts}" fill="none" stroke="#d0d5dd"/>'
                   f'<text class="tick" x="{cx + 4}" y="{cy - radius * ring + 14:.1f}" font-size="{TEXT}" '
                   f'fill="#667085">{_tick_label(tick, spec)}</text>')
    for a, label in zip(angle, axes):
        x, y = cx + radius * math.cos(a), cy + radius * math.sin(a)
        lx, ly = cx + (radius + 12) * math.cos(a), cy + (radius + 12) * math.sin(a)
        anchor = "middle" if abs(math.cos(a)) < 0.3 else ("start" if math.cos(a) > 0 else "end")
        dy = 5 + (12 if math.sin(a) > 0.7 else -6 if math.sin(a) < -0.7 else 0)
        out.append(f'<line x1="{cx}" y1="{cy}" x2="{x:.1f}" y2="{y:.1f}" stroke="#d0d5dd"/>'
                   f'<text x="{lx:.1f}" y="{ly + dy:.1f}" font-size="{TEXT}" text-anchor="{anchor}">'
                   f'{escape(label)}</text>')

    def points(values: Sequence[float | None]) -> str:
        return " ".join(f"{cx + radius * share(v or 0) * math.cos(a):.1f},"
                        f"{cy + radius * share(v or 0) * math.sin(a):.1f}" for a, v in zip(angle, values))

    def described(label: str, values: Sequence[float | None]) -> str:
        return escape(f"{label}: " + ", ".join(f"{ax} {number(v, spec)}" for ax, v in zip(axes, values)))

    for j, (label, values) in enumerate(references):
        out.append(f'<g class="reference"><polygon points="{points(values)}" fill="none" stroke="{REFERENCE}" '
                   f'stroke-width="2" stroke-dasharray="{DASHES[j % len(DASHES)]}"><title>'
                   f'{described(f"{label} (reference)", values)}</title></polygon></g>')
    # The first series (the method) is drawn last, on top; the others are dashed.
    for i, (label, values) in reversed(list(enumerate(series))):
        color = PALETTE[i % len(PALETTE)]
        style = 'fill-opacity="0.15" stroke-width="2.5"' if i == 0 else \
            'fill-opacity="0.04" stroke-width="1.5" stroke-dasharray="6 3"'
        out.append(f'<polygon points="{points(values)}" fill="{color}" {style} stroke="{color}">'
                   f'<title>{described(label, values)}</title></polygon>')
    for a, label, bounds in zip(angle, axes, errors or ()):
        if not bounds:
            continue
        (x1, y1), (x2, y2) = ((cx + radius * share(float(v)) * math.cos(a), cy + radius * share(float(v)) * math.sin(a))
                              for v in bounds)
        dx, dy = -4 * math.sin(a), 4 * math.cos(a)  # the caps, across the spoke
        out.append(f'<g class="error-bar" stroke="#101828" stroke-width="1.5"><title>'
                   f'{_error_title(series[0][0], label, bounds, spec)}</title>'
                   f'<line x1="{x1:.1f}" y1="{y1:.1f}" x2="{x2:.1f}" y2="{y2:.1f}"/>'
                   f'<line x1="{x1 - dx:.1f}" y1="{y1 - dy:.1f}" x2="{x1 + dx:.1f}" y2="{y1 + dy:.1f}"/>'
                   f'<line x1="{x2 - dx:.1f}" y1="{y2 - dy:.1f}" x2="{x2 + dx:.1f}" y2="{y2 + dy:.1f}"/></g>')
    out.append(_legend(series, references, 16, legend_y))
    out.append("</svg>")
    return mark_safe("".join(out))


def bars(groups: Sequence[str], series: Sequence[Series], title: str = "", errors: Errors | None = None, *,
         metric: str = "", group_label: str = "", references: Sequence[Reference] = (),
         spec: MetricSpec = FRACTION) -> SafeString:
    """Grouped bars: one group per question type or category, one bar per series; each
    reference a dashed line across each group; the first series' intervals as error bars."""
    left, right, top_pad, plot_h = 60, 8, 12, 200
    ticks = _ticks(_values(series, references), errors, spec)
    share = _share(ticks)
    plot_w = WIDTH - left - right
    base = top_pad + plot_h

    def at(value: float) -> float:
        return base - plot_h * share(value)

    zero = at(0.0)  # bars stand on it, and hang from it below zero
    group_w = plot_w / max(1, len(groups))
    bar_w = group_w * 0.8 / max(1, len(series))
    legend_y = base + (66 if group_label else 46)
    out = [_svg("bars", title, legend_y + 22 * (len(series) + len(references)) - 4)]
    for tick in ticks:
        y = at(tick)
        out.append(f'<line x1="{left}" y1="{y:.1f}" x2="{WIDTH - right}" y2="{y:.1f}" stroke="#eaecf0"/>'
                   f'<text class="tick" x="{left - 6}" y="{y + 5:.1f}" font-size="{TEXT}" text-anchor="end" '
                   f'fill="#667085">{_tick_label(tick, spec)}</text>')
    out.append(f'<line x1="{left}" y1="{zero:.1f}" x2="{WIDTH - right}" y2="{zero:.1f}" stroke="#98a2b3"/>')
    if metric:
        out.append(_y_title(metric, 16, top_pad + plot_h / 2, spec))
    for g, group in enumerate(groups):
        x0 = left + g * group_w + group_w * 0.1
        for i, (label, values) in enumerate(series):
            value = values[g]
            y = at(value or 0.0)
            out.append(f'<rect x="{x0 + i * bar_w:.1f}" y="{min(y, zero):.1f}" width="{max(bar_w - 2, 1):.1f}" '
                       f'height="{abs(zero - y):.1f}" fill="{PALETTE[i % len(PALETTE)]}"><title>{escape(label)}, '
                       f'{escape(group)}: {_text(value, spec)}</title></rect>')
            bounds = errors[g] if errors and i == 0 and g < len(errors) else None
            if bounds:
                xm = x0 + i * bar_w + (bar_w - 2) / 2
                y_lo, y_hi = (at(float(v)) for v in bounds)
                out.append(f'<g class="error-bar" stroke="#101828" stroke-width="1.5"><title>'
                           f'{_error_title(label, group, bounds, spec)}</title>'
                           f'<line x1="{xm:.1f}" y1="{y_lo:.1f}" x2="{xm:.1f}" y2="{y_hi:.1f}"/>'
                           f'<line x1="{xm - 4:.1f}" y1="{y_lo:.1f}" x2="{xm + 4:.1f}" y2="{y_lo:.1f}"/>'
                           f'<line x1="{xm - 4:.1f}" y1="{y_hi:.1f}" x2="{xm + 4:.1f}" y2="{y_hi:.1f}"/></g>')
        out.append(f'<text x="{left + (g + 0.5) * group_w:.1f}" y="{base + 21}" font-size="{TEXT}" '
                   f'text-anchor="middle">{escape(group)}</text>')
    for j, (label, values) in enumerate(references):
        lines = []
        for g, (group, value) in enumerate(zip(groups, values)):
            if value is None:
                continue
            y = at(value)
            lines.append(f'<line x1="{left + g * group_w + 2:.1f}" y1="{y:.1f}" x2="{left + (g + 1) * group_w - 2:.1f}" '
                         f'y2="{y:.1f}"><title>{escape(label)} (reference), {escape(group)}: {_text(value, spec)}</title>'
                         f'</line>')
        out.append(f'<g class="reference" stroke="{REFERENCE}" stroke-width="2.5" '
                   f'stroke-dasharray="{DASHES[j % len(DASHES)]}">{"".join(lines)}</g>')
    if group_label:
        out.append(f'<text class="axis-title" x="{left + plot_w / 2:.1f}" y="{base + 44}" font-size="{TEXT}" '
                   f'text-anchor="middle" fill="#344054">{escape(group_label)}</text>')
    out.append(_legend(series, references, left, legend_y))
    out.append("</svg>")
    return mark_safe("".join(out))


def progress(points: Sequence[tuple[datetime, float, str]], title: str = "", *, metric: str = "",
             references: Sequence[tuple[str, float]] = (), spec: MetricSpec = FRACTION) -> SafeString:
    """A step line of the best score over time, one dot where the record improved; each
    reference a dashed grey line across, labelled with its name and value.

    The current record is labelled with its method and value. One record is a
    single labelled dot over one date (a line between two equal dates would say nothing).
    """
    height, left, right, bottom, top_pad = 262, 60, 16, 62, 34
    if not points:
        return mark_safe("")
    ticks = _ticks([p[1] for p in points] + [v for _, v in references], spec=spec)
    share = _share(ticks)
    t0, t1 = points[0][0].timestamp(), points[-1][0].timestamp()
    single = len(points) == 1 or t1 <= t0
    span = max(t1 - t0, 1.0)
    plot_w, plot_h = WIDTH - left - right, height - bottom - top_pad

    def xy(t: datetime, v: float) -> tuple[float, float]:
        x = left + plot_w / 2 if single else left + plot_w * (t.timestamp() - t0) / span
        return x, top_pad + plot_h * (1 - share(v))

    out = [_svg("progress", title, height)]
    for tick in ticks:
        y = top_pad + plot_h * (1 - share(tick))
        out.append(f'<line x1="{left}" y1="{y:.1f}" x2="{WIDTH - right}" y2="{y:.1f}" stroke="#eaecf0"/>'
                   f'<text class="tick" x="{left - 6}" y="{y + 5:.1f}" font-size="{TEXT}" text-anchor="end" '
                   f'fill="#667085">{_tick_label(tick, spec)}</text>')
    if metric:
        out.append(_y_title(metric, 16, top_pad + plot_h / 2, spec))
    for j, (name, value) in enumerate(references):
        y = top_pad + plot_h * (1 - share(value))
        out.append(f'<g class="reference"><line x1="{left}" y1="{y:.1f}" x2="{WIDTH - right}" y2="{y:.1f}" '
                   f'stroke="{REFERENCE}" stroke-width="2" stroke-dasharray="{DASHES[j % len(DASHES)]}"/>'
                   f'<text x="{WIDTH - right}" y="{y - 6:.1f}" font-size="{TEXT}" text-anchor="end" '
                   f'fill="{REFERENCE}">{escape(_short(name, 28))} {_text(value, spec)} (reference)</text></g>')
    if not single:
        path = []
        for i, (t, v, _) in enumerate(points):
            x, y = xy(t, v)
            path.append(f"M{x:.1f},{y:.1f}" if i == 0 else f"H{x:.1f}V{y:.1f}")
        path.append(f"H{left + plot_w:.1f}")
        out.append(f'<path d="{"".join(path)}" fill="none" stroke="{PALETTE[0]}" stroke-width="2.5"/>')
    for t, v, name in points:
        x, y = xy(t, v)
        out.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="5" fill="{PALETTE[0]}"><title>{escape(name)}: '
                   f'{_text(v, spec)} ({t:%Y-%m-%d})</title></circle>')
    t_last, v_last, name_last = points[-1]
    x, y = xy(t_last, v_last)
    # Beside the dot, on the side with room (a record set on the first day sits at the left edge).
    anchor = "middle" if single else ("start" if x < left + plot_w / 2 else "end")
    out.append(f'<text x="{x:.1f}" y="{max(y - 12, 16):.1f}" font-size="{TEXT}" '
               f'text-anchor="{anchor}" font-weight="600">{escape(_short(name_last, 28))} {_text(v_last, spec)}</text>')
    dates = height - bottom + 22
    if single or points[0][0].date() == t_last.date():
        out.append(f'<text x="{left + plot_w / 2:.1f}" y="{dates}" font-size="{TEXT}" text-anchor="middle" '
                   f'fill="#667085">{t_last:%Y-%m-%d}</text>')
    else:
        out.append(f'<text x="{left}" y="{dates}" font-size="{TEXT}" fill="#667085">{points[0][0]:%Y-%m-%d}</text>'
                   f'<text x="{WIDTH - right}" y="{dates}" font-size="{TEXT}" text-anchor="end" fill="#667085">'
                   f'{t_last:%Y-%m-%d}</text>')
    out.append(f'<text class="axis-title" x="{left + plot_w / 2:.1f}" y="{height - 10}" font-size="{TEXT}" '
               f'text-anchor="middle" fill="#344054">publication date</text>')
    out.append("</svg>")
    return mark_safe("".join(out))
