"""The FastAPI app behind the UI pages, mounted by Airflow's API server at ``/kueue``.

Every route needs an Airflow login (the API server's JWT, as a bearer token or the UI's cookie) and is
authorized by Airflow's auth manager before anything is read from the cluster: a task's Jobs need read
access to that DAG's task instances (``requires_access_dag``, the same check as Airflow's own task-instance
API), the queue dashboard the "Cluster activity" view (it shows every team's queues). The cluster is read
with the ``[kueue] kubernetes_conn_id`` connection (default ``kubernetes_default``) in the namespaces of
``[kueue] ui_namespaces`` (comma-separated; empty means every namespace, which needs cluster-wide list
rights).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Sequence
from typing import Any

from fastapi import Depends, FastAPI, HTTPException, Query, Request
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from kubernetes.client.rest import ApiException

from ..hooks.kueue_hook import KueueHook
from . import dashboard_pages
from .dashboard_data import JobPanel, TaskInstanceFacts, queue_dashboard, task_panels

log = logging.getLogger(__name__)

UNMAPPED_PLACEHOLDERS = frozenset({"", "{MAP_INDEX}", "-1"})


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


def configured_hook() -> KueueHook:
    from airflow.configuration import conf

    return KueueHook(conf.get("kueue", "kubernetes_conn_id", fallback="kubernetes_default"))


def configured_namespaces() -> list[str]:
    from airflow.configuration import conf

    raw = conf.get("kueue", "ui_namespaces", fallback="") or ""
    return [ns.strip() for ns in raw.split(",") if ns.strip()]


def airflow_task_instance(dag_id: str, run_id: str, task_id: str, map_index: int) -> TaskInstanceFacts | None:
    """The task instance's operator from Airflow's database (the API server's own session); None when the
    database cannot be read, which only makes the tab's no-Job sentence less specific."""
    try:
        from airflow.models.taskinstance import TaskInstance
        from airflow.utils.session import create_session
        from sqlalchemy import func, select

        task = (TaskInstance.dag_id == dag_id, TaskInstance.run_id == run_id, TaskInstance.task_id == task_id)
        with create_session() as session:
            operator = session.scalar(
                select(TaskInstance.operator).where(*task, TaskInstance.map_index == map_index)
            )
            if operator is not None:
                return TaskInstanceFacts(str(operator))
            mapped = 0
            if map_index < 0:
                count = select(func.count()).select_from(TaskInstance)
                mapped = int(session.scalar(count.where(*task, TaskInstance.map_index >= 0)) or 0)
            return TaskInstanceFacts(None, mapped)
    except Exception:
        log.warning("Kueue tab: cannot read task instance %s/%s/%s", dag_id, run_id, task_id, exc_info=True)
        return None


def _airflow_login() -> Any:
    from airflow.api_fastapi.core_api.security import get_user

    return Depends(get_user)


def _task_instance_access() -> Any:
    """Read access to the task instances of the DAG named by the request's ``dag_id``."""
    from airflow.api_fastapi.auth.managers.models.resource_details import DagAccessEntity
    from airflow.api_fastapi.core_api.security import requires_access_dag

    return Depends(requires_access_dag("GET", DagAccessEntity.TASK_INSTANCE))


def _queues_access() -> Any:
    from airflow.api_fastapi.auth.managers.models.resource_details import AccessView
    from airflow.api_fastapi.core_api.security import requires_access_view

    return Depends(requires_access_view(AccessView.CLUSTER_ACTIVITY))


def create_app(
    hook_factory: Callable[[], KueueHook] = configured_hook,
    namespaces: Callable[[], Sequence[str]] = configured_namespaces,
    dependencies: Sequence[Any] | None = None,
    task_access: Sequence[Any] | None = None,
    queues_access: Sequence[Any] | None = None,
    task_instances: Callable[[str, str, str, int], TaskInstanceFacts | None] = airflow_task_instance,
) -> FastAPI:
    """The app; tests pass their own hook factory and namespaces, and may swap the login and access checks
    (``dependencies``: every route; ``task_access``: the task routes; ``queues_access``: the queue routes)
    and the lookup of a task instance's operator in Airflow's database (``task_instances``).

    The hook is made on the first request and then reused: a new one would load the kubeconfig and ask
    for the Kueue API version again on every page.
    """
    hook = functools.cache(hook_factory)
    app = FastAPI(
        title="Kueue for Airflow",
        dependencies=list(dependencies) if dependencies is not None else [_airflow_login()],
    )
    for_task = list(task_access) if task_access is not None else [_task_instance_access()]
    for_queues = list(queues_access) if queues_access is not None else [_queues_access()]

    @app.exception_handler(ApiException)
    def cluster_error(request: Request, exc: ApiException) -> Response:
        hint = (
            " Give the connection's identity list/get on Jobs, Pods, Events and Kueue queues and Workloads, "
            "or name the namespaces it may read in [kueue] ui_namespaces."
            if exc.status in (401, 403)
            else ""
        )
        message = f"the cluster answered {exc.status} {exc.reason}.{hint}"
        if getattr(request.scope.get("route"), "path", "").startswith("/api/"):
            return JSONResponse({"error": message}, status_code=502)
        page = dashboard_pages.error_page(f"The Kueue view could not read the cluster: {message}")
        return HTMLResponse(page, status_code=502)

    @app.get("/", include_in_schema=False)
    def index() -> RedirectResponse:
        return RedirectResponse("queues")

    @app.get("/api/queues", dependencies=for_queues)
    def queues_json() -> dict[str, Any]:
        return {"queues": [row.to_dict() for row in queue_dashboard(hook(), namespaces())]}

    @app.get("/queues", response_class=HTMLResponse, dependencies=for_queues)
    def queues_html() -> str:
        return dashboard_pages.queues_page(queue_dashboard(hook(), namespaces()))

    @app.get("/api/task", dependencies=for_task)
    def task_json(dag_id: str, run_id: str, task_id: str, map_index: str = Query("-1")) -> dict[str, Any]:
        panels = task_panels(hook(), namespaces(), dag_id, run_id, task_id, parse_map_index(map_index))
        return {"jobs": [panel.to_dict() for panel in panels]}

    @app.get("/task", response_class=HTMLResponse, dependencies=for_task)
    def task_html(dag_id: str, run_id: str, task_id: str, map_index: str = Query("-1")) -> str:
        index = parse_map_index(map_index)
        title = f"{dag_id} / {task_id}" + (f" [{index}]" if index >= 0 else "") + f" / {run_id}"
        panels: list[JobPanel] = []
        try:
            panels = task_panels(hook(), namespaces(), dag_id, run_id, task_id, index)
        except ApiException:
            # Another operator's task needs no cluster at all: its tab says so rather than show the error.
            facts = task_instances(dag_id, run_id, task_id, index)
            if facts is None or facts.operator is None or facts.makes_kueue_jobs:
                raise
            return dashboard_pages.task_page(title, [], facts)
        facts = None if panels else task_instances(dag_id, run_id, task_id, index)
        return dashboard_pages.task_page(title, panels, facts)

    return app
