"""Line charts as inline SVG, drawn on the server (pure: no I/O, no JavaScript, nothing fetched).

Accessible: the ``<svg>`` is an image labelled by its ``<title>`` and ``<desc>``; both axes carry a label with
the unit; each point has a ``<title>`` (shown on hover) saying what it is; series differ by line pattern and
marker shape as well as colour (Okabe-Ito's palette, readable by colour-blind eyes). Text is
``currentColor``, so it follows the page's light or dark theme; every string is escaped.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from html import escape
from typing import Literal

PALETTE = ("#0072b2", "#d55e00", "#009e73", "#cc79a7", "#e69f00", "#56b4e9")
DASHES = {"solid": "", "dashed": "7 4", "dotted": "2 3", "none": ""}
Line = Literal["solid", "dashed", "dotted", "none"]
Marker = Literal["circle", "square", "diamond", "none"]

WIDTH, HEIGHT = 600, 230
LEFT, RIGHT, TOP, BOTTOM = 60, 56, 30, 44


@dataclass(frozen=True)
class Point:
    x: float
    """Seconds since the epoch on a time axis."""
    y: float | None
    """None: no value there (the line breaks)."""
    note: str = ""
    """The point's hover text."""


@dataclass(frozen=True)
class Series:
    name: str
    points: Sequence[Point]
    color: int = 0
    """An index into PALETTE."""
    line: Line = "solid"
    marker: Marker = "circle"
    step: bool = False
    """Hold each value until the next point (sampled status), rather than a straight line between them."""
    end_x: float | None = None
    """With ``step``: the last value holds until here (the last time it was read)."""


@dataclass(frozen=True)
class Reference:
    """A horizontal line, e.g. 100 % of the nominal quota."""

    y: float
    label: str


def time_chart(
    chart_id: str,
    title: str,
    desc: str,
    series: Sequence[Series],
    y_label: str,
    y_format: Callable[[float], str] = lambda v: f"{v:g}",
    reference: Reference | None = None,
    gap_seconds: float | None = None,
    x_range: tuple[float, float] | None = None,
    y_max: float | None = None,
) -> str:
    """A chart of ``series`` over UTC time. ``gap_seconds``: a line breaks where two points are further apart
    (no sample there). ``y_max``: at least this high (the axis starts at 0)."""
    xs = [p.x for s in series for p in s.points] + [s.end_x for s in series if s.end_x is not None]
    ys = [p.y for s in series for p in s.points if p.y is not None]
    if reference is not None:
        ys.append(reference.y)
    x0, x1 = x_range or ((min(xs), max(xs)) if xs else (0.0, 1.0))
    if x1 - x0 < 60:
        x0, x1 = x0 - 30, x1 + 30
    axis_label = time_axis_label(x0, x1)
    pad = (x1 - x0) * 0.03  # the first and last markers clear of the axes
    x0, x1 = x0 - pad, x1 + pad
    top = nice_ticks(0.0, max([*ys, y_max or 0.0, 1e-9]))
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def sx(x: float) -> float:
        return LEFT + (x - x0) / (x1 - x0) * plot_w

    def sy(y: float) -> float:
        return TOP + plot_h - y / top[-1] * plot_h

    out = [
        f'<svg id="{escape(chart_id)}" class="chart" role="img" aria-labelledby="{escape(chart_id)}-t '
        f'{escape(chart_id)}-d" viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" height="{HEIGHT}" '
        'style="max-width:100%;height:auto" font-size="12" font-family="system-ui,sans-serif" '
        'xmlns="http://www.w3.org/2000/svg">',
        f'<title id="{escape(chart_id)}-t">{escape(title)}</title>',
        f'<desc id="{escape(chart_id)}-d">{escape(desc)}</desc>',
    ]
    for tick in top:  # y grid and labels
        y = sy(tick)
        out.append(
            f'<line class="gridline" x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y:.1f}" y2="{y:.1f}" '
            'stroke="#d9e2ec"/>'
            f'<text x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end" fill="currentColor">'
            f"{escape(y_format(tick))}</text>"
        )
    for tick, label in time_ticks(x0, x1):
        x = sx(tick)
        out.append(
            f'<line class="gridline" x1="{x:.1f}" x2="{x:.1f}" y1="{TOP}" y2="{TOP + plot_h}" '
            'stroke="#eef2f6"/>'
            f'<text x="{x:.1f}" y="{TOP + plot_h + 16}" text-anchor="middle" fill="currentColor">'
            f"{escape(label)}</text>"
        )
    out.append(
        f'<line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{TOP + plot_h}" y2="{TOP + plot_h}" '
        'stroke="currentColor"/>'
        f'<line x1="{LEFT}" x2="{LEFT}" y1="{TOP}" y2="{TOP + plot_h}" stroke="currentColor"/>'
        f'<text x="{LEFT + plot_w / 2:.1f}" y="{HEIGHT - 6}" text-anchor="middle" fill="currentColor">'
        f"{escape(axis_label)}</text>"
        f'<text transform="translate(14 {TOP + plot_h / 2:.1f}) rotate(-90)" text-anchor="middle" '
        f'fill="currentColor">{escape(y_label)}</text>'
    )
    if reference is not None:
        y = sy(reference.y)
        out.append(
            f'<line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y:.1f}" y2="{y:.1f}" stroke="currentColor" '
            'stroke-dasharray="1 3"/>'
            f'<text x="{WIDTH - RIGHT + 4}" y="{y + 4:.1f}" fill="currentColor">'
            f"{escape(reference.label)}</text>"
        )
    for s in series:
        out.append(_series(s, sx, sy, gap_seconds))
    out.append(_legend(series))
    out.append("</svg>")
    return "".join(out)


