"""HTML for the UI pages: self-contained (inline CSS, no scripts), every value escaped."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

from ..kueue.index_grid import IndexGrid
from ..kueue.queue_overview import QueueRow
from .dashboard_data import KUEUE_OPERATORS, JobPanel, TaskInstanceFacts

GRID_CELL_LIMIT = 2_000
"""Up to this many indexes the grid draws one cell per index; above it, one band per run of a state."""
REFRESH_SECONDS = 15

_CSS = """
body{font-family:system-ui,sans-serif;margin:1rem;color:#1f2933}
table{border-collapse:collapse;margin:.5rem 0 1.5rem}
th,td{border-bottom:1px solid #d9e2ec;padding:.3rem .6rem;text-align:left;vertical-align:top}
th{background:#f0f4f8}.num{text-align:right}.warn{color:#b42318}.muted{color:#627d98}
.grid{display:flex;flex-wrap:wrap;gap:1px;max-width:60rem}.cell{width:10px;height:10px}
.bands{display:flex;height:18px;max-width:60rem}
.done{background:#2f9e44}.failed{background:#e03131}.running{background:#1c7ed6}.waiting{background:#ced4da}
.legend span{display:inline-block;margin-right:1rem}.legend i{display:inline-block;width:10px;height:10px;
margin-right:.3rem}
"""


def _page(title: str, body: str) -> str:
    return (
        f'<!doctype html><html><head><meta charset="utf-8"><title>{escape(title)}</title>'
        f'<meta http-equiv="refresh" content="{REFRESH_SECONDS}"><style>{_CSS}</style></head>'
        f"<body><h2>{escape(title)}</h2>{body}</body></html>"
    )


def queues_page(rows: Sequence[QueueRow]) -> str:
    if not rows:
        return _page("Kueue queues", "<p>No LocalQueues found.</p>")
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
            f"<td>{escape(row.cluster_queue)}</td><td>{escape(row.cohort or '')}</td>"
            f"<td>{'yes' if row.active else '<span class=warn>no</span>'}</td>"
            f'<td class="num">{row.pending}</td><td class="num">{row.reserving}</td>'
            f'<td class="num">{row.admitted}</td>'
            f'<td class="num">{"" if row.cluster_queue_pending is None else row.cluster_queue_pending}</td>'
            f"<td>{usage}</td></tr>"
        )
    return _page("Kueue queues", f"<table>{head}{''.join(lines)}</table>")


def task_page(title: str, panels: Sequence[JobPanel], facts: TaskInstanceFacts | None = None) -> str:
    """The task instance's Jobs, newest try first; without any, a plain sentence saying why (``facts``:
    what Airflow knows about the task instance, None when that could not be read)."""
    if not panels:
        return _page(title, f"<p>{escape(no_job_message(facts))}</p>")
    return _page(title, "".join(_panel(panel) for panel in reversed(panels)))


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
    steps = "".join(
        f"<tr{' class=warn' if step.warning else ''}><td>{escape(step.at.strftime('%Y-%m-%d %H:%M:%S'))}</td>"
        f"<td>{escape(step.what)}</td><td>{escape(step.detail)}</td>"
        f'<td class="muted">{escape(step.source)}</td></tr>'
        for step in panel.timeline
    )
    return (
        f"<h3>Job {escape(where)}</h3><p class=muted>{escape(meta)}</p><p>{escape(panel.summary)}</p>"
        f"<h4>Indexes</h4>{grid_html(panel.grid)}"
        "<h4>Admission timeline</h4>"
        f"<table><tr><th>Time (UTC)</th><th>Step</th><th>Detail</th><th>On</th></tr>{steps}</table>"
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
