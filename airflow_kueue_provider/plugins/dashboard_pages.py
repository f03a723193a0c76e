"""The UI pages: self-contained (inline CSS and script, nothing fetched from elsewhere), rendered from the
Jinja templates in ``templates/`` (``page_templates``: every value escaped). Here what each shows; there the
HTML. A page updates itself from a server-sent event stream of the plugin (``api/…/stream``): the server
sends the parts that changed, rendered here from the same macros as the page, and the script swaps them in;
no reload."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from urllib.parse import urlencode

from .dashboard_data import KUEUE_OPERATORS, JobPanel, LiveState, TaskInstanceFacts
from .page_templates import render, render_macro
from .svg_chart import ChartView
from .trend_pages import (
    Cells,
    QueuesOverTime,
    queue_runs_chart_view,
    queues_over_time_view,
    task_trend_view,
)
from .views.index_grid import IndexGrid
from .views.queue_overview import QueueRow
from .views.run_history import QueueHistory, RunRecord
from .views.run_trends import QueueSample, TaskTrend

GRID_CELL_LIMIT = 2_000
"""Up to this many indexes the grid draws one cell per index; above it, one band per run of a state."""


@dataclass(frozen=True)
class HistoryView:
    """One ClusterQueue's recent runs, as ``history.html`` shows them."""

    cluster_queue: str
    line: str
    chart: ChartView | None
    rows: tuple[Cells, ...]


@dataclass(frozen=True)
class PanelView:
    """One Job of the task instance, as ``task.html`` shows it."""

    job: JobPanel
    meta: str
    summary_part: str
    grid_part: str
    log_url: str | None = None
    """The Job's on-demand log tail (``api/task/log``, relative to the page) without its ``index``; None:
    no log tail on this page."""


@dataclass(frozen=True)
class RunLinks:
    """The Kueue tab's lines on this task instance's forecast and deadline (``night_pages``), and its links
    to the whole DAG run and to the DAG's nights; empty hrefs: no links (another operator's task)."""

    lines: tuple[str, ...] = ()
    dag_run_href: str = ""
    nights_href: str = ""


def part_id(kind: str, job_name: str) -> str:
    """The ``data-part`` of a Job's live element: ``summary:<job>``, ``grid:<job>`` (the queue table's is
    ``queues``)."""
    return f"{kind}:{job_name}"


def queues_page(
    rows: Sequence[QueueRow],
    histories: Sequence[QueueHistory] = (),
    stream: str | None = None,
    samples: Mapping[str, list[QueueSample]] | None = None,
    now: float = 0.0,
) -> str:
    """``samples``: each ClusterQueue's status over time (its plots), None for none."""
    return render(
        "queues.html",
        title="Kueue queues",
        stream=stream,
        rows=rows,
        over_time=_over_time(rows, samples, now),
        histories=[_history_view(h) for h in histories],
    )


def queues_part(
    rows: Sequence[QueueRow], samples: Mapping[str, list[QueueSample]] | None = None, now: float = 0.0
) -> str:
    """What the live stream redraws: the table, and the plots of the table's ClusterQueues over time."""
    return render_macro("parts.html", "queues_part", rows, _over_time(rows, samples, now))


def _over_time(
    rows: Sequence[QueueRow], samples: Mapping[str, list[QueueSample]] | None, now: float
) -> QueuesOverTime | None:
    if samples is None:
        return None
    names = sorted({row.cluster_queue for row in rows if row.cluster_queue_pending is not None})
    return queues_over_time_view(names, dict(samples), now)


def history_html(histories: Sequence[QueueHistory]) -> str:
    """The last runs of each ClusterQueue: wait, run time, evictions and cost, from the tasks' results."""
    return render_macro("history.html", "history", [_history_view(h) for h in histories])


def _history_view(history: QueueHistory) -> HistoryView:
    cost = f", about {_usd(history.cost_usd)}" if history.cost_usd is not None else ""
    line = (
        f"last {len(history.runs)} runs: median queue wait {_seconds(history.median_queued_seconds)}, "
        f"{history.evictions} evictions{cost}"
    )
    rows = tuple(_history_row(r) for r in history.runs)
    return HistoryView(history.cluster_queue, line, queue_runs_chart_view(history), rows)


