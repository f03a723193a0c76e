"""JobSets through :class:`~.kueue_async_hook.AsyncKueueHook` (``KueueJobSetOperator``): read, list, watch,
their child Jobs, and delete unless finished."""

from __future__ import annotations

import functools
import json
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any, cast

from ..kueue.job_ownership import delete_unless_finished_step
from ..kueue.jobset import JOBSET_GROUP, JOBSET_PLURAL, JOBSET_VERSION
from ..kueue.names import JOBSET_NAME_LABEL
from .async_client import (
    MANAGED_BY_SELECTOR,
    AsyncKueueSession,
    ItemFilter,
    bind_clients,
    checked,
    items_and_version,
)
from .retry import acall_with_retry

if TYPE_CHECKING:  # bound at run time by async_client's _import_clients() (see bind_clients)
    from kubernetes_asyncio import client as aclient
    from kubernetes_asyncio.client.rest import ApiException

    from .async_client import REQUEST_TIMEOUT
    from .kueue_hook import DELETE_ATTEMPTS, KueueApiError

bind_clients(globals())


class AsyncJobSetCalls(AsyncKueueSession):
    """The hook's calls on JobSets (and their child Jobs)."""

    async def list_jobsets(
        self, namespace: str, keep: ItemFilter | None = None, max_items: int | None = None
    ) -> tuple[list[dict[str, Any]], str]:
        """The namespace's objects for the watch hub (``keep``, ``max_items``: see ``_list_pages``)."""
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
            keep=keep,
            max_items=max_items,
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
                lambda: checked(
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
            lambda: checked(
                batch.list_namespaced_job(
                    namespace,
                    label_selector=f"{JOBSET_NAME_LABEL}={name}",
                    _preload_content=False,
                    _request_timeout=REQUEST_TIMEOUT,
                )
            ),
            "list the JobSet's Jobs",
        )
        items, _ = items_and_version(json.loads(await cast(Any, resp).read()))
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
