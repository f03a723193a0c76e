"""The picture of a night: running shards over time per step and team, one panel per system, Spot evictions
as red ticks, the triggerer kill as a grey band, the ideal and the deadline as vertical lines (pure SVG
text, no plotting library)."""

from __future__ import annotations

from html import escape
from typing import Any

SERIES = (("align", "#4e79a7"), ("call", "#59a14f"), ("gather", "#f28e2b"), ("risk", "#b07aa1"))
WIDTH, PANEL, LEFT, TOP, GAP = 900, 220, 60, 30, 50
MAX_POINTS = 400  # samples drawn per panel: about two per pixel column


def _panel(
    phase: dict[str, Any], y0: float, x_max: float, y_max: float, ideal: float, deadline: float
) -> list[str]:
    plot_w, plot_h = WIDTH - LEFT - 20, PANEL

    def x(t: float) -> float:
        return LEFT + plot_w * min(max(t, 0.0), x_max) / x_max

    def y(v: float) -> float:
        return y0 + plot_h - plot_h * v / y_max

    out = [
        f'<text x="{LEFT}" y="{y0 - 8}" font-size="13" font-weight="bold">{escape(phase["system"])}</text>'
    ]
    out.append(f'<rect x="{LEFT}" y="{y0}" width="{plot_w}" height="{plot_h}" fill="none" stroke="#999"/>')
    start = phase["started"]
    # A step line: the count sampled at t holds until the next sample (at most MAX_POINTS samples drawn).
    every = max(1, len(phase["timeline"]) // MAX_POINTS)
    sampled = phase["timeline"][::every]
    times = [p["at"] - start for p in sampled]
    counts = [p["running"] for p in sampled]
    steps = [
        (t, c) for i, (t, c) in enumerate(zip(times, counts, strict=True)) for t in (t, *times[i + 1 : i + 2])
    ]
    base = [0.0] * len(steps)
    for name, colour in SERIES:
        top = [b + c.get(name, 0) for b, (_, c) in zip(base, steps, strict=True)]
        if any(t > b for t, b in zip(top, base, strict=True)):
            upper = " ".join(f"{x(t):.1f},{y(v):.1f}" for (t, _), v in zip(steps, top, strict=True))
            lower = " ".join(
                f"{x(t):.1f},{y(v):.1f}" for (t, _), v in reversed(list(zip(steps, base, strict=True)))
            )
            out.append(
                f'<polygon points="{upper} {lower}" fill="{colour}" fill-opacity="0.8" stroke="none"/>'
            )
        base = top
    for e in phase["evictions"]:
        ex = x(e["at"] - start)
        out.append(
            f'<line x1="{ex:.1f}" y1="{y0}" x2="{ex:.1f}" y2="{y0 + 10}" stroke="#d62728" stroke-width="2"/>'
        )
    kill = phase.get("triggerer_kill") or {}
    if "at" in kill:
        kx, bx = x(kill["at"]), x(kill.get("back", kill["at"]))
        out.append(
            f'<rect x="{kx:.1f}" y="{y0}" width="{max(bx - kx, 1):.1f}" height="{plot_h}" '
            'fill="#777" fill-opacity="0.15"/>'
        )
    for at, label, dash in ((ideal, "ideal", "2,3"), (deadline, "deadline", "6,3")):
        if at <= x_max:
            lx = x(at)
            out.append(
                f'<line x1="{lx:.1f}" y1="{y0}" x2="{lx:.1f}" y2="{y0 + plot_h}" stroke="#333" '
                f'stroke-dasharray="{dash}"/>'
            )
            out.append(f'<text x="{lx + 3:.1f}" y="{y0 + 12}" font-size="10">{label}</text>')
    for frac in (0, 0.5, 1):
        v = y_max * frac
        out.append(f'<text x="{LEFT - 6}" y="{y(v) + 4:.1f}" font-size="10" text-anchor="end">{v:.0f}</text>')
    return out


def render(phases: list[dict[str, Any]], ideal: float, deadline: float, title: str) -> str:
    x_max = max((p["timeline"][-1]["at"] - p["started"] for p in phases if p["timeline"]), default=1.0)
    x_max = max(x_max, deadline * 1.02, 1.0)
    y_max = max((sum(s["running"].values()) for p in phases for s in p["timeline"]), default=1) or 1
    height = TOP + len(phases) * (PANEL + GAP) + 40
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" font-family="sans-serif" '
        f'role="img" aria-label="{escape(title)}">',
        '<rect width="100%" height="100%" fill="white"/>',
        f'<text x="{LEFT}" y="18" font-size="14">{escape(title)}</text>',
    ]
    for i, phase in enumerate(phases):
        out += _panel(phase, TOP + 20 + i * (PANEL + GAP), x_max, y_max, ideal, deadline)
    axis_y = TOP + len(phases) * (PANEL + GAP) + 5
    for frac in (0, 0.25, 0.5, 0.75, 1):
        t = x_max * frac
        tx = LEFT + (WIDTH - LEFT - 20) * frac
        out.append(f'<text x="{tx:.1f}" y="{axis_y}" font-size="10" text-anchor="middle">{t:.0f} s</text>')
    lx = LEFT
    for name, colour in SERIES:
        out.append(f'<rect x="{lx}" y="{axis_y + 10}" width="10" height="10" fill="{colour}"/>')
        out.append(f'<text x="{lx + 14}" y="{axis_y + 19}" font-size="11">{name}</text>')
        lx += 80
    out.append(
        f'<line x1="{lx}" y1="{axis_y + 10}" x2="{lx}" y2="{axis_y + 20}" stroke="#d62728" stroke-width="2"/>'
    )
    out.append(f'<text x="{lx + 5}" y="{axis_y + 19}" font-size="11">Spot eviction</text>')
    out.append(
        f'<rect x="{lx + 95}" y="{axis_y + 10}" width="10" height="10" fill="#777" fill-opacity="0.3"/>'
    )
    out.append(f'<text x="{lx + 110}" y="{axis_y + 19}" font-size="11">a triggerer down</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"