def _history_row(run: RunRecord) -> Cells:
    task = run.task_id + (f" [{run.map_index}]" if run.map_index >= 0 else "")
    text = (run.finished_at.strftime("%Y-%m-%d %H:%M"), run.dag_id, task, run.run_id, run.namespace)
    numbers = (
        _seconds(run.queued_seconds),
        _seconds(run.running_seconds),
        f"{run.succeeded}/{run.completions}",
        str(run.failed),
        str(run.evictions),
        "" if run.cost_usd is None else _usd(run.cost_usd),
    )
    return text, numbers


def _usd(value: float) -> str:
    return "< $0.01" if 0 < value < 0.01 else f"${value:,.2f}"


def _seconds(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.0f} s" if value < 120 else f"{value / 60:.1f} min"


def queues_table(rows: Sequence[QueueRow]) -> str:
    return render_macro("parts.html", "queues_table", rows)


def task_page(
    title: str,
    panels: Sequence[JobPanel],
    facts: TaskInstanceFacts | None = None,
    stream: str | None = None,
    trend: TaskTrend | None = None,
    log_query: str | None = None,
    trend_note: str = "",
    run: RunLinks | None = None,
) -> str:
    """The task instance's Jobs, newest try first; without any, a plain sentence saying why (``facts``:
    what Airflow knows about the task instance, None when that could not be read). ``stream`` only while
    the newest Job runs. ``trend``: the task's recent runs, plotted below (also when its Jobs are gone).
    ``log_query``: the page's query (the task instance), for each Job's log tail form; None: no form.
    ``trend_note``: why the recent runs are not shown, in their place. ``run``: the forecast and deadline
    lines and the links to the DAG run and the nights."""
    return render(
        "task.html",
        title=title,
        stream=stream if panels else None,
        panels=[_panel(panel, log_query) for panel in reversed(panels)],
        message="" if panels else no_job_message(facts),
        trend=None if trend is None else task_trend_view(trend),
        trend_note=trend_note,
        run=run or RunLinks(),
        cell_limit=GRID_CELL_LIMIT,
    )


def summary_html(live: LiveState) -> str:
    return render_macro("parts.html", "summary", live)


def no_job_message(facts: TaskInstanceFacts | None) -> str:
    kueue = " or ".join(sorted(KUEUE_OPERATORS))
    if facts is None:
        return "This task instance has no Kueue Job (yet, or any longer)."
    if facts.operator is None and facts.mapped_instances:
        return (
            f"This is a mapped task with {facts.mapped_instances} task instances, each with its own Kueue "
            "Job: open one of them (Task Instances tab) to see its Job."
        )
    if facts.operator is None:
        return "Airflow has no such task instance, so it has no Kueue Job."
    if not facts.makes_kueue_jobs:
        return (
            f"This task has no Kueue Job: its operator is {facts.operator}, and only {kueue} tasks run "
            "Kueue Jobs."
        )
    return (
        "This task instance has no Kueue Job: it has not submitted one yet, or its Jobs were deleted "
        "(a finished Job is deleted ttl_seconds_after_finished after it ends, one day by default)."
    )


def error_page(message: str) -> str:
    return render("error.html", title="Kueue", stream=None, message=message)


def _panel(panel: JobPanel, log_query: str | None = None) -> PanelView:
    meta = f"try {panel.try_number}"
    if panel.workload_name:
        meta += f", Workload {panel.workload_name}"
    if panel.cluster_queue:
        meta += f", ClusterQueue {panel.cluster_queue}"
    if panel.worker_cluster:
        meta += f", worker cluster {panel.worker_cluster} (MultiKueue)"
    if (parent := panel.parent) is not None:
        of = f"{parent.parent.child_part_noun} {parent.part} of {parent.parent.kind} {parent.name}"
        meta += f", {of} (admitted as one Workload)"
    if panel.placement:
        meta += f", placed on {panel.placement}"
    log_url = None if log_query is None else f"api/task/log?{log_query}&{urlencode({'job': panel.name})}"
    return PanelView(panel, meta, part_id("summary", panel.name), part_id("grid", panel.name), log_url)


def grid_html(grid: IndexGrid) -> str:
    return render_macro("parts.html", "grid", grid, GRID_CELL_LIMIT)