def _series(s: Series, sx: Callable[[float], float], sy: Callable[[float], float], gap: float | None) -> str:
    color = PALETTE[s.color % len(PALETTE)]
    parts = [f'<g class="series" data-series="{escape(s.name)}">']
    if s.line != "none":
        dash = f' stroke-dasharray="{DASHES[s.line]}"' if DASHES[s.line] else ""
        for run in _runs(s, gap):
            coords = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in run)
            parts.append(f'<polyline fill="none" stroke="{color}" stroke-width="2"{dash} points="{coords}"/>')
    if s.marker != "none":
        for p in s.points:
            if p.y is not None:
                parts.append(_marker(s.marker, sx(p.x), sy(p.y), color, p.note))
    parts.append("</g>")
    return "".join(parts)


def _runs(s: Series, gap: float | None) -> list[list[tuple[float, float]]]:
    """The polylines of a series: broken at a missing value and across a gap of more than ``gap`` seconds;
    with ``step``, a corner at each new value."""
    runs: list[list[tuple[float, float]]] = [[]]
    previous: Point | None = None
    for p in s.points:
        if p.y is None or (previous is not None and gap is not None and p.x - previous.x > gap):
            if s.step and previous is not None and previous.y is not None and p.y is None:
                runs[-1].append((p.x, previous.y))
            runs.append([])
        if p.y is not None:
            if s.step and runs[-1]:
                runs[-1].append((p.x, runs[-1][-1][1]))
            runs[-1].append((p.x, p.y))
        previous = p
    last = runs[-1][-1] if runs[-1] else None
    held = s.step and s.end_x is not None and last is not None and last[0] < s.end_x
    if held and last is not None and s.end_x is not None and (gap is None or s.end_x - last[0] <= gap):
        runs[-1].append((s.end_x, last[1]))  # the last value holds until it was last read
    return [run for run in runs if run]


def _marker(shape: Marker, x: float, y: float, color: str, note: str) -> str:
    tip = f"<title>{escape(note)}</title>" if note else ""
    if shape == "square":
        return f'<rect x="{x - 4:.1f}" y="{y - 4:.1f}" width="8" height="8" fill="{color}">{tip}</rect>'
    if shape == "diamond":
        pts = f"{x:.1f},{y - 5:.1f} {x + 5:.1f},{y:.1f} {x:.1f},{y + 5:.1f} {x - 5:.1f},{y:.1f}"
        return f'<polygon points="{pts}" fill="{color}">{tip}</polygon>'
    return f'<circle cx="{x:.1f}" cy="{y:.1f}" r="4" fill="{color}">{tip}</circle>'


def _legend(series: Sequence[Series]) -> str:
    parts, x = ['<g class="legend">'], LEFT
    for s in series:
        color = PALETTE[s.color % len(PALETTE)]
        dash = f' stroke-dasharray="{DASHES[s.line]}"' if s.line not in ("none", "solid") else ""
        if s.line != "none":
            parts.append(
                f'<line x1="{x}" x2="{x + 22}" y1="12" y2="12" stroke="{color}" stroke-width="2"{dash}/>'
            )
        if s.marker != "none":
            parts.append(_marker(s.marker, x + 11, 12, color, ""))
        parts.append(f'<text x="{x + 28}" y="16" fill="currentColor">{escape(s.name)}</text>')
        x += 40 + 7 * len(s.name)
    parts.append("</g>")
    return "".join(parts)


def nice_ticks(low: float, high: float, count: int = 5) -> list[float]:
    """Round tick values from ``low`` to at least ``high`` (1, 2, 2.5 or 5 times a power of ten apart)."""
    span = max(high - low, 1e-9)
    raw = span / count
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= raw)
    ticks, value = [], low
    while True:
        ticks.append(round(value, 10))
        if value >= high - 1e-9:
            return ticks
        value += step


_TIME_STEPS = (60, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400, 2 * 86400, 7 * 86400)


def time_ticks(x0: float, x1: float, most: int = 7) -> list[tuple[float, str]]:
    """Ticks on whole UTC minutes, hours or days, at most ``most`` of them, with their labels."""
    step = next((s for s in _TIME_STEPS if (x1 - x0) / s <= most), 30 * 86400)
    first = math.ceil(x0 / step) * step
    fmt = "%H:%M" if step < 86400 else "%m-%d"
    ticks = []
    t = float(first)
    while t <= x1:
        ticks.append((t, datetime.fromtimestamp(t, timezone.utc).strftime(fmt)))
        t += step
    return ticks


def time_axis_label(x0: float, x1: float) -> str:
    start = datetime.fromtimestamp(x0, timezone.utc)
    end = datetime.fromtimestamp(x1, timezone.utc)
    if x1 - x0 < 86400 * 2 and start.date() == end.date():
        return f"time (UTC), {start:%Y-%m-%d}"
    if x1 - x0 < 86400 * 2:
        return f"time (UTC), {start:%Y-%m-%d} to {end:%Y-%m-%d}"
    return f"date (UTC), {start:%Y-%m-%d} to {end:%Y-%m-%d}"


def duration_unit(longest_seconds: float) -> tuple[float, str]:
    """The divisor and unit name that keep durations readable: seconds, minutes or hours."""
    if longest_seconds >= 3 * 3600:
        return 3600.0, "hours"
    if longest_seconds >= 180:
        return 60.0, "minutes"
    return 1.0, "seconds"
