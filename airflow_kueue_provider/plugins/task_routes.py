"""The task view's routes: a task instance's Jobs with their grids and timelines (JSON, page, and the
newest Job live), and the plot of the task's recent runs when the user may read the DAG's results.
They need read access to the DAG's task instances (``route_access.dag_access``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fastapi import Depends, FastAPI, HTTPException, Query, Request
from fastapi.responses import HTMLResponse, StreamingResponse
from kubernetes.client.rest import ApiException
from starlette.concurrency import run_in_threadpool

from ..kueue.identity.airflow_identity import AirflowIdentity
from ..kueue.progress.eta import FinishClock
from . import dashboard_pages, live_feed, night_pages
from .app_context import AppContext, event_stream
from .dashboard_data import JobPanel, live_state, task_panels
from .views.run_history import RunRecord
from .views.run_trends import TaskTrend, task_trend

UNMAPPED_PLACEHOLDERS = frozenset({"", "{MAP_INDEX}", "-1"})
HIDDEN_RESULTS = (
    "Recent runs of this task are not shown: they are read from the task's results (XComs), and you may not "
    "read this DAG's XComs. Ask for the XCom read permission of this DAG to see them."
)


def parse_map_index(raw: str) -> int:
    """The task instance's map index from the tab's URL. Airflow 3.3's UI fills ``{MAP_INDEX}`` in only
    for mapped task instances, so for an unmapped one the placeholder itself arrives: that means -1."""
    if raw.strip() in UNMAPPED_PLACEHOLDERS:
        return -1
    try:
        value = int(raw)
    except ValueError:
        value = -2
    if value < -1:
        raise HTTPException(422, f"map_index must be an integer >= -1, got {raw!r}")
    return value


def add_task_routes(app: FastAPI, ctx: AppContext) -> None:
    """``/api/task``, ``/task`` and ``/api/task/stream``."""
    access = ctx.access

    @app.get("/api/task", dependencies=access.task)
    async def task_json(
        dag_id: str,
        run_id: str,
        task_id: str,
        map_index: str = Query("-1"),
        user: str = Depends(access.stream_user),
    ) -> dict[str, Any]:
        index = parse_map_index(map_index)
        return await ctx.guarded(user, _task_json, ctx, dag_id, run_id, task_id, index)

    @app.get("/task", response_class=HTMLResponse, dependencies=access.task)
    async def task_html(
        request: Request,
        dag_id: str,
        run_id: str,
        task_id: str,
        map_index: str = Query("-1"),
        user: str = Depends(access.stream_user),
        results: bool = Depends(access.results_access),
    ) -> str:
        index = parse_map_index(map_index)
        task = (dag_id, run_id, task_id, index)
        return await ctx.guarded(user, _task_html, ctx, request.url.query, *task, results)

    @app.get("/api/task/stream", dependencies=access.task)
    async def task_stream(
        request: Request,
        dag_id: str,
        run_id: str,
        task_id: str,
        map_index: str = Query("-1"),
        job: str = "",
        user: str = Depends(access.stream_user),
    ) -> StreamingResponse:
        """The newest Job of the task instance, live. ``job``: the newest Job the page shows; a stream for a
        page that lacks the newest Job tells it to reload."""
        identity = AirflowIdentity(dag_id, task_id, run_id, map_index=parse_map_index(map_index))
        scopes: Sequence[str | None] = ctx.namespaces() or [None]
        hook = ctx.hook()
        found = [j for ns in scopes for j in await run_in_threadpool(hook.task_instance_jobs, ns, identity)]
        found.sort(key=lambda j: j["metadata"].get("creationTimestamp") or "")
        if not found:
            return event_stream(iter([live_feed.retry_later()]))
        newest = found[-1]["metadata"]
        if newest["name"] != job:
            return event_stream(iter([live_feed.event("reload", {"job": newest["name"]})]))
        conn_id, namespace, name = hook.kubernetes_conn_id, newest["namespace"], newest["name"]
        return ctx.held(
            user, live_feed.job_events(conn_id, namespace, name, _render, request.is_disconnected)
        )


def _render(
    job: dict[str, Any], workload: dict[str, Any] | None, now: float, clock: FinishClock
) -> tuple[dict[str, str], bool]:
    """The live parts of a Job's panel (its summary and grid), and whether the Job is finished."""
    state = live_state(job, workload, now, clock)
    name = state.job_name
    return {
        dashboard_pages.part_id("summary", name): dashboard_pages.summary_html(state),
        dashboard_pages.part_id("grid", name): dashboard_pages.grid_html(state.grid),
    }, state.finished


def _task_json(ctx: AppContext, dag_id: str, run_id: str, task_id: str, index: int) -> dict[str, Any]:
    panels = task_panels(ctx.hook(), ctx.namespaces(), dag_id, run_id, task_id, index)
    return {"jobs": [panel.to_dict() for panel in panels]}


def _task_html(
    ctx: AppContext, query: str, dag_id: str, run_id: str, task_id: str, index: int, results: bool
) -> str:
    title = f"{dag_id} / {task_id}" + (f" [{index}]" if index >= 0 else "") + f" / {run_id}"
    task_instances = ctx.settings.task_instances
    panels: list[JobPanel] = []
    try:
        panels = task_panels(ctx.hook(), ctx.namespaces(), dag_id, run_id, task_id, index)
    except ApiException:
        # Another operator's task needs no cluster at all: its tab says so rather than show the error.
        facts = task_instances(dag_id, run_id, task_id, index)
        if facts is None or facts.operator is None or facts.makes_kueue_jobs:
            raise
        return dashboard_pages.task_page(title, [], facts)
    facts = None if panels else task_instances(dag_id, run_id, task_id, index)
    trend, trend_note, outcome = None, "", dashboard_pages.RunLinks()
    if not (panels or facts is None or facts.makes_kueue_jobs):
        pass  # another operator's task: no plot
    elif results:
        trend, mine = _trend_of(ctx, dag_id, run_id, task_id, index)
        outcome = _links(dag_id, run_id, task_id, night_pages.run_outcome_lines(mine))
    else:
        trend_note = HIDDEN_RESULTS
        outcome = _links(dag_id, run_id, task_id, ())
    stream = None
    if panels and not panels[-1].live.finished:
        stream = f"api/task/stream?{query}&job={panels[-1].name}"
    elif not panels and facts is not None and facts.makes_kueue_jobs:
        stream = f"api/task/stream?{query}&job="  # reloads once the task makes its Job
    return dashboard_pages.task_page(
        title, panels, facts, stream, trend, log_query=query, trend_note=trend_note, run=outcome
    )


def _links(dag_id: str, run_id: str, task_id: str, lines: tuple[str, ...]) -> dashboard_pages.RunLinks:
    return dashboard_pages.RunLinks(
        lines, night_pages.dag_run_href(dag_id, run_id), night_pages.nights_href(dag_id, task_id)
    )


def _trend_of(
    ctx: AppContext, dag_id: str, run_id: str, task_id: str, map_index: int
) -> tuple[TaskTrend, RunRecord | None]:
    """Only the results of the DAG the route authorized, whatever ``task_runs`` returns; and this task
    instance's own result (its forecast and deadline), when it is among them."""
    records = ctx.settings.task_runs(dag_id, task_id, map_index)
    key = (dag_id, run_id, task_id, map_index)
    mine = next((r for r in records if (r.dag_id, r.run_id, r.task_id, r.map_index) == key), None)
    return task_trend(records, dag_id, task_id, map_index), mine
