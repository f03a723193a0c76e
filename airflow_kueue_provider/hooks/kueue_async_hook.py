"""Asynchronous Kubernetes + Kueue calls for triggers (kubernetes_asyncio), including list+watch streams."""

from __future__ import annotations

import functools
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, cast

import aiohttp
from airflow.providers.cncf.kubernetes.hooks.kubernetes import AsyncKubernetesHook
from kubernetes_asyncio import client as aclient
from kubernetes_asyncio import watch as awatch
from kubernetes_asyncio.client.rest import ApiException

from ..kueue.job_ownership import delete_unless_finished_step
from . import kueue_api
from .kueue_hook import DELETE_ATTEMPTS, KueueApiError
from .retry import acall_with_retry

_VERSIONS: dict[str, str] = {}
# Every one-off request is bounded: a connection that stalls (a frozen proxy, a half-open socket) fails and is
# retried instead of holding a trigger -- or the shared watch's LIST -- forever. Watches have their own.
REQUEST_TIMEOUT = aiohttp.ClientTimeout(total=60, sock_connect=10)
MANAGED_BY_SELECTOR = "app.kubernetes.io/managed-by=airflow-kueue-provider"


class AsyncKueueHook:
    """One ``kubernetes_asyncio`` client over the cncf ``kubernetes`` connection (see :meth:`session`)."""

    def __init__(self, kubernetes_conn_id: str = "kubernetes_default") -> None:
        self.kubernetes_conn_id = kubernetes_conn_id
        self._api: aclient.ApiClient | None = None
        self._version: str | None = None

    @asynccontextmanager
    async def session(self) -> AsyncIterator[AsyncKueueHook]:
        """Keep one client (one connection pool) open for the whole block."""
        async with AsyncKubernetesHook(conn_id=self.kubernetes_conn_id).get_conn() as api:
            self._api = api
            try:
                yield self
            finally:
                self._api = None

    @property
    def api(self) -> aclient.ApiClient:
        if self._api is None:
            raise RuntimeError("AsyncKueueHook used outside `async with hook.session()`")
        return self._api

    async def get_raw(self, path: str) -> dict[str, Any]:
        async def call() -> dict[str, Any]:
            resp = await self.api.call_api(
                path,
                "GET",
                auth_settings=["BearerToken"],
                _preload_content=False,
                _request_timeout=REQUEST_TIMEOUT,
                header_params={"Accept": "application/json"},
            )
            raw = resp[0] if isinstance(resp, tuple) else resp
            return dict(json.loads(await raw.read()))

        return await acall_with_retry(call, f"GET {path}")

    async def kueue_version(self) -> str:
        """Discovered once per connection and process: a triggerer must not ask again for every Job."""
        if self._version is None:
            cached = _VERSIONS.get(self.kubernetes_conn_id)
            if cached is None:
                cached = kueue_api.pick_version(await self.get_raw(f"/apis/{kueue_api.KUEUE_GROUP}"))
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
            lambda: core.list_namespaced_pod(
                namespace,
                label_selector=f"{kueue_api.JOB_NAME_LABEL}={job_name}",
                _preload_content=False,
                _request_timeout=REQUEST_TIMEOUT,
            ),
            "list the Job's pods",
        )
        pods, _ = _items_and_version(json.loads(await cast(Any, resp).read()))
        if pods:
            return pods, []
        selector = f"involvedObject.kind=Job,involvedObject.name={job_name}"
        listed: Any = await acall_with_retry(
            lambda: core.list_namespaced_event(
                namespace, field_selector=selector, _preload_content=False, _request_timeout=REQUEST_TIMEOUT
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
            lambda: custom.list_namespaced_custom_object(
                kueue_api.KUEUE_GROUP,
                version,
                namespace,
                "workloads",
                label_selector=f"{kueue_api.JOB_UID_LABEL}={job_uid}",
                _preload_content=False,
                _request_timeout=REQUEST_TIMEOUT,
            ),
            "list the Job's Workloads",
        )
        items, _ = _items_and_version(json.loads(await cast(Any, resp).read()))
        return max(items, key=lambda w: str(w["metadata"].get("creationTimestamp", "")), default=None)

    async def get_job(self, namespace: str, name: str) -> dict[str, Any] | None:
        batch = aclient.BatchV1Api(self.api)
        try:
            resp = await acall_with_retry(
                lambda: batch.read_namespaced_job(
                    name, namespace, _preload_content=False, _request_timeout=REQUEST_TIMEOUT
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
        resp = await acall_with_retry(
            lambda: batch.list_namespaced_job(
                namespace,
                label_selector=MANAGED_BY_SELECTOR,
                _preload_content=False,
                _request_timeout=REQUEST_TIMEOUT,
            ),
            "list Jobs",
        )
        return _items_and_version(json.loads(await cast(Any, resp).read()))

    async def list_workloads(self, namespace: str) -> tuple[list[dict[str, Any]], str]:
        version = await self.kueue_version()
        custom = aclient.CustomObjectsApi(self.api)
        resp = await acall_with_retry(
            lambda: custom.list_namespaced_custom_object(
                kueue_api.KUEUE_GROUP,
                version,
                namespace,
                "workloads",
                label_selector=kueue_api.JOB_UID_LABEL,
                _preload_content=False,
                _request_timeout=REQUEST_TIMEOUT,
            ),
            "list Workloads",
        )
        return _items_and_version(json.loads(await cast(Any, resp).read()))

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
            label_selector=kueue_api.JOB_UID_LABEL,
        ):
            yield event

    async def _watch(self, func: Any, *args: Any, **kwargs: Any) -> AsyncIterator[tuple[str, dict[str, Any]]]:
        """(event type, raw object) pairs until the server closes the watch; 410 Gone raises ApiException;
        ``read_timeout`` seconds without a byte raise asyncio.TimeoutError (a stalled connection)."""
        *positional, resource_version, timeout_seconds, read_timeout = args
        stream = awatch.Watch(return_type="object")
        try:
            async for event in stream.stream(
                func,
                *positional,
                resource_version=resource_version,
                timeout_seconds=timeout_seconds,
                allow_watch_bookmarks=True,
                _request_timeout=aiohttp.ClientTimeout(
                    total=timeout_seconds + 30, sock_connect=10, sock_read=read_timeout
                ),
                **kwargs,
            ):
                yield event["type"], event["raw_object"]
        finally:
            await stream.close()


def _items_and_version(doc: dict[str, Any]) -> tuple[list[dict[str, Any]], str]:
    return list(doc.get("items") or []), str(doc.get("metadata", {}).get("resourceVersion", ""))
