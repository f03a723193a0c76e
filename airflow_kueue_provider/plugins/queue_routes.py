"""The queue dashboard's routes: every LocalQueue with its ClusterQueue's usage, over time, and the recent
runs of the DAGs the user may read (JSON, page and live stream). They need the "Cluster activity" view."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Collection
from typing import Any

from fastapi import Depends, FastAPI, Request
from fastapi.responses import HTMLResponse, RedirectResponse, StreamingResponse
from starlette.concurrency import run_in_threadpool

from . import dashboard_pages, live_feed
from .app_context import AppContext
from .dashboard_data import queue_dashboard
from .views.run_history import queue_histories
from .views.run_trends import QueueSample


def add_queue_routes(app: FastAPI, ctx: AppContext) -> None:
    """``/`` (to the dashboard), ``/api/queues``, ``/queues`` and ``/api/queues/stream``."""
    access = ctx.access

    @app.get("/", include_in_schema=False, dependencies=access.queues)
    def index() -> RedirectResponse:
        return RedirectResponse("queues")

    @app.get("/api/queues", dependencies=access.queues)
    async def queues_json(
        dag_ids: Collection[str] | None = Depends(access.readable_dags),
        user: str = Depends(access.stream_user),
    ) -> dict[str, Any]:
        return await ctx.guarded(user, _queues_json, ctx, dag_ids)

    @app.get("/queues", response_class=HTMLResponse, dependencies=access.queues)
    async def queues_html(
        dag_ids: Collection[str] | None = Depends(access.readable_dags),
        user: str = Depends(access.stream_user),
    ) -> str:
        return await ctx.guarded(user, _queues_html, ctx, dag_ids)

    @app.get("/api/queues/stream", dependencies=access.queues)
    async def queues_stream(request: Request, user: str = Depends(access.stream_user)) -> StreamingResponse:
        """The queue table after each change of a Job or Workload in the namespaces shown (those of
        ``[kueue] ui_namespaces``, else those of the LocalQueues on the page)."""
        hook, samples = ctx.hook, ctx.settings.queue_samples
        watched = list(ctx.namespaces())
        if not watched:  # the LocalQueues' namespaces: one read when the stream opens, not one per change
            rows = await run_in_threadpool(queue_dashboard, hook(), ctx.namespaces(), samples)
            watched = sorted({row.namespace for row in rows})

        async def read_html() -> str:
            fresh = await run_in_threadpool(queue_dashboard, hook(), ctx.namespaces(), samples)
            return dashboard_pages.queues_part(fresh, *_samples_now(ctx))

        conn_id = hook().kubernetes_conn_id
        return ctx.held(user, live_feed.queue_events(conn_id, watched, read_html, request.is_disconnected))


def _samples_now(ctx: AppContext) -> tuple[dict[str, list[QueueSample]], float]:
    now = time.time()
    ring = ctx.settings.queue_samples
    return {name: ring.samples(name, now) for name in ring.names()}, now


def _queues_json(ctx: AppContext, dag_ids: Collection[str] | None) -> dict[str, Any]:
    histories = queue_histories(ctx.settings.run_records(dag_ids))
    rows = queue_dashboard(ctx.hook(), ctx.namespaces(), ctx.settings.queue_samples)
    samples, _ = _samples_now(ctx)
    shown = {row.cluster_queue for row in rows}
    return {
        "queues": [row.to_dict() for row in rows],
        "over_time": {
            name: [dataclasses.asdict(s) for s in found] for name, found in samples.items() if name in shown
        },
        "history": [
            {"cluster_queue": h.cluster_queue, "runs": [dataclasses.asdict(r) for r in h.runs]}
            for h in histories
        ],
    }


def _queues_html(ctx: AppContext, dag_ids: Collection[str] | None) -> str:
    rows = queue_dashboard(ctx.hook(), ctx.namespaces(), ctx.settings.queue_samples)
    histories = queue_histories(ctx.settings.run_records(dag_ids))
    samples, now = _samples_now(ctx)
    return dashboard_pages.queues_page(rows, histories, "api/queues/stream", samples, now)
