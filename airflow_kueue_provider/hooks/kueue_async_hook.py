"""Asynchronous Kubernetes + Kueue calls for triggers (kubernetes_asyncio), including list+watch streams.

Nothing here may hold a triggerer's event loop, which runs every trigger of the process (Airflow warns
"Triggerer's async thread was blocked" past 0.2 s):

- importing this module is cheap: kubernetes_asyncio, aiohttp and the cncf hook (about 1 s of CPU together)
  are imported in a worker thread by the first :meth:`AsyncKueueHook.session` (:func:`load_clients`);
- the connection's client configuration (kubeconfig parsing, certificate files, in-cluster token) is loaded
  in a worker thread, once per connection and process, and reused by every later session; it is read again
  when the connection or its kubeconfig file changes, and every time for exec-plugin credentials, which
  expire;
- LISTs come in pages of LIST_PAGE_SIZE objects, so parsing a namespace of 1,000 Jobs is many short steps,
  not one long one.
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
import sys
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, cast

from ..kueue.job_ownership import delete_unless_finished_step
from ..kueue.jobset import JOBSET_GROUP, JOBSET_PLURAL, JOBSET_VERSION
from ..kueue.names import JOB_NAME_LABEL, JOB_UID_LABEL, JOBSET_NAME_LABEL
from . import kueue_api
from .retry import acall_with_retry

if TYPE_CHECKING:  # bound at run time by _import_clients(), in a worker thread
    import aiohttp
    from airflow.providers.cncf.kubernetes.hooks.kubernetes import AsyncKubernetesHook
    from kubernetes_asyncio import client as aclient
    from kubernetes_asyncio.client.rest import ApiException

    from .kueue_hook import DELETE_ATTEMPTS, KueueApiError

# Every one-off request is bounded: a connection that stalls (a frozen proxy, a half-open socket) fails and is
# retried instead of holding a trigger -- or the shared watch's LIST -- forever. Watches have their own.
# An aiohttp.ClientTimeout(total=60, sock_connect=10), made by _import_clients().
REQUEST_TIMEOUT: Any = None
_VERSIONS: dict[str, str] = {}
MANAGED_BY_SELECTOR = "app.kubernetes.io/managed-by=airflow-kueue-provider"
LIST_PAGE_SIZE = 100  # objects per LIST page: parsing one page is a few ms of the event loop's time

_load_lock = threading.Lock()
_loaded = False
# (connection id, its extras and kubeconfig file version) -> the hook holding its loaded configuration
_configs: dict[tuple[str, str], AsyncKubernetesHook] = {}


def _import_clients() -> None:
    """Import the Kubernetes client libraries and bind them in this module (run in a worker thread)."""
    global _loaded
    with _load_lock:
        if _loaded:
            return
        import aiohttp
        from airflow.providers.cncf.kubernetes.hooks.kubernetes import AsyncKubernetesHook
        from kubernetes_asyncio import client as aclient
        from kubernetes_asyncio.client.rest import ApiException

        from . import kueue_hook

        globals().update(
            aiohttp=aiohttp,
            AsyncKubernetesHook=AsyncKubernetesHook,
            aclient=aclient,
            ApiException=ApiException,
            DELETE_ATTEMPTS=kueue_hook.DELETE_ATTEMPTS,
            KueueApiError=kueue_hook.KueueApiError,
            REQUEST_TIMEOUT=aiohttp.ClientTimeout(total=60, sock_connect=10),
        )
        _loaded = True


def api_status(exc: BaseException) -> int | None:
    """The HTTP status of a kubernetes_asyncio ``ApiException`` (None for any other error), without importing
    kubernetes_asyncio: callers need not import it at module level (and so at a triggerer's first trigger)."""
    module = sys.modules.get("kubernetes_asyncio.client.exceptions")
    if module is not None and isinstance(exc, module.ApiException):
        return int(exc.status) if exc.status is not None else None
    return None


def is_connection_error(exc: BaseException) -> bool:
    """An aiohttp client error (a session closed under us, a reset connection), without importing aiohttp."""
    module = sys.modules.get("aiohttp")
    return module is not None and isinstance(exc, module.ClientError)


async def load_clients() -> None:
    """Import kubernetes_asyncio, aiohttp and the cncf hook off the event loop, once per process."""
    if not _loaded:
        await asyncio.to_thread(_import_clients)


async def _kubernetes_hook(conn_id: str) -> AsyncKubernetesHook:
    """The cncf hook for ``conn_id`` with its client configuration loaded, reused while nothing changed."""
    await load_clients()
    hook = AsyncKubernetesHook(conn_id=conn_id)
    extras = await hook.get_conn_extras()  # in a triggerer: asked of its supervisor, asynchronously
    key = (conn_id, _config_version(extras))
    cached = _configs.get(key)
    if cached is not None:
        return cached
    # kubeconfig parsing, certificate temp files, an in-cluster token: blocking work, done in a thread with
    # a loop of its own (the extras are already read, so it asks nothing of this loop's supervisor channel).
    await asyncio.to_thread(_run_blocking, hook._load_config)
    if hook._config_loaded:  # static credentials; exec-plugin tokens expire, so those load every time
        _configs[key] = hook
    return hook


def _config_version(extras: dict[str, Any]) -> str:
    """The connection's extras and the kubeconfig file's mtime: a change means a new configuration."""
    path = extras.get("kube_config_path") or extras.get("extra__kubernetes__kube_config_path")
    try:
        mtime = os.stat(os.path.expanduser(path)).st_mtime_ns if path else 0
    except OSError:
        mtime = -1
    return json.dumps(extras, sort_keys=True, default=str) + f"@{mtime}"


def _run_blocking(coro_fn: Callable[[], Awaitable[Any]]) -> Any:
    return asyncio.run(_await(coro_fn))


async def _await(coro_fn: Callable[[], Awaitable[Any]]) -> Any:
    return await coro_fn()


class AsyncKueueHook:
    """One ``kubernetes_asyncio`` client over the cncf ``kubernetes`` connection (see :meth:`session`)."""

    def __init__(self, kubernetes_conn_id: str = "kubernetes_default") -> None:
        self.kubernetes_conn_id = kubernetes_conn_id
        self._api: aclient.ApiClient | None = None
        self._version: str | None = None

    @asynccontextmanager
    async def session(self) -> AsyncIterator[AsyncKueueHook]:
        """Keep one client (one connection pool) open for the whole block. Its configuration is the
        process's loaded one for the connection; only the client (an SSL context, a pool) is new."""
        configured = await _kubernetes_hook(self.kubernetes_conn_id)
        api = aclient.ApiClient(configuration=configured.client_configuration)
        self._api = api
        try:
            yield self
        finally:
            self._api = None
            await api.close()

    @property
    def api(self) -> aclient.ApiClient:
        if self._api is None:
            raise RuntimeError("AsyncKueueHook used outside `async with hook.session()`")
        return self._api

    async def get_raw(self, path: str) -> dict[str, Any]:
        async def call() -> dict[str, Any]:
            resp = await _checked(
                self.api.call_api(
                    path,
                    "GET",
                    auth_settings=["BearerToken"],
                    _preload_content=False,
                    _request_timeout=REQUEST_TIMEOUT,
                    header_params={"Accept": "application/json"},
                )
            )
            raw = resp[0] if isinstance(resp, tuple) else resp
            return dict(json.loads(await raw.read()))

        return await acall_with_retry(call, f"GET {path}")

    async def kueue_version(self) -> str:
        """Discovered once per connection and process: a triggerer must not ask again for every Job."""
        if self._version is None:
            cached = _VERSIONS.get(self.kubernetes_conn_id)
            if cached is None:
                try:
                    group = await self.get_raw(f"/apis/{kueue_api.KUEUE_GROUP}")
                except ApiException as exc:
                    if exc.status != 404:
                        raise
                    group = {}  # the group is not served at all: pick_version says so
                cached = kueue_api.pick_version(group)
                _VERSIONS[self.kubernetes_conn_id] = cached
            self._version = cached
        return self._version

    async def pending_position(
        self, namespace: str, local_queue: str, workload: str
    ) -> tuple[int, int] | None:
        try:
            path = kueue_api.pending_workloads_path(await self.kueue_version(), namespace, local_queue)
            return kueue_api.position_of(await self.get_raw(path), workload)
        except ApiException:
            return None  # the visibility API is optional

    async def set_parallelism(self, namespace: str, name: str, parallelism: int) -> None:
        """Patch ``spec.parallelism``. For an elastic Job Kueue admits the extra pods as a new slice."""
        batch = aclient.BatchV1Api(self.api)
        await acall_with_retry(
            lambda: batch.patch_namespaced_job(
                name, namespace, {"spec": {"parallelism": parallelism}}, _request_timeout=REQUEST_TIMEOUT
            ),
            "patch Job parallelism",
        )

    async def delete_job(self, namespace: str, name: str, uid: str | None = None) -> bool:
        """Delete the Job (background propagation); with ``uid``, only that object, never a namesake that
        replaced it (the apiserver checks the precondition). False when it was already gone."""
        batch = aclient.BatchV1Api(self.api)
        options = aclient.V1DeleteOptions(
            propagation_policy="Background",
            preconditions=aclient.V1Preconditions(uid=uid) if uid else None,
        )
        try:
            await acall_with_retry(
                lambda: batch.delete_namespaced_job(
                    name, namespace, body=options, _request_timeout=REQUEST_TIMEOUT
                ),
                "delete Job",
            )
            return True
        except ApiException as exc:
            if exc.status == 404 or (exc.status == 409 and uid):
                return False
            raise

    async def pods_and_events_of_job(
        self, namespace: str, job_name: str
    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """The Job's pods and, when it has none, the Events on the Job (why no pod could be created)."""
        core = aclient.CoreV1Api(self.api)
        resp = await acall_with_retry(
            lambda: _checked(
                core.list_namespaced_pod(
                    namespace,
                    label_selector=f"{JOB_NAME_LABEL}={job_name}",
                    _preload_content=False,
                    _request_timeout=REQUEST_TIMEOUT,
                )
            ),
            "list the Job's pods",
        )
        pods, _ = _items_and_version(json.loads(await cast(Any, resp).read()))
        if pods:
            return pods, []
        selector = f"involvedObject.kind=Job,involvedObject.name={job_name}"
        listed: Any = await acall_with_retry(
            lambda: _checked(
                core.list_namespaced_event(
                    namespace,
                    field_selector=selector,
                    _preload_content=False,
                    _request_timeout=REQUEST_TIMEOUT,
                )
            ),
            "list the Job's Events",
        )
        events, _ = _items_and_version(json.loads(await listed.read()))
        return [], events

    async def workload_for_job(self, namespace: str, job_uid: str) -> dict[str, Any] | None:
        """The Job's current Workload (the newest slice of an elastic Job), read now, not from a cache."""
        version = await self.kueue_version()
        custom = aclient.CustomObjectsApi(self.api)
        resp = await acall_with_retry(
            lambda: _checked(
                custom.list_namespaced_custom_object(
                    kueue_api.KUEUE_GROUP,
                    version,
                    namespace,
                    "workloads",
                    label_selector=f"{JOB_UID_LABEL}={job_uid}",
                    _preload_content=False,
                    _request_timeout=REQUEST_TIMEOUT,
                )
            ),
            "list the Job's Workloads",
        )
        items, _ = _items_and_version(json.loads(await cast(Any, resp).read()))
        return max(items, key=lambda w: str(w["metadata"].get("creationTimestamp", "")), default=None)

    async def get_job(self, namespace: str, name: str) -> dict[str, Any] | None:
        batch = aclient.BatchV1Api(self.api)
        try:
            resp = await acall_with_retry(
                lambda: _checked(
                    batch.read_namespaced_job(
                        name, namespace, _preload_content=False, _request_timeout=REQUEST_TIMEOUT
                    )
                ),
                "read Job",
            )
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        return dict(json.loads(await cast(Any, resp).read()))

    async def delete_job_unless_finished(self, namespace: str, name: str, uid: str | None = None) -> str:
        """Delete the Job if it is still queued or running: "deleted", "finished" (kept) or "gone".

        A finished Job holds no resources, and it is the record that the UI and a later try read; its
        ``ttlSecondsAfterFinished`` removes it. The delete carries the read's resourceVersion as a
        precondition, so a Job that finishes in between is kept too (up to the last of a few attempts).
        With ``uid``, a Job of that name that is another object (re-created since) counts as "gone".
        """
        batch = aclient.BatchV1Api(self.api)
        for attempt in range(1, DELETE_ATTEMPTS + 1):
            job = await self.get_job(namespace, name)
            step = delete_unless_finished_step(job, uid, attempt == DELETE_ATTEMPTS)
            if isinstance(step, str):
                return step
            try:
                # A DeleteOptions dict is sent as it is (the stubs ask for the model class).
                delete = functools.partial(
                    batch.delete_namespaced_job,
                    name,
                    namespace,
                    body=step,  # type: ignore[arg-type]
                    _request_timeout=REQUEST_TIMEOUT,
                )
                await acall_with_retry(delete, "delete Job")
                return "deleted"
            except ApiException as exc:
                if exc.status == 404:
                    return "gone"
                if exc.status != 409:  # 409: it changed since the read; look again
                    raise
        raise KueueApiError(f"Job {namespace}/{name} could not be deleted: it kept changing (409 Conflict)")

    # --- list + watch ---------------------------------------------------------------------------------
    async def list_jobs(self, namespace: str) -> tuple[list[dict[str, Any]], str]:
        batch = aclient.BatchV1Api(self.api)
        return await self._list_pages(
            functools.partial(batch.list_namespaced_job, namespace, label_selector=MANAGED_BY_SELECTOR),
            "list Jobs",
        )

    async def list_workloads(self, namespace: str) -> tuple[list[dict[str, Any]], str]:
        version = await self.kueue_version()
        custom = aclient.CustomObjectsApi(self.api)
        return await self._list_pages(
            functools.partial(
                custom.list_namespaced_custom_object,
                kueue_api.KUEUE_GROUP,
                version,
                namespace,
                "workloads",
                label_selector=JOB_UID_LABEL,
            ),
            "list Workloads",
        )

    async def _list_pages(self, list_fn: Callable[..., Any], what: str) -> tuple[list[dict[str, Any]], str]:
        """Every item of a LIST and its resourceVersion, read LIST_PAGE_SIZE at a time (one consistent
        snapshot: the apiserver serves the later pages from the first page's resourceVersion)."""
        items: list[dict[str, Any]] = []
        token: str | None = None
        while True:
            page_args: dict[str, Any] = {"limit": LIST_PAGE_SIZE}
            if token:
                page_args["_continue"] = token
            read_page = functools.partial(
                list_fn, **page_args, _preload_content=False, _request_timeout=REQUEST_TIMEOUT
            )
            resp = await acall_with_retry(lambda: _checked(read_page()), what)  # noqa: B023 - awaited at once
            doc = json.loads(await cast(Any, resp).read())
            page, version = _items_and_version(doc)
            items += page
            token = doc.get("metadata", {}).get("continue")
            if not token:
                return items, version

    async def watch_jobs(
        self, namespace: str, resource_version: str, timeout_seconds: int, read_timeout: float | None = None
    ) -> AsyncIterator[tuple[str, dict[str, Any]]]:
        batch = aclient.BatchV1Api(self.api)
        async for event in self._watch(
            batch.list_namespaced_job,
            namespace,
            resource_version,
            timeout_seconds,
            read_timeout,
            label_selector=MANAGED_BY_SELECTOR,
        ):
            yield event

    async def watch_workloads(
        self, namespace: str, resource_version: str, timeout_seconds: int, read_timeout: float | None = None
    ) -> AsyncIterator[tuple[str, dict[str, Any]]]:
        version = await self.kueue_version()
        custom = aclient.CustomObjectsApi(self.api)
        async for event in self._watch(
            custom.list_namespaced_custom_object,
            kueue_api.KUEUE_GROUP,
            version,
            namespace,
            "workloads",
            resource_version,
            timeout_seconds,
            read_timeout,
            label_selector=JOB_UID_LABEL,
        ):
            yield event

    # --- JobSets (KueueJobSetOperator) --------------------------------------------------------------------
    async def list_jobsets(self, namespace: str) -> tuple[list[dict[str, Any]], str]:
        custom = aclient.CustomObjectsApi(self.api)
        return await self._list_pages(
            functools.partial(
                custom.list_namespaced_custom_object,
                JOBSET_GROUP,
                JOBSET_VERSION,
                namespace,
                JOBSET_PLURAL,
                label_selector=MANAGED_BY_SELECTOR,
            ),
            "list JobSets",
        )

    async def watch_jobsets(
        self, namespace: str, resource_version: str, timeout_seconds: int, read_timeout: float | None = None
    ) -> AsyncIterator[tuple[str, dict[str, Any]]]:
        custom = aclient.CustomObjectsApi(self.api)
        async for event in self._watch(
            custom.list_namespaced_custom_object,
            JOBSET_GROUP,
            JOBSET_VERSION,
            namespace,
            JOBSET_PLURAL,
            resource_version,
            timeout_seconds,
            read_timeout,
            label_selector=MANAGED_BY_SELECTOR,
        ):
            yield event

    async def get_jobset(self, namespace: str, name: str) -> dict[str, Any] | None:
        custom = aclient.CustomObjectsApi(self.api)
        try:
            resp = await acall_with_retry(
                lambda: _checked(
                    custom.get_namespaced_custom_object(
                        JOBSET_GROUP,
                        JOBSET_VERSION,
                        namespace,
                        JOBSET_PLURAL,
                        name,
                        _preload_content=False,
                        _request_timeout=REQUEST_TIMEOUT,
                    )
                ),
                "read JobSet",
            )
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        return dict(json.loads(await cast(Any, resp).read()))

    async def jobset_children(self, namespace: str, name: str) -> list[dict[str, Any]]:
        """The JobSet's Jobs, read now (the JobSet controller labels them with its name)."""
        batch = aclient.BatchV1Api(self.api)
        resp = await acall_with_retry(
            lambda: _checked(
                batch.list_namespaced_job(
                    namespace,
                    label_selector=f"{JOBSET_NAME_LABEL}={name}",
                    _preload_content=False,
                    _request_timeout=REQUEST_TIMEOUT,
                )
            ),
            "list the JobSet's Jobs",
        )
        items, _ = _items_and_version(json.loads(await cast(Any, resp).read()))
        return items

    async def delete_jobset_unless_finished(self, namespace: str, name: str, uid: str | None = None) -> str:
        """Delete the JobSet (its Jobs, pods and Workload go with it) unless it finished: "deleted",
        "finished" (kept) or "gone" -- as ``delete_job_unless_finished``, step by step."""
        custom = aclient.CustomObjectsApi(self.api)
        for attempt in range(1, DELETE_ATTEMPTS + 1):
            jobset = await self.get_jobset(namespace, name)
            step = delete_unless_finished_step(jobset, uid, attempt == DELETE_ATTEMPTS)
            if isinstance(step, str):
                return step
            delete = functools.partial(
                custom.delete_namespaced_custom_object,
                JOBSET_GROUP,
                JOBSET_VERSION,
                namespace,
                JOBSET_PLURAL,
                name,
                body=step,  # type: ignore[arg-type]  # a DeleteOptions dict is sent as it is
                _request_timeout=REQUEST_TIMEOUT,
            )
            try:
                await acall_with_retry(delete, "delete JobSet")
                return "deleted"
            except ApiException as exc:
                if exc.status == 404:
                    return "gone"
                if exc.status != 409:
                    raise
        raise KueueApiError(
            f"JobSet {namespace}/{name} could not be deleted: it kept changing (409 Conflict)"
        )

    async def _watch(self, func: Any, *args: Any, **kwargs: Any) -> AsyncIterator[tuple[str, dict[str, Any]]]:
        """(event type, raw object) pairs until the server closes the watch; 410 Gone raises ApiException;
        ``read_timeout`` seconds without a byte raise asyncio.TimeoutError (a stalled connection).

        The stream is read here, one JSON line per event, rather than through kubernetes_asyncio's Watch:
        that one builds a default ApiClient per watch (its SSL context loads the system CA bundle, ~0.1 s of
        the event loop, at every reconnect) and encodes and decodes every event once more for a model we do
        not use."""
        *positional, resource_version, timeout_seconds, read_timeout = args
        resp = await _checked(
            func(
                *positional,
                watch=True,
                resource_version=resource_version,
                timeout_seconds=timeout_seconds,
                allow_watch_bookmarks=True,
                _preload_content=False,
                _request_timeout=aiohttp.ClientTimeout(
                    total=timeout_seconds + 30, sock_connect=10, sock_read=read_timeout
                ),
                **kwargs,
            )
        )
        try:
            while line := await resp.content.readline():
                event = json.loads(line)
                if event.get("type") == "ERROR":  # e.g. 410 Gone: the resourceVersion is too old
                    status = event.get("object") or {}
                    raise ApiException(
                        status=status.get("code"), reason=f"{status.get('reason')}: {status.get('message')}"
                    )
                yield str(event["type"]), dict(event["object"])
        finally:
            resp.release()


async def _checked(pending: Awaitable[Any]) -> Any:
    """The raw response of a call made with ``_preload_content=False``, which kubernetes_asyncio returns
    whatever its status: a non-2xx one raises ApiException here, as a preloaded call would (status, reason,
    body, headers for Retry-After), so a 404 is not read as an object, a 403 on a LIST not as an empty
    list, and a 429 or 5xx is retried."""
    resp = await pending
    raw = resp[0] if isinstance(resp, tuple) else resp
    status = int(getattr(raw, "status", 200))
    if 200 <= status <= 299:
        return resp
    try:
        body = await raw.read()
    finally:
        raw.release()
    exc = ApiException(status=status, reason=str(getattr(raw, "reason", "") or ""))
    exc.body = body  # bytes, as a preloaded call's ApiException has it (``describe`` reads it as JSON)
    exc.headers = getattr(raw, "headers", None)
    raise exc


def _items_and_version(doc: dict[str, Any]) -> tuple[list[dict[str, Any]], str]:
    return list(doc.get("items") or []), str(doc.get("metadata", {}).get("resourceVersion", ""))
