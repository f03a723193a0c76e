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
own sync routes (health among them) run.

The cluster is read with the ``[kueue] kubernetes_conn_id`` connection (default ``kubernetes_default``)
in the namespaces of ``[kueue] ui_namespaces`` (comma-separated; empty means every namespace, which needs
cluster-wide list rights).
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import time
from collections.abc import Callable, Collection, Sequence
from typing import Any, TypeVar

from fastapi import Depends, FastAPI, HTTPException, Query, Request
from fastapi.exception_handlers import http_exception_handler
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response, StreamingResponse
from kubernetes.client.rest import ApiException
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException

from ..hooks.kueue_hook import KueueHook
from ..kueue.airflow_identity import AirflowIdentity
from ..kueue.eta import FinishClock
from ..kueue.run_history import RunRecord, queue_histories
from . import dashboard_pages, live_feed
from .dashboard_data import (
    QUEUE_SAMPLES,
    JobPanel,
    TaskInstanceFacts,
    live_state,
    queue_dashboard,
    task_panels,
)
from .fanout import StreamCaps, TooManyStreams, configured_caps
from .read_caps import RETRY_AFTER_SECONDS, ReadCaps, TooManyReads, configured_read_caps
from .route_access import airflow_user, dag_access, dag_permission, marked, readable_results
from .run_history_source import airflow_run_records, airflow_task_run_records
from .views.run_trends import QueueSample, QueueSampleRing, TaskTrend, task_trend

log = logging.getLogger(__name__)
T = TypeVar("T")

UNMAPPED_PLACEHOLDERS = frozenset({"", "{MAP_INDEX}", "-1"})
LOG_TAIL_LINES = 200
LOG_TAIL_BYTES = 64 * 1024
"""The on-demand log tail of one index: its newest pod's last lines, at most this many bytes."""
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


def login_url(next_url: str) -> str | None:
    """The auth manager's login page (under Airflow's base path), returning to ``next_url``."""
    try:
        from airflow.api_fastapi.app import get_auth_manager

        return str(get_auth_manager().get_url_login(next_url=next_url))
    except Exception:
        log.warning("Kueue pages: no login URL from Airflow's auth manager", exc_info=True)
        return None


def _airflow_login() -> Any:
    from airflow.api_fastapi.core_api.security import get_user

    return Depends(get_user)


def _every_dag() -> None:
    return None


def _nobody() -> str:
    return ""


def _yes() -> bool:
    return True


def _stream_user() -> Callable[..., str]:
    """A dependency: the logged-in user's name, whose open streams and running reads are counted."""
    from airflow.api_fastapi.core_api.security import get_user

    def name(user: Any = Depends(get_user)) -> str:  # noqa: B008
        return str(user.get_name())

    return name


def _readable_dags() -> Callable[..., Collection[str]]:
    """A dependency: the DAG ids whose results the logged-in user may read (the run history shows only
    those): the DAGs she may read and whose XComs she may read, as Airflow's own XCom routes ask."""
    from airflow.api_fastapi.app import get_auth_manager
    from airflow.api_fastapi.core_api.security import get_user

    # Annotated with module-level names only: FastAPI resolves the (postponed) annotations in this module's
    # globals, where the lazily imported BaseUser is not.
    def readable(user: Any = Depends(get_user)) -> Collection[str]:  # noqa: B008
        return readable_results(user, get_auth_manager().get_authorized_dag_ids(user=user, method="GET"))

    return readable


def _queues_access() -> Any:
    from airflow.api_fastapi.auth.managers.models.resource_details import AccessView
    from airflow.api_fastapi.core_api.security import requires_access_view

    return marked(Depends(requires_access_view(AccessView.CLUSTER_ACTIVITY)), "view")


