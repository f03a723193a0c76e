"""Line charts as inline SVG, drawn on the server (no JavaScript, nothing fetched): the geometry here (scales,
ticks, coordinates, in Python), the markup in ``templates/chart.svg`` (autoescaped, like every template).

Accessible: the ``<svg>`` is an image labelled by its ``<title>`` and ``<desc>``; both axes carry a label with
the unit; each point has a ``<title>`` (shown on hover) saying what it is; series differ by line pattern and
marker shape as well as colour (Okabe-Ito's palette, readable by colour-blind eyes). Text is
``currentColor``, so it follows the page's light or dark theme; every string is escaped by the template.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal

from .page_templates import render_macro

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


@dataclass(frozen=True)
class MarkerView:
    """A point's marker where the chart draws it; ``note``: its hover title, none when empty."""

    shape: Marker
    x: float
    y: float
    color: str
    note: str = ""


@dataclass(frozen=True)
class SeriesView:
    name: str
    color: str
    dash: str
    """The lines' ``stroke-dasharray``; empty for a solid line."""
    polylines: tuple[str, ...]
    """Each unbroken run's ``points`` (drawn only when the series has a line)."""
    markers: tuple[MarkerView, ...]


@dataclass(frozen=True)
class LegendEntry:
    x: int
    name: str
    color: str
    dash: str
    line: bool
    marker: MarkerView | None


@dataclass(frozen=True)
class ChartView:
    """What ``chart.svg`` draws: every position computed here, every text still to be escaped there."""

    id: str
    title: str
    desc: str
    y_ticks: tuple[tuple[float, str], ...]
    """Each horizontal gridline's y and its label."""
    x_ticks: tuple[tuple[float, str], ...]
    """Each vertical gridline's x and its label."""
    axis_label: str
    y_label: str
    reference: tuple[float, str] | None
    """The reference line's y and its label."""
    series: tuple[SeriesView, ...]
    legend: tuple[LegendEntry, ...]
    width: int = WIDTH
    height: int = HEIGHT
    left: int = LEFT
    right: int = WIDTH - RIGHT
    top: int = TOP
    bottom: int = HEIGHT - BOTTOM


def time_chart(view: ChartView) -> str:
    """The chart ``chart_view`` laid out, drawn as inline SVG (``templates/chart.svg``, escaped)."""
    return render_macro("chart.svg", "chart", view)


def chart_view(
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
) -> ChartView:
    """A chart of ``series`` over UTC time, laid out for ``time_chart`` to draw. ``gap_seconds``: a line
    breaks where two points are further apart (no sample there). ``y_max``: at least this high (the axis
    starts at 0)."""
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

    return ChartView(
        id=chart_id,
        title=title,
        desc=desc,
        y_ticks=tuple((sy(tick), y_format(tick)) for tick in top),
        x_ticks=tuple((sx(tick), label) for tick, label in time_ticks(x0, x1)),
        axis_label=axis_label,
        y_label=y_label,
        reference=None if reference is None else (sy(reference.y), reference.label),
        series=tuple(_series(s, sx, sy, gap_seconds) for s in series),
        legend=_legend(series),
    )


def _series(
    s: Series, sx: Callable[[float], float], sy: Callable[[float], float], gap: float | None
) -> SeriesView:
    color = PALETTE[s.color % len(PALETTE)]
    lines: tuple[str, ...] = ()
    if s.line != "none":
        lines = tuple(" ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in run) for run in _runs(s, gap))
    markers: tuple[MarkerView, ...] = ()
    if s.marker != "none":
        markers = tuple(
            MarkerView(s.marker, sx(p.x), sy(p.y), color, p.note) for p in s.points if p.y is not None
        )
    return SeriesView(s.name, color, DASHES[s.line], lines, markers)


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


def _legend(series: Sequence[Series]) -> tuple[LegendEntry, ...]:
    entries, x = [], LEFT
    for s in series:
        color = PALETTE[s.color % len(PALETTE)]
        marker = None if s.marker == "none" else MarkerView(s.marker, x + 11, 12, color)
        entries.append(LegendEntry(x, s.name, color, DASHES[s.line], s.line != "none", marker))
        x += 40 + 7 * len(s.name)
    return tuple(entries)


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
        ticks.append((t, datetime.fromtimestamp(t, UTC).strftime(fmt)))
        t += step
    return ticks


def time_axis_label(x0: float, x1: float) -> str:
    start = datetime.fromtimestamp(x0, UTC)
    end = datetime.fromtimestamp(x1, UTC)
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
