"""Kueue through :class:`~.kueue_async_hook.AsyncKueueHook`: the served API version, a Job's Workloads
(read, list, watch) and a pending Workload's place in its LocalQueue (the visibility API)."""

from __future__ import annotations

import functools
import json
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any, cast

from ..kueue.names import JOB_UID_LABEL
from . import kueue_api
from .async_client import AsyncKueueSession, ItemFilter, bind_clients, checked, items_and_version
from .retry import acall_with_retry

if TYPE_CHECKING:  # bound at run time by async_client's _import_clients() (see bind_clients)
    from kubernetes_asyncio import client as aclient
    from kubernetes_asyncio.client.rest import ApiException

    from .async_client import REQUEST_TIMEOUT

bind_clients(globals())

_VERSIONS: dict[str, str] = {}


class AsyncWorkloadCalls(AsyncKueueSession):
    """The hook's calls on Kueue: its version, Workloads and the visibility API."""

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
        pending = await self.pending_workloads(namespace, local_queue)
        return None if pending is None else kueue_api.position_of(pending, workload)

    async def pending_workloads(self, namespace: str, local_queue: str) -> dict[str, Any] | None:
        """The LocalQueue's pending Workloads with their positions; None where the visibility API is not
        served (it is optional: Kueue's VisibilityOnDemand)."""
        try:
            path = kueue_api.pending_workloads_path(await self.kueue_version(), namespace, local_queue)
            return dict(await self.get_raw(path))
        except ApiException:
            return None

    async def workload_for_job(self, namespace: str, job_uid: str) -> dict[str, Any] | None:
        """The Job's current Workload (the newest slice of an elastic Job), read now, not from a cache."""
        version = await self.kueue_version()
        custom = aclient.CustomObjectsApi(self.api)
        resp = await acall_with_retry(
            lambda: checked(
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
        items, _ = items_and_version(json.loads(await cast(Any, resp).read()))
        return kueue_api.first_owned_by(items, job_uid)

    async def list_workloads(
        self, namespace: str, keep: ItemFilter | None = None, max_items: int | None = None
    ) -> tuple[list[dict[str, Any]], str]:
        """The namespace's objects for the watch hub (``keep``, ``max_items``: see ``_list_pages``)."""
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
            keep=keep,
            max_items=max_items,
        )

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