def create_app(
    hook_factory: Callable[[], KueueHook] = configured_hook,
    namespaces: Callable[[], Sequence[str]] = configured_namespaces,
    dependencies: Sequence[Any] | None = None,
    task_access: Sequence[Any] | None = None,
    log_access: Sequence[Any] | None = None,
    queues_access: Sequence[Any] | None = None,
    task_instances: Callable[[str, str, str, int], TaskInstanceFacts | None] = airflow_task_instance,
    run_records: Callable[[Collection[str] | None], list[RunRecord]] = airflow_run_records,
    readable_dags: Callable[..., Collection[str] | None] | None = None,
    task_runs: Callable[[str, str, int], list[RunRecord]] = airflow_task_run_records,
    queue_samples: QueueSampleRing = QUEUE_SAMPLES,
    stream_caps: Callable[[], StreamCaps] = configured_caps,
    stream_user: Callable[..., str] | None = None,
    read_caps: Callable[[], ReadCaps] = configured_read_caps,
    results_access: Callable[..., bool] | None = None,
) -> FastAPI:
    """The app; tests pass their own hook factory and namespaces, and may swap the login and access checks
    (``dependencies``: every route; ``task_access``: the task routes; ``log_access``: the log tail of an
    index, which needs the DAG's task logs; ``queues_access``: the queue routes)
    and the lookup of a task instance's operator in Airflow's database (``task_instances``), the read of
    the operator's results for the run history (``run_records``) and the DAGs whose results the user may
    see (``readable_dags``, a dependency; by default Airflow's auth manager decides for the logged-in user,
    and without Airflow's login, in tests, every DAG), the read of one task's results for the task view's
    plot (``task_runs``: its DAG is the one the task route authorized) and where the ClusterQueues' samples
    are kept (``queue_samples``), the caps on live streams (``stream_caps``, read on the first stream) and
    whose streams and reads a request counts as (``stream_user``, a dependency; the login's name by default),
    and the caps on the other reads, with the threads they run in (``read_caps``, made on the first read),
    and whether the task view may plot the task's results (``results_access``, a dependency: the DAG's XCom
    read permission by default; without Airflow's login, in tests, yes).

    The hook is made on the first request and then reused: a new one would load the kubeconfig and ask
    for the Kueue API version again on every page.
    """
    hook = functools.cache(hook_factory)
    caps = functools.cache(stream_caps)
    reads = functools.cache(read_caps)
    app = FastAPI(
        title="Kueue for Airflow",
        dependencies=list(dependencies) if dependencies is not None else [_airflow_login()],
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
    )
    for_task = (
        list(task_access) if task_access is not None else [dag_access("TASK_INSTANCE", user=airflow_user())]
    )
    for_logs = list(log_access) if log_access is not None else [dag_access("TASK_LOGS", user=airflow_user())]
    for_queues = list(queues_access) if queues_access is not None else [_queues_access()]
    if readable_dags is None:
        readable_dags = _every_dag if dependencies is not None else _readable_dags()
    if stream_user is None:
        stream_user = _nobody if dependencies is not None else _stream_user()
    if results_access is None:
        results_access = (
            _yes if dependencies is not None else dag_permission("XCOM", user=airflow_user()).dependency
        )

    def held(user: str, body: Any) -> StreamingResponse:
        """``body`` as a live stream counted against the caps, or 429 saying which cap is reached."""
        try:
            return _stream(caps().hold(user, body))
        except TooManyStreams as exc:
            raise HTTPException(429, str(exc)) from None

    async def guarded(user: str, read: Callable[..., T], *args: Any) -> T:
        """``read(*args)`` (blocking) in one of the plugin's threads, in a slot of ``user``; 429 without."""
        try:
            return await reads().run(user, read, *args)
        except TooManyReads as exc:
            raise HTTPException(429, str(exc), headers={"Retry-After": str(RETRY_AFTER_SECONDS)}) from None

    @app.exception_handler(StarletteHTTPException)
    async def not_logged_in(request: Request, exc: StarletteHTTPException) -> Response:
        """A page (not ``/api/``) asked without a valid login goes to Airflow's login, which comes back."""
        path = getattr(request.scope.get("route"), "path", "") or request.url.path
        if exc.status_code == 401 and not path.startswith("/api/"):
            login = login_url(str(request.url))
            if login:
                return RedirectResponse(login, status_code=303)
        return await http_exception_handler(request, exc)

    @app.exception_handler(ApiException)
    async def cluster_error(request: Request, exc: ApiException) -> Response:
        hint = (
            " Give the connection's identity get/list/watch on Jobs, Workloads, Kueue queues and Events "
            "(deploy/rbac/ui.yaml), or name the namespaces it may read in [kueue] ui_namespaces."
            if exc.status in (401, 403)
            else ""
        )
        message = f"the cluster answered {exc.status} {exc.reason}.{hint}"
        if getattr(request.scope.get("route"), "path", "").startswith("/api/"):
            return JSONResponse({"error": message}, status_code=502)
        page = dashboard_pages.error_page(f"The Kueue view could not read the cluster: {message}")
        return HTMLResponse(page, status_code=502)

    @app.get("/", include_in_schema=False, dependencies=for_queues)
    def index() -> RedirectResponse:
        return RedirectResponse("queues")

    def samples_now() -> tuple[dict[str, list[QueueSample]], float]:
        now = time.time()
        return {name: queue_samples.samples(name, now) for name in queue_samples.names()}, now

    def trend_of(dag_id: str, task_id: str, map_index: int) -> TaskTrend:
        """Only the results of the DAG the route authorized, whatever ``task_runs`` returns."""
        return task_trend(task_runs(dag_id, task_id, map_index), dag_id, task_id, map_index)

    @app.get("/api/queues", dependencies=for_queues)
    async def queues_json(
        dag_ids: Collection[str] | None = Depends(readable_dags), user: str = Depends(stream_user)
    ) -> dict[str, Any]:
        return await guarded(user, read_queues_json, dag_ids)

    def read_queues_json(dag_ids: Collection[str] | None) -> dict[str, Any]:
        histories = queue_histories(run_records(dag_ids))
        rows = queue_dashboard(hook(), namespaces(), queue_samples)
        samples, _ = samples_now()
        shown = {row.cluster_queue for row in rows}
        return {
            "queues": [row.to_dict() for row in rows],
            "over_time": {
                name: [dataclasses.asdict(s) for s in found]
                for name, found in samples.items()
                if name in shown
            },
            "history": [
                {"cluster_queue": h.cluster_queue, "runs": [dataclasses.asdict(r) for r in h.runs]}
                for h in histories
            ],
        }

    @app.get("/queues", response_class=HTMLResponse, dependencies=for_queues)
    async def queues_html(
        dag_ids: Collection[str] | None = Depends(readable_dags), user: str = Depends(stream_user)
    ) -> str:
        return await guarded(user, read_queues_html, dag_ids)

    def read_queues_html(dag_ids: Collection[str] | None) -> str:
        rows = queue_dashboard(hook(), namespaces(), queue_samples)
        histories = queue_histories(run_records(dag_ids))
        samples, now = samples_now()
        return dashboard_pages.queues_page(rows, histories, "api/queues/stream", samples, now)

    @app.get("/api/queues/stream", dependencies=for_queues)
    async def queues_stream(request: Request, user: str = Depends(stream_user)) -> StreamingResponse:
        """The queue table after each change of a Job or Workload in the namespaces shown (those of
        ``[kueue] ui_namespaces``, else those of the LocalQueues on the page)."""
        watched = list(namespaces())
        if not watched:  # the LocalQueues' namespaces: one read when the stream opens, not one per change
            rows = await run_in_threadpool(queue_dashboard, hook(), namespaces(), queue_samples)
            watched = sorted({row.namespace for row in rows})

        async def read_html() -> str:
            fresh = await run_in_threadpool(queue_dashboard, hook(), namespaces(), queue_samples)
            return dashboard_pages.queues_part(fresh, *samples_now())

        conn_id = hook().kubernetes_conn_id
        return held(user, live_feed.queue_events(conn_id, watched, read_html, request.is_disconnected))

    @app.get("/api/task", dependencies=for_task)
    async def task_json(
        dag_id: str, run_id: str, task_id: str, map_index: str = Query("-1"), user: str = Depends(stream_user)
    ) -> dict[str, Any]:
        index = parse_map_index(map_index)
        return await guarded(user, read_task_json, dag_id, run_id, task_id, index)

    def read_task_json(dag_id: str, run_id: str, task_id: str, index: int) -> dict[str, Any]:
        panels = task_panels(hook(), namespaces(), dag_id, run_id, task_id, index)
        return {"jobs": [panel.to_dict() for panel in panels]}

    @app.get("/task", response_class=HTMLResponse, dependencies=for_task)
    async def task_html(
        request: Request,
        dag_id: str,
        run_id: str,
        task_id: str,
        map_index: str = Query("-1"),
        user: str = Depends(stream_user),
        results: bool = Depends(results_access),
    ) -> str:
        index = parse_map_index(map_index)
        task = (dag_id, run_id, task_id, index)
        return await guarded(user, read_task_html, request.url.query, *task, results)

    def read_task_html(query: str, dag_id: str, run_id: str, task_id: str, index: int, results: bool) -> str:
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
        trend, trend_note = None, ""
        if not (panels or facts is None or facts.makes_kueue_jobs):
            pass  # another operator's task: no plot
        elif results:
            trend = trend_of(dag_id, task_id, index)
        else:
            trend_note = HIDDEN_RESULTS
        stream = None
        if panels and not panels[-1].live.finished:
            stream = f"api/task/stream?{query}&job={panels[-1].name}"
        elif not panels and facts is not None and facts.makes_kueue_jobs:
            stream = f"api/task/stream?{query}&job="  # reloads once the task makes its Job
        return dashboard_pages.task_page(
            title, panels, facts, stream, trend, log_query=query, trend_note=trend_note
        )

    @app.get("/api/task/stream", dependencies=for_task)
    async def task_stream(
        request: Request,
        dag_id: str,
        run_id: str,
        task_id: str,
        map_index: str = Query("-1"),
        job: str = "",
        user: str = Depends(stream_user),
    ) -> StreamingResponse:
        """The newest Job of the task instance, live. ``job``: the newest Job the page shows; a stream for a
        page that lacks the newest Job tells it to reload."""
        identity = AirflowIdentity(dag_id, task_id, run_id, map_index=parse_map_index(map_index))
        scopes: Sequence[str | None] = namespaces() or [None]
        found = [j for ns in scopes for j in await run_in_threadpool(hook().task_instance_jobs, ns, identity)]
        found.sort(key=lambda j: j["metadata"].get("creationTimestamp") or "")
        if not found:
            return _stream(iter([live_feed.retry_later()]))
        newest = found[-1]["metadata"]
        if newest["name"] != job:
            return _stream(iter([live_feed.event("reload", {"job": newest["name"]})]))

        def render(
            job: dict[str, Any], workload: dict[str, Any] | None, now: float, clock: FinishClock
        ) -> tuple[dict[str, str], bool]:
            state = live_state(job, workload, now, clock)
            name = state.job_name
            return {
                dashboard_pages.part_id("summary", name): dashboard_pages.summary_html(state),
                dashboard_pages.part_id("grid", name): dashboard_pages.grid_html(state.grid),
            }, state.finished

        conn_id, namespace, name = hook().kubernetes_conn_id, newest["namespace"], newest["name"]
        return held(user, live_feed.job_events(conn_id, namespace, name, render, request.is_disconnected))

    @app.get("/api/task/log", dependencies=for_logs)
    async def task_log(
        dag_id: str,
        run_id: str,
        task_id: str,
        job: str,
        index: int = Query(ge=0),
        map_index: str = Query("-1"),
        user: str = Depends(stream_user),
    ) -> dict[str, Any]:
        """The log tail of one index of one of the task instance's Jobs (its newest pod), on demand: the
        Job must be the task instance's own (labels, identity annotations and seal), so a DAG's log reader
        reads no other DAG's pods."""
        identity = AirflowIdentity(dag_id, task_id, run_id, map_index=parse_map_index(map_index))
        return await guarded(user, read_log_tail, identity, job, index)

    def read_log_tail(identity: AirflowIdentity, job: str, index: int) -> dict[str, Any]:
        dag_id, run_id, task_id = identity.dag_id, identity.run_id, identity.task_id
        scopes: Sequence[str | None] = namespaces() or [None]
        owned = [j for ns in scopes for j in hook().task_instance_jobs(ns, identity)]
        found = next((j for j in owned if j["metadata"]["name"] == job), None)
        if found is None:
            raise HTTPException(404, f"task instance {dag_id}/{run_id}/{task_id} has no Job {job!r}")
        completions = int((found.get("spec") or {}).get("completions") or 0)
        if index >= completions:
            raise HTTPException(422, f"index: Job {job} has indexes 0-{completions - 1}, got {index}")
        namespace = found["metadata"]["namespace"]
        uid = found["metadata"].get("uid")
        tail = hook().index_log_tail(namespace, job, index, LOG_TAIL_LINES, LOG_TAIL_BYTES, job_uid=uid)
        answer: dict[str, Any] = {"job": job, "namespace": namespace, "index": index, "lines": LOG_TAIL_LINES}
        if tail is None:
            return {**answer, "pod": None, "log": f"(index {index} has no pod now: not started yet, or gone)"}
        return {**answer, "pod": tail[0], "log": tail[1]}

    return app


def _stream(body: Any) -> StreamingResponse:
    return StreamingResponse(body, media_type="text/event-stream", headers=live_feed.HEADERS)
