"""The nights page and the whole-DAG-run page (HTML and JSON): read from the tasks' results in Airflow's
database on each request, never from the cluster nor from anything sampled in memory.

Authorized as the task view is: read access to the DAG's task instances (``route_access.dag_access`` on the
one ``dag_id`` the request names; a DAG the user may not read gets the same 403 as one that does not exist),
and the results (XComs) shown only with the DAG's XCom read permission. Each read takes a slot of the user's
read caps (``ctx.guarded``) and is capped in rows (``run_history_source.NIGHT_ROWS``, ``DAG_RUN_ROWS``) and
in DAG runs (``views.nights.MOST_NIGHTS``)."""

from __future__ import annotations

import dataclasses
from typing import Any

from fastapi import Depends, FastAPI, Query
from fastapi.responses import HTMLResponse

from . import night_pages
from .app_context import AppContext
from .run_history_source import DAG_RUN_ROWS
from .views.nights import MOST_NIGHTS, NIGHTS, DagRunView, TaskNights, dag_nights, dag_run_view

HIDDEN_RESULTS = (
    "The nights and runs of this DAG are read from its tasks' results (XComs), and you may not read this "
    "DAG's XComs. Ask for the XCom read permission of this DAG to see them."
)
NIGHTS_QUERY = Query(
    NIGHTS, ge=1, le=MOST_NIGHTS, description=f"how many of the newest DAG runs (1 to {MOST_NIGHTS})"
)


def add_night_routes(app: FastAPI, ctx: AppContext) -> None:
    """``/nights``, ``/api/nights``, ``/dag-run`` and ``/api/dag-run``."""
    access = ctx.access

    @app.get("/nights", dependencies=access.task, response_class=HTMLResponse)
    async def nights_html(
        dag_id: str,
        task_id: str | None = None,
        nights: int = NIGHTS_QUERY,
        user: str = Depends(access.stream_user),
        results: bool = Depends(access.results_access),
    ) -> str:
        if not results:
            return night_pages.nights_page(dag_id, [], nights, HIDDEN_RESULTS)
        tasks = await ctx.guarded(user, _nights, ctx, dag_id, task_id, nights)
        return night_pages.nights_page(dag_id, tasks, nights)

    @app.get("/api/nights", dependencies=access.task)
    async def nights_json(
        dag_id: str,
        task_id: str | None = None,
        nights: int = NIGHTS_QUERY,
        user: str = Depends(access.stream_user),
        results: bool = Depends(access.results_access),
    ) -> dict[str, Any]:
        if not results:
            return {"dag_id": dag_id, "tasks": [], "hidden": HIDDEN_RESULTS}
        tasks = await ctx.guarded(user, _nights, ctx, dag_id, task_id, nights)
        return {"dag_id": dag_id, "tasks": [dataclasses.asdict(t) for t in tasks]}

    @app.get("/dag-run", dependencies=access.task, response_class=HTMLResponse)
    async def dag_run_html(
        dag_id: str,
        run_id: str,
        user: str = Depends(access.stream_user),
        results: bool = Depends(access.results_access),
    ) -> str:
        if not results:
            empty = dag_run_view([], dag_id, run_id)
            return night_pages.dag_run_page(empty, False, HIDDEN_RESULTS)
        view, capped = await ctx.guarded(user, _dag_run, ctx, dag_id, run_id)
        return night_pages.dag_run_page(view, capped)

    @app.get("/api/dag-run", dependencies=access.task)
    async def dag_run_json(
        dag_id: str,
        run_id: str,
        user: str = Depends(access.stream_user),
        results: bool = Depends(access.results_access),
    ) -> dict[str, Any]:
        if not results:
            return {"dag_id": dag_id, "run_id": run_id, "rows": [], "hidden": HIDDEN_RESULTS}
        view, capped = await ctx.guarded(user, _dag_run, ctx, dag_id, run_id)
        return {**dataclasses.asdict(view), "capped": capped}


def _nights(ctx: AppContext, dag_id: str, task_id: str | None, nights: int) -> list[TaskNights]:
    """Only the results of the DAG the route authorized, whatever ``dag_nights`` returns."""
    return dag_nights(ctx.settings.dag_nights(dag_id, nights), dag_id, task_id, nights)


def _dag_run(ctx: AppContext, dag_id: str, run_id: str) -> tuple[DagRunView, bool]:
    records = ctx.settings.dag_run_records(dag_id, run_id)
    return dag_run_view(records, dag_id, run_id), len(records) >= DAG_RUN_ROWS
