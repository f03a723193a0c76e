"""HTML for the UI pages: self-contained (inline CSS and script, nothing fetched from elsewhere), every value
escaped. A page updates itself from a server-sent event stream of the plugin (``api/…/stream``): the server
sends the parts that changed, already rendered here, and the script swaps them in; no reload."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape

from ..kueue.index_grid import IndexGrid
from ..kueue.queue_overview import QueueRow
from ..kueue.run_history import QueueHistory, RunRecord
from ..kueue.run_trends import QueueSample, TaskTrend
from .dashboard_data import KUEUE_OPERATORS, JobPanel, LiveState, TaskInstanceFacts
from .trend_pages import queue_runs_chart, queues_over_time_html, task_trend_html

GRID_CELL_LIMIT = 2_000
"""Up to this many indexes the grid draws one cell per index; above it, one band per run of a state."""

_CSS = """
body{font-family:system-ui,sans-serif;margin:1rem;color:#1f2933}
table{border-collapse:collapse;margin:.5rem 0 1.5rem}
th,td{border-bottom:1px solid #d9e2ec;padding:.3rem .6rem;text-align:left;vertical-align:top}
th{background:#f0f4f8}.num{text-align:right}.warn{color:#b42318}.muted{color:#627d98}
.grid{display:flex;flex-wrap:wrap;gap:1px;max-width:60rem}.cell{width:10px;height:10px}
.bands{display:flex;height:18px;max-width:60rem}
.done{background:#2f9e44}.failed{background:#e03131}.running{background:#1c7ed6}.waiting{background:#ced4da}
.legend span{display:inline-block;margin-right:1rem}.legend i{display:inline-block;width:10px;height:10px;
margin-right:.3rem}.live{font-size:.8rem}
.charts{display:flex;flex-wrap:wrap;gap:1rem}.chart{display:block;margin:.3rem 0 .8rem}
.trend-summary{margin:.3rem 0}details{margin:.3rem 0 1.5rem}
@media (prefers-color-scheme:dark){body{background:#1a202c;color:#e2e8f0}th{background:#2d3748}
th,td{border-color:#4a5568}.muted{color:#a0aec0}.warn{color:#fc8181}.waiting{background:#4a5568}
.chart .gridline{stroke:#2d3748}}
"""

# One script for both pages: each ``event: part`` names an element (``data-part``) and brings its new HTML
# (rendered and escaped by the server); ``reload`` asks for a fresh page (a new Job appeared), ``end`` stops.
_LIVE_SCRIPT = """
(function(){var live=document.querySelector('[data-stream]');if(!live||!window.EventSource)return;
var src=new EventSource(live.getAttribute('data-stream')),n=0;
src.addEventListener('part',function(e){var d=JSON.parse(e.data);
document.querySelectorAll('[data-part="'+d.part+'"]').forEach(function(el){el.innerHTML=d.html;});
n+=1;live.setAttribute('data-updates',String(n));live.textContent='live: updated '+d.at;});
src.addEventListener('reload',function(){src.close();location.reload();});
src.addEventListener('end',function(e){src.close();var r=JSON.parse(e.data).reason;
live.textContent=r==='finished'?'finished':r;});
src.onerror=function(){live.textContent='live: reconnecting…';};})();
"""


def _page(title: str, body: str, stream: str | None = None) -> str:
    """``stream``: the page's event stream, relative to the page (it follows the page's query string)."""
    live = script = ""
    if stream is not None:
        live = f'<p class="live muted" data-stream="{escape(stream)}" data-updates="0">live</p>'
        script = f"<script>{_LIVE_SCRIPT}</script>"
    return (
        f'<!doctype html><html><head><meta charset="utf-8"><title>{escape(title)}</title>'
        f'<meta name="color-scheme" content="light dark"><style>{_CSS}</style></head>'
        f"<body><h2>{escape(title)}</h2>{live}{body}{script}</body></html>"
    )


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
    body = f'<div data-part="queues">{queues_part(rows, samples, now)}</div>' + history_html(histories)
    return _page("Kueue queues", body, stream)


def queues_part(
    rows: Sequence[QueueRow], samples: Mapping[str, list[QueueSample]] | None = None, now: float = 0.0
) -> str:
    """What the live stream redraws: the table, and the plots of the table's ClusterQueues over time."""
    if samples is None:
        return queues_table(rows)
    names = sorted({row.cluster_queue for row in rows if row.cluster_queue_pending is not None})
    return queues_table(rows) + queues_over_time_html(names, dict(samples), now)


_HISTORY_HEAD = "".join(
    f"<th{' class=num' if i >= 5 else ''}>{name}</th>"
    for i, name in enumerate(
        (
            "Result (UTC)",
            "DAG",
            "Task",
            "Run",
            "Namespace",
            "Queued",
            "Ran",
            "Done",
            "Failed",
            "Evictions",
            "Cost",
        )
    )
)


def history_html(histories: Sequence[QueueHistory]) -> str:
    """The last runs of each ClusterQueue: wait, run time, evictions and cost, from the tasks' results."""
    if not histories:
        return "<h3>Recent runs</h3><p class=muted>No finished Kueue task results you may read yet.</p>"
    out = ["<h3>Recent runs</h3>"]
    for history in histories:
        cost = f", about {_usd(history.cost_usd)}" if history.cost_usd is not None else ""
        out.append(
            f"<h4>ClusterQueue {escape(history.cluster_queue)}</h4>"
            f"<p class=muted>last {len(history.runs)} runs: median queue wait "
            f"{_seconds(history.median_queued_seconds)}, {history.evictions} evictions{cost}</p>"
            f"{queue_runs_chart(history)}"
            f"<table><tr>{_HISTORY_HEAD}</tr>{''.join(_history_row(r) for r in history.runs)}</table>"
        )
    return "".join(out)


def _history_row(run: RunRecord) -> str:
    task = run.task_id + (f" [{run.map_index}]" if run.map_index >= 0 else "")
    text = [run.finished_at.strftime("%Y-%m-%d %H:%M"), run.dag_id, task, run.run_id, run.namespace]
    numbers = [
        _seconds(run.queued_seconds),
        _seconds(run.running_seconds),
        f"{run.succeeded}/{run.completions}",
        str(run.failed),
        str(run.evictions),
        "" if run.cost_usd is None else _usd(run.cost_usd),
    ]
    cells = [f"<td>{escape(v)}</td>" for v in text] + [f'<td class="num">{escape(v)}</td>' for v in numbers]
    return f"<tr>{''.join(cells)}</tr>"


def _usd(value: float) -> str:
    return "< $0.01" if 0 < value < 0.01 else f"${value:,.2f}"


def _seconds(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.0f} s" if value < 120 else f"{value / 60:.1f} min"


def queues_table(rows: Sequence[QueueRow]) -> str:
    if not rows:
        return "<p>No LocalQueues found.</p>"
    head = (
        "<tr><th>Namespace</th><th>LocalQueue</th><th>ClusterQueue</th><th>Cohort</th><th>Active</th>"
        '<th class="num">Pending</th><th class="num">Reserving</th><th class="num">Admitted</th>'
        '<th class="num">Pending in ClusterQueue</th><th>Quota reserved / nominal (borrowed)</th></tr>'
    )
    lines = []
    for row in rows:
        usage = "<br>".join(
            f"{escape(u.flavor)} {escape(u.resource)}: {escape(u.reserved)} / {escape(u.nominal or '-')}"
            + (f' <span class="warn">(+{escape(u.borrowed)} borrowed)</span>' if u.borrowed != "0" else "")
            for u in row.usage
        )
        lines.append(
            f"<tr><td>{escape(row.namespace)}</td><td>{escape(row.local_queue)}</td>"
            f"<td>{escape(row.cluster_queue)}</td><td>{escape(row.cohort or '')}{_share(row.fair_share)}</td>"
            f"<td>{'yes' if row.active else '<span class=warn>no</span>'}</td>"
            f'<td class="num">{row.pending}</td><td class="num">{row.reserving}</td>'
            f'<td class="num">{row.admitted}</td>'
            f'<td class="num">{"" if row.cluster_queue_pending is None else row.cluster_queue_pending}</td>'
            f"<td>{usage}</td></tr>"
        )
    return f"<table>{head}{''.join(lines)}</table>"


def _share(share: int | None) -> str:
    """The ClusterQueue's fair share, after its cohort (Kueue's fair sharing on)."""
    return "" if share is None else f' <span class="muted">(fair share {share})</span>'


def task_page(
    title: str,
    panels: Sequence[JobPanel],
    facts: TaskInstanceFacts | None = None,
    stream: str | None = None,
    trend: TaskTrend | None = None,
) -> str:
    """The task instance's Jobs, newest try first; without any, a plain sentence saying why (``facts``:
    what Airflow knows about the task instance, None when that could not be read). ``stream`` only while
    the newest Job runs. ``trend``: the task's recent runs, plotted below (also when its Jobs are gone)."""
    after = task_trend_html(trend) if trend is not None else ""
    if not panels:
        return _page(title, f"<p>{escape(no_job_message(facts))}</p>{after}")
    return _page(title, "".join(_panel(panel) for panel in reversed(panels)) + after, stream)


def summary_html(live: LiveState) -> str:
    eta = f'; <span class="eta">{escape(live.eta_text)}</span>' if live.eta else ""
    deadline = f'<br><span class="deadline">{escape(live.deadline_text)}</span>' if live.deadline_text else ""
    return f"{escape(live.summary)}{eta}{deadline}"


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
    return _page("Kueue", f'<p class="warn">{escape(message)}</p>')


def _panel(panel: JobPanel) -> str:
    where = f"{panel.namespace}/{panel.name}"
    meta = f"try {panel.try_number}"
    if panel.workload_name:
        meta += f", Workload {panel.workload_name}"
    if panel.cluster_queue:
        meta += f", ClusterQueue {panel.cluster_queue}"
    if panel.worker_cluster:
        meta += f", worker cluster {panel.worker_cluster} (MultiKueue)"
    if panel.jobset:
        meta += f", replicated job {panel.replicated_job} of JobSet {panel.jobset} (admitted as one Workload)"
    if panel.placement:
        meta += f", placed on {panel.placement}"
    steps = "".join(
        f"<tr{' class=warn' if step.warning else ''}><td>{escape(step.at.strftime('%Y-%m-%d %H:%M:%S'))}</td>"
        f"<td>{escape(step.what)}</td><td>{escape(step.detail)}</td>"
        f'<td class="muted">{escape(step.source)}</td></tr>'
        for step in panel.timeline
    )
    summary, grid = (escape(part_id(kind, panel.name)) for kind in ("summary", "grid"))
    return (
        f'<section data-job="{escape(panel.name)}"><h3>Job {escape(where)}</h3>'
        f"<p class=muted>{escape(meta)}</p>"
        f'<p class="summary" data-part="{summary}">{summary_html(panel.live)}</p>'
        f'<h4>Indexes</h4><div data-part="{grid}">{grid_html(panel.grid)}</div>'
        "<p class=muted>Running: the lowest unfinished indexes, as many as the Job has active pods.</p>"
        "<h4>Admission timeline</h4>"
        f"<table><tr><th>Time (UTC)</th><th>Step</th><th>Detail</th><th>On</th></tr>{steps}</table></section>"
    )


def grid_html(grid: IndexGrid) -> str:
    counts = grid.counts()
    legend = "".join(f'<span><i class="{state}"></i>{state} {n}</span>' for state, n in counts.items())
    if grid.completions <= GRID_CELL_LIMIT:
        cells = "".join(
            f'<div class="cell {run.state.value}" title="index {i}: {run.state.value}"></div>'
            for run in grid.runs()
            for i in range(run.first, run.last + 1)
        )
        body = f'<div class="grid">{cells}</div>'
    else:
        bands = "".join(
            f'<div class="{band.state.value}" '
            f'style="width:{100 * (band.last - band.first + 1) / grid.completions:.4f}%" '
            f'title="indexes {band.first}-{band.last}: '
            f'{", ".join(f"{n} {state.value}" for state, n in band.counts.items())}"></div>'
            for band in grid.bands()
        )
        body = f'<div class="bands">{bands}</div>'
    return f'<p class="legend">{legend}</p>{body}'
