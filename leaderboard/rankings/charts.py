"""Charts drawn on the server as inline SVG: no script, no network, readable
without JavaScript and crisp at any width.

Values are fractions in [0, 1]; labels are escaped. Each function returns a
complete ``<svg>`` element as safe markup. ``errors`` (bars, radar) are the
first series' 95 % intervals, one ``(lo, hi)`` or None per group, drawn as
error bars (a paper row has none: nothing is drawn).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import datetime

from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

PALETTE = ["#2f5bd3", "#e07a1f", "#1a7f37", "#b42318", "#7a4cc2", "#0e7490"]
Series = tuple[str, Sequence[float | None]]
Errors = Sequence["Sequence[float] | None"]


def _fmt(value: float | None) -> str:
    return "–" if value is None else f"{value * 100:.1f}"


def _legend(series: Sequence[Series], x: float, y: float) -> str:
    parts = []
    for i, (label, _) in enumerate(series):
        color = PALETTE[i % len(PALETTE)]
        parts.append(f'<rect x="{x}" y="{y + i * 18}" width="12" height="12" fill="{color}"/>'
                     f'<text x="{x + 18}" y="{y + i * 18 + 10}" font-size="12">{escape(label)}</text>')
    return "".join(parts)


def _scale_max(series: Sequence[Series], errors: Errors | None = None) -> float:
    top = max((v for _, values in series for v in values if v is not None), default=0.0)
    top = max([top] + [float(e[1]) for e in errors or () if e])
    # Round the axis up to the next 10 % so small values still fill the chart.
    return max(0.1, math.ceil(top * 10 + 1e-9) / 10)


def _error_title(label: str, group: str, bounds: Sequence[float]) -> str:
    return escape(f"{label}, {group}: 95 % interval {_fmt(bounds[0])} to {_fmt(bounds[1])}")


def radar(axes: Sequence[str], series: Sequence[Series], title: str = "", errors: Errors | None = None) -> SafeString:
    """A radar chart: one spoke per axis (e.g. OpenScan's aspects), one polygon per series;
    the first series' intervals as segments along the spokes."""
    size, cx, cy, radius = 420, 210, 200, 140
    top = _scale_max(series, errors)
    n = len(axes)
    angle = [(-math.pi / 2 + 2 * math.pi * i / n) for i in range(n)]
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {size} {size + 18 * len(series)}" '
           f'role="img" class="chart radar" aria-label="{escape(title)}"><title>{escape(title)}</title>']
    for ring in (0.25, 0.5, 0.75, 1.0):
        pts = " ".join(f"{cx + radius * ring * math.cos(a):.1f},{cy + radius * ring * math.sin(a):.1f}"
                       for a in angle)
        out.append(f'<polygon points="{pts}" fill="none" stroke="#d0d5dd"/>')
        out.append(f'<text x="{cx + 3}" y="{cy - radius * ring + 11:.1f}" font-size="9" fill="#667085">'
                   f'{top * ring * 100:.0f}</text>')
    for a, label in zip(angle, axes):
        x, y = cx + radius * math.cos(a), cy + radius * math.sin(a)
        lx, ly = cx + (radius + 14) * math.cos(a), cy + (radius + 14) * math.sin(a)
        anchor = "middle" if abs(math.cos(a)) < 0.3 else ("start" if math.cos(a) > 0 else "end")
        out.append(f'<line x1="{cx}" y1="{cy}" x2="{x:.1f}" y2="{y:.1f}" stroke="#d0d5dd"/>'
                   f'<text x="{lx:.1f}" y="{ly + 4:.1f}" font-size="12" text-anchor="{anchor}">{escape(label)}</text>')
    # The first series (the method) is drawn last, on top; references are dashed.
    for i, (label, values) in reversed(list(enumerate(series))):
        color = PALETTE[i % len(PALETTE)]
        style = 'fill-opacity="0.15" stroke-width="2.5"' if i == 0 else \
            'fill-opacity="0.04" stroke-width="1.5" stroke-dasharray="6 3"'
        pts = " ".join(f"{cx + radius * (v or 0) / top * math.cos(a):.1f},"
                       f"{cy + radius * (v or 0) / top * math.sin(a):.1f}" for a, v in zip(angle, values))
        out.append(f'<polygon points="{pts}" fill="{color}" {style} stroke="{color}">'
                   f'<title>{escape(label)}: '
                   f'{escape(", ".join(f"{ax} {_fmt(v)}" for ax, v in zip(axes, values)))}</title></polygon>')
    for a, label, bounds in zip(angle, axes, errors or ()):
        if not bounds:
            continue
        (x1, y1), (x2, y2) = ((cx + radius * float(v) / top * math.cos(a), cy + radius * float(v) / top * math.sin(a))
                              for v in bounds)
        dx, dy = -4 * math.sin(a), 4 * math.cos(a)  # the caps, across the spoke
        out.append(f'<g class="error-bar" stroke="#101828" stroke-width="1.5"><title>'
                   f'{_error_title(series[0][0], label, bounds)}</title>'
                   f'<line x1="{x1:.1f}" y1="{y1:.1f}" x2="{x2:.1f}" y2="{y2:.1f}"/>'
                   f'<line x1="{x1 - dx:.1f}" y1="{y1 - dy:.1f}" x2="{x1 + dx:.1f}" y2="{y1 + dy:.1f}"/>'
                   f'<line x1="{x2 - dx:.1f}" y1="{y2 - dy:.1f}" x2="{x2 + dx:.1f}" y2="{y2 + dy:.1f}"/></g>')
    out.append(_legend(series, 20, size - 8))
    out.append("</svg>")
    return mark_safe("".join(out))


