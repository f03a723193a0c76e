"""The log tail of one index, on demand: its newest pod's last lines. It needs read access to the DAG's
task logs, and reads only a Job that is the task instance's own (labels, identity annotations and seal),
so a DAG's log reader reads no other DAG's pods."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fastapi import Depends, FastAPI, HTTPException, Query

from ..kueue.identity.airflow_identity import AirflowIdentity
from .app_context import AppContext
from .task_routes import parse_map_index

LOG_TAIL_LINES = 200
LOG_TAIL_BYTES = 64 * 1024
"""The on-demand log tail of one index: its newest pod's last lines, at most this many bytes."""


def add_log_routes(app: FastAPI, ctx: AppContext) -> None:
    """``/api/task/log``."""
    access = ctx.access

    @app.get("/api/task/log", dependencies=access.logs)
    async def task_log(
        dag_id: str,
        run_id: str,
        task_id: str,
        job: str,
        index: int = Query(ge=0),
        map_index: str = Query("-1"),
        user: str = Depends(access.stream_user),
    ) -> dict[str, Any]:
        """The log tail of one index of one of the task instance's Jobs (its newest pod), on demand: the
        Job must be the task instance's own (labels, identity annotations and seal), so a DAG's log reader
        reads no other DAG's pods."""
        identity = AirflowIdentity(dag_id, task_id, run_id, map_index=parse_map_index(map_index))
        return await ctx.guarded(user, _log_tail, ctx, identity, job, index)


def _log_tail(ctx: AppContext, identity: AirflowIdentity, job: str, index: int) -> dict[str, Any]:
    dag_id, run_id, task_id = identity.dag_id, identity.run_id, identity.task_id
    scopes: Sequence[str | None] = ctx.namespaces() or [None]
    hook = ctx.hook()
    owned = [j for ns in scopes for j in hook.task_instance_jobs(ns, identity)]
    found = next((j for j in owned if j["metadata"]["name"] == job), None)
    if found is None:
        raise HTTPException(404, f"task instance {dag_id}/{run_id}/{task_id} has no Job {job!r}")
    completions = int((found.get("spec") or {}).get("completions") or 0)
    if index >= completions:
        raise HTTPException(422, f"index: Job {job} has indexes 0-{completions - 1}, got {index}")
    namespace = found["metadata"]["namespace"]
    uid = found["metadata"].get("uid")
    tail = hook.index_log_tail(namespace, job, index, LOG_TAIL_LINES, LOG_TAIL_BYTES, job_uid=uid)
    answer: dict[str, Any] = {"job": job, "namespace": namespace, "index": index, "lines": LOG_TAIL_LINES}
    if tail is None:
        return {**answer, "pod": None, "log": f"(index {index} has no pod now: not started yet, or gone)"}
    return {**answer, "pod": tail[0], "log": tail[1]}
