"""The plots of the Kueue pages (around ``svg_chart``): a task's recent runs against its ideal, a
ClusterQueue's recent runs, and a ClusterQueue's quota and Workloads over time. Here the words and numbers of
each (a view); the HTML in ``templates/trends.html``, which escapes every value."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from .page_templates import render_macro
from .svg_chart import ChartView, Point, Reference, Series, chart_view, duration_unit, time_chart
from .views.run_history import QueueHistory
from .views.run_trends import (
    SAMPLE_WINDOW_SECONDS,
    QueueSample,
    TaskRunPoint,
    TaskTrend,
    quota_series,
)

SAMPLE_GAP_SECONDS = 150.0
"""A ClusterQueue's line breaks where two samples are further apart: no queue page was open then (an open
page reads every 30 s at least, and an unchanged stretch keeps a sample a minute)."""

IDEAL_SENTENCE = (
    "Ideal: the shortest run time among these runs of the task with the same number of shards that "
    "finished every shard."
)


Cells = tuple[tuple[str, ...], tuple[str, ...]]
"""A table row: its plain cells, then its number cells."""


@dataclass(frozen=True)
class TaskTrendView:
    sentences: tuple[str, ...]
    chart: ChartView | None
    """None: the task has no result yet (and nothing else is shown)."""
    note: str
    rows: tuple[Cells, ...]


@dataclass(frozen=True)
class QueueOverTime:
    name: str
    summary: str | None
    """None: no samples yet (and no charts)."""
    charts: tuple[ChartView, ...]


@dataclass(frozen=True)
class QueuesOverTime:
    window: str
    queues: tuple[QueueOverTime, ...]


def chart_id(*parts: str) -> str:
    """An element id from names (letters, digits and dashes only)."""
    return re.sub(r"[^A-Za-z0-9-]+", "-", "-".join(parts)).strip("-").lower() or "chart"


def seconds_text(value: float | None) -> str:
    if value is None:
        return "-"
    if value < 120:
        return f"{value:.0f} s"
    if value < 3 * 3600:
        return f"{value / 60:.1f} min"
    return f"{value / 3600:.1f} h"


def _when(at: datetime) -> str:
    return f"{at.astimezone(UTC):%Y-%m-%d %H:%M} UTC"


def _clock(at: float) -> str:
    return f"{datetime.fromtimestamp(at, UTC):%Y-%m-%d %H:%M} UTC"


# --- per task ----------------------------------------------------------------------------------------------


def task_trend_html(trend: TaskTrend) -> str:
    """The task's recent runs: a sentence on the newest, the newest runs against the ones before, the plot
    of run time, ideal and queue wait, and the numbers in a table."""
    return render_macro("trends.html", "task_trend", task_trend_view(trend))


def task_trend_view(trend: TaskTrend) -> TaskTrendView:
    if not trend.points:
        return TaskTrendView((), None, "", ())
    newest = trend.newest
    assert newest is not None
    sentences = [_newest_sentence(newest)]
    comparison = trend.comparison()
    if comparison is not None:
        sentences.append(
            f"Median of the newest {comparison.runs} runs against the {comparison.runs} before: run time "
            f"{seconds_text(comparison.running_now)} against {seconds_text(comparison.running_before)}, "
            f"queue wait {seconds_text(comparison.queued_now)} against "
            f"{seconds_text(comparison.queued_before)}."
        )
    first = trend.points[0].finished_at
    window = (
        f"The last {len(trend.points)} runs with a result, {_when(first)} to {_when(newest.finished_at)}, "
        "from the task's results in Airflow's database; where a result adds up every attempt of a task "
        "instance, its run time and wait are those totals."
    )
    rows = tuple(
        (
            (_when(p.finished_at), p.run_id),
            (
                seconds_text(p.running_seconds),
                seconds_text(p.ideal_seconds),
                seconds_text(p.queued_seconds),
                f"{p.succeeded}/{p.completions}",
                str(p.evictions),
            ),
        )
        for p in reversed(trend.points)
    )
    return TaskTrendView(tuple(sentences), task_chart_view(trend), f"{IDEAL_SENTENCE} {window}", rows)


def _newest_sentence(p: TaskRunPoint) -> str:
    text = f"Newest run ({p.run_id}, {_when(p.finished_at)}): ran {seconds_text(p.running_seconds)}"
    if p.over_ideal is not None:
        text += f", {p.over_ideal:.1f}x its ideal of {seconds_text(p.ideal_seconds)}"
    text += f"; waited {seconds_text(p.queued_seconds)} in the queue"
    if p.evictions:
        text += f"; evicted {p.evictions} time{'s' if p.evictions > 1 else ''}"
    return text + "."


def task_chart(trend: TaskTrend) -> str:
    return time_chart(task_chart_view(trend))


def task_chart_view(trend: TaskTrend) -> ChartView:
    points = trend.points
    longest = max(
        [v for p in points for v in (p.running_seconds, p.queued_seconds, p.ideal_seconds) if v is not None]
        or [0.0]
    )
    divisor, unit = duration_unit(longest)

    def scaled(value: float | None) -> float | None:
        return None if value is None else value / divisor

    def note(p: TaskRunPoint) -> str:
        extra = f", {p.evictions} evictions" if p.evictions else ""
        return (
            f"{p.run_id} ({_when(p.finished_at)}): ran {seconds_text(p.running_seconds)}, ideal "
            f"{seconds_text(p.ideal_seconds)}, waited {seconds_text(p.queued_seconds)}, "
            f"{p.succeeded}/{p.completions} shards{extra}"
        )

    at = [p.finished_at.timestamp() for p in points]
    series = [
        Series(
            "run time",
            [Point(x, scaled(p.running_seconds), note(p)) for x, p in zip(at, points, strict=True)],
            0,
        ),
        Series(
            "ideal",
            [Point(x, scaled(p.ideal_seconds)) for x, p in zip(at, points, strict=True)],
            2,
            line="dashed",
            marker="none",
        ),
        Series(
            "queue wait",
            [Point(x, scaled(p.queued_seconds), note(p)) for x, p in zip(at, points, strict=True)],
            1,
            line="dotted",
            marker="square",
        ),
    ]
    name = f"{trend.task_id}" + (f" [{trend.map_index}]" if trend.map_index >= 0 else "")
    newest = points[-1]
    desc = (
        f"Run time, ideal run time and queue wait of the last {len(points)} runs of task {name} of DAG "
        f"{trend.dag_id}, in {unit}, by the time each run finished. {_newest_sentence(newest)}"
    )
    return chart_view(
        chart_id("trend", trend.dag_id, trend.task_id, str(trend.map_index)),
        f"Run time against the ideal, and queue wait: {trend.dag_id} / {name}",
        desc,
        series,
        f"duration ({unit})",
    )


# --- per ClusterQueue --------------------------------------------------------------------------------------


def queue_runs_chart(history: QueueHistory) -> str:
    """Run time and queue wait of the ClusterQueue's recent runs (several tasks: points, not lines)."""
    view = queue_runs_chart_view(history)
    return "" if view is None else time_chart(view)