def bars(groups: Sequence[str], series: Sequence[Series], title: str = "", errors: Errors | None = None) -> SafeString:
    """Grouped bars: one group per question type or category, one bar per series;
    the first series' intervals as error bars on its bars."""
    width, height, left, bottom, top_pad = 640, 260, 40, 40, 16
    top = _scale_max(series, errors)
    plot_w, plot_h = width - left - 10, height - bottom - top_pad
    group_w = plot_w / max(1, len(groups))
    bar_w = group_w * 0.8 / max(1, len(series))
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height + 18 * len(series)}" '
           f'role="img" class="chart bars" aria-label="{escape(title)}"><title>{escape(title)}</title>']
    for tick in (0, 0.25, 0.5, 0.75, 1.0):
        y = top_pad + plot_h * (1 - tick)
        out.append(f'<line x1="{left}" y1="{y:.1f}" x2="{width - 10}" y2="{y:.1f}" stroke="#eaecf0"/>'
                   f'<text x="{left - 6}" y="{y + 4:.1f}" font-size="10" text-anchor="end" fill="#667085">'
                   f'{top * tick * 100:.0f}</text>')
    for g, group in enumerate(groups):
        x0 = left + g * group_w + group_w * 0.1
        for i, (label, values) in enumerate(series):
            value = values[g]
            h = plot_h * (value or 0) / top
            out.append(f'<rect x="{x0 + i * bar_w:.1f}" y="{top_pad + plot_h - h:.1f}" width="{bar_w - 2:.1f}" '
                       f'height="{h:.1f}" fill="{PALETTE[i % len(PALETTE)]}"><title>{escape(label)}, '
                       f'{escape(group)}: {_fmt(value)}</title></rect>')
            bounds = errors[g] if errors and i == 0 and g < len(errors) else None
            if bounds:
                xm = x0 + i * bar_w + (bar_w - 2) / 2
                y_lo, y_hi = (top_pad + plot_h * (1 - float(v) / top) for v in bounds)
                out.append(f'<g class="error-bar" stroke="#101828" stroke-width="1.5"><title>'
                           f'{_error_title(label, group, bounds)}</title>'
                           f'<line x1="{xm:.1f}" y1="{y_lo:.1f}" x2="{xm:.1f}" y2="{y_hi:.1f}"/>'
                           f'<line x1="{xm - 4:.1f}" y1="{y_lo:.1f}" x2="{xm + 4:.1f}" y2="{y_lo:.1f}"/>'
                           f'<line x1="{xm - 4:.1f}" y1="{y_hi:.1f}" x2="{xm + 4:.1f}" y2="{y_hi:.1f}"/></g>')
        out.append(f'<text x="{left + (g + 0.5) * group_w:.1f}" y="{height - bottom + 16}" font-size="12" '
                   f'text-anchor="middle">{escape(group)}</text>')
    out.append(_legend(series, left, height - 6))
    out.append("</svg>")
    return mark_safe("".join(out))


def progress(points: Sequence[tuple[datetime, float, str]], title: str = "") -> SafeString:
    """A step line of the best score over time, one dot where the record improved.

    Drawn small (480 wide) with large type, so that it stays readable when a
    phone scales it to 350 px. The current record is labelled with its method
    and value. One record is a single labelled dot over one date (a line
    between two equal dates would say nothing).
    """
    width, height, left, right, bottom, top_pad = 480, 230, 44, 16, 34, 34
    if not points:
        return mark_safe("")
    top = _scale_max([("", [p[1] for p in points])])
    t0, t1 = points[0][0].timestamp(), points[-1][0].timestamp()
    single = len(points) == 1 or t1 <= t0
    span = max(t1 - t0, 1.0)
    plot_w, plot_h = width - left - right, height - bottom - top_pad

    def xy(t: datetime, v: float) -> tuple[float, float]:
        x = left + plot_w / 2 if single else left + plot_w * (t.timestamp() - t0) / span
        return x, top_pad + plot_h * (1 - v / top)

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" role="img" '
           f'class="chart progress" aria-label="{escape(title)}"><title>{escape(title)}</title>']
    for tick in (0, 0.5, 1.0):
        y = top_pad + plot_h * (1 - tick)
        out.append(f'<line x1="{left}" y1="{y:.1f}" x2="{width - right}" y2="{y:.1f}" stroke="#eaecf0"/>'
                   f'<text x="{left - 6}" y="{y + 5:.1f}" font-size="14" text-anchor="end" fill="#667085">'
                   f'{top * tick * 100:.0f}</text>')
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
                   f'{_fmt(v)} ({t:%Y-%m-%d})</title></circle>')
    t_last, v_last, name_last = points[-1]
    x, y = xy(t_last, v_last)
    label = name_last if len(name_last) <= 28 else name_last[:27] + "…"
    # Beside the dot, on the side with room (a record set on the first day sits at the left edge).
    anchor = "middle" if single else ("start" if x < left + plot_w / 2 else "end")
    out.append(f'<text x="{x:.1f}" y="{max(y - 12, 16):.1f}" font-size="14" '
               f'text-anchor="{anchor}" font-weight="600">{escape(label)} {_fmt(v_last)}</text>')
    base = height - 10
    if single or points[0][0].date() == t_last.date():
        out.append(f'<text x="{left + plot_w / 2:.1f}" y="{base}" font-size="14" text-anchor="middle" '
                   f'fill="#667085">{t_last:%Y-%m-%d}</text>')
    else:
        out.append(f'<text x="{left}" y="{base}" font-size="14" fill="#667085">{points[0][0]:%Y-%m-%d}</text>'
                   f'<text x="{width - right}" y="{base}" font-size="14" text-anchor="end" fill="#667085">'
                   f'{t_last:%Y-%m-%d}</text>')
    out.append("</svg>")
    return mark_safe("".join(out))
