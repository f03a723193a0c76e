"""The FastAPI app behind the UI pages, mounted by Airflow's API server at ``/kueue``.

Every route needs an Airflow login (the API server's JWT, as a bearer token or the UI's cookie) and is
authorized by Airflow's auth manager before anything is read from the cluster: a task's Jobs need read
access to that DAG's task instances, asked by the route itself for the one ``dag_id`` it serves
(``route_access.dag_access``: Airflow's ``requires_access_dag`` ignored the query up to 3.1.6), the queue
dashboard the "Cluster activity" view (it shows every team's queues). The app has no API docs routes
(``/openapi.json``, ``/docs``, ``/redoc``): they would answer without a login. Live streams are capped per
user and in total (``fanout.StreamCaps``: 429 with the count and the option that raises it); so are the other
reads of the cluster or of Airflow's database (``read_caps.ReadCaps``: 429 with ``Retry-After``), which run in
the plugin's own threads: a sync route would wait in the API server's shared thread pool, where Airflow's
own sync routes (health among them) run. The nights page and the whole-DAG-run page (``night_routes``) are
authorized as the task view, and read only Airflow's database.

The cluster is read with the ``[kueue] kubernetes_conn_id`` connection (default ``kubernetes_default``)
in the namespaces of ``[kueue] ui_namespaces`` (comma-separated; empty means every namespace, which needs
cluster-wide list rights).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import FastAPI

from ..hooks.kueue_hook import KueueHook
from .app_context import AppContext
from .app_errors import add_error_handlers
from .app_settings import DashboardSettings
from .log_routes import add_log_routes
from .night_routes import add_night_routes
from .queue_routes import add_queue_routes
from .task_routes import add_task_routes

__all__ = ["DashboardSettings", "create_app"]


def create_app(
    settings: DashboardSettings | Callable[[], KueueHook] | None = None, *fields: Any, **named: Any
) -> FastAPI:
    """The app made with ``settings`` (by default Airflow's configuration, login and auth manager).

    The settings' fields may also be given as arguments, as ``create_app``'s parameters were
    (``create_app(hook_factory, namespaces, dependencies=[], ...)``): benchmarks/ui_streams.py and cluster
    tests outside the plugin call it so.
    """
    if isinstance(settings, DashboardSettings):
        if fields or named:
            raise TypeError("create_app: give either a DashboardSettings or its fields, not both")
    else:
        settings = DashboardSettings(*(() if settings is None else (settings,)), *fields, **named)
    ctx = AppContext(settings)
    app = FastAPI(
        title="Kueue for Airflow",
        dependencies=ctx.access.app,
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
    )
    add_error_handlers(app)
    add_queue_routes(app, ctx)  # first: "/" is the queue dashboard
    add_task_routes(app, ctx)
    add_log_routes(app, ctx)
    add_night_routes(app, ctx)
    return app