def queue_runs_chart_view(history: QueueHistory) -> ChartView | None:
    """None without runs."""
    runs = list(reversed(history.runs))
    if not runs:
        return None
    longest = max([v for r in runs for v in (r.running_seconds, r.queued_seconds) if v is not None] or [0.0])
    divisor, unit = duration_unit(longest)

    def note(i: int) -> str:
        r = runs[i]
        task = r.task_id + (f" [{r.map_index}]" if r.map_index >= 0 else "")
        return (
            f"{r.dag_id} / {task} / {r.run_id} ({_when(r.finished_at)}): "
            f"ran {seconds_text(r.running_seconds)}, waited {seconds_text(r.queued_seconds)}"
        )

    def point(i: int, value: float | None) -> Point:
        return Point(runs[i].finished_at.timestamp(), None if value is None else value / divisor, note(i))

    series = [
        Series("run time", [point(i, r.running_seconds) for i, r in enumerate(runs)], 0, line="none"),
        Series(
            "queue wait",
            [point(i, r.queued_seconds) for i, r in enumerate(runs)],
            1,
            line="none",
            marker="square",
        ),
    ]
    return chart_view(
        chart_id("runs", history.cluster_queue),
        f"Recent runs in ClusterQueue {history.cluster_queue}: run time and queue wait",
        f"Run time and queue wait, in {unit}, of the last {len(runs)} runs in ClusterQueue "
        f"{history.cluster_queue} of the DAGs whose results you may read, by the time each run finished; "
        "each point names its DAG, task and run.",
        series,
        f"duration ({unit})",
    )


def window_sentence(samples: Sequence[QueueSample]) -> str:
    since = f"since {_clock(samples[0].at)}, " if samples else ""
    return (
        f"Sampled by this API server process whenever it reads the ClusterQueues for this page (each load, "
        f"and every change or 30 s while a page is open): {since}at most the last "
        f"{SAMPLE_WINDOW_SECONDS / 3600:.0f} hours, kept in memory only (a restart starts again, and each "
        "API server process keeps its own). A line breaks where no page was open."
    )


def queue_over_time_html(name: str, samples: Sequence[QueueSample], now: float) -> str:
    """Quota reserved against nominal per flavor and resource, and pending and admitted Workloads."""
    return render_macro("trends.html", "queue_over_time", queue_over_time_view(name, samples, now))


def queue_over_time_view(name: str, samples: Sequence[QueueSample], now: float) -> QueueOverTime:
    if not samples:
        return QueueOverTime(name, None, ())
    x_range = (samples[0].at, now)
    quota = [
        Series(
            f"{flavor} {resource}",
            [Point(at, value) for at, value in values],
            i,
            line=("solid", "dashed", "dotted")[i % 3],
            marker="none",
            step=True,
            end_x=now,
        )
        for i, ((flavor, resource), values) in enumerate(sorted(quota_series(samples).items()))
    ]
    latest = samples[-1]
    peak = max(samples, key=lambda s: s.pending)
    now_text = ", ".join(
        f"{u.flavor} {u.resource} {u.percent:.0f}%" for u in latest.quota if u.percent is not None
    )
    workloads = [
        Series("pending", [Point(s.at, s.pending) for s in samples], 1, marker="none", step=True, end_x=now),
        Series(
            "admitted",
            [Point(s.at, s.admitted) for s in samples],
            0,
            line="dashed",
            marker="none",
            step=True,
            end_x=now,
        ),
    ]
    summary = (
        f"Latest ({_clock(latest.at)}): {latest.pending} pending, {latest.admitted} admitted"
        + (f"; quota reserved {now_text} of nominal" if now_text else "")
        + f". Most pending: {peak.pending} at {_clock(peak.at)}."
    )
    charts: list[ChartView] = []
    if quota:
        charts.append(
            chart_view(
                chart_id("quota", name),
                f"ClusterQueue {name}: quota reserved, percent of nominal",
                f"Quota reserved by admitted Workloads in ClusterQueue {name}, per flavor and resource, as a "
                f"percentage of its nominal quota (above 100 while borrowing), over {len(samples)} samples. "
                + summary,
                quota,
                "reserved (% of nominal)",
                lambda v: f"{v:g}%",
                reference=Reference(100.0, "nominal"),
                gap_seconds=SAMPLE_GAP_SECONDS,
                x_range=x_range,
                y_max=100.0,
            )
        )
    charts.append(
        chart_view(
            chart_id("workloads", name),
            f"ClusterQueue {name}: pending and admitted Workloads",
            f"Workloads pending and admitted in ClusterQueue {name} (every namespace), over "
            f"{len(samples)} samples. " + summary,
            workloads,
            "Workloads (count)",
            lambda v: f"{v:g}" if v == int(v) else "",
            gap_seconds=SAMPLE_GAP_SECONDS,
            x_range=x_range,
            y_max=4.0,
        )
    )
    return QueueOverTime(name, summary, tuple(charts))


def queues_over_time_html(names: Sequence[str], samples: dict[str, list[QueueSample]], now: float) -> str:
    """The section of the queue page: one pair of plots per ClusterQueue shown in the table above."""
    view = queues_over_time_view(names, samples, now)
    return "" if view is None else render_macro("trends.html", "queues_over_time", view)


def queues_over_time_view(
    names: Sequence[str], samples: dict[str, list[QueueSample]], now: float
) -> QueuesOverTime | None:
    """None without names."""
    if not names:
        return None
    every = [s for name in names for s in samples.get(name, [])]
    first = [min(every, key=lambda s: s.at)] if every else []
    return QueuesOverTime(
        window_sentence(first),
        tuple(queue_over_time_view(name, samples.get(name, []), now) for name in names),
    )
