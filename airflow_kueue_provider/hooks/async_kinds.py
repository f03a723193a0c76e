"""Any registered job kind through :class:`~.kueue_async_hook.AsyncKueueHook`: read, list, watch, its child
Jobs, and delete unless finished -- one implementation over the kind's API coordinates
(``kueue.kinds.KindDescription.api``), so the shared watch and the triggers name no kind."""

from __future__ import annotations

import functools
import json
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any, cast

from ..kueue.identity.job_ownership import delete_unless_finished_step
from ..kueue.kinds import KindDescription, child_kind
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


def _coordinates(kind: KindDescription, namespace: str) -> tuple[str, str, str, str]:
    """The positional arguments of ``CustomObjectsApi``'s namespaced calls (core groups included: a Job is
    ``/apis/batch/v1/namespaces/<ns>/jobs``)."""
    return kind.api.group, kind.api.version, namespace, kind.api.plural


class AsyncKindCalls(AsyncKueueSession):
    """The hook's calls on the objects of any registered kind."""

    async def list_kind(
        self,
        kind: KindDescription,
        namespace: str,
        keep: ItemFilter | None = None,
        max_items: int | None = None,
    ) -> tuple[list[dict[str, Any]], str]:
        """The namespace's provider-made objects of ``kind`` for the watch hub (``keep``, ``max_items``: see
        ``_list_pages``)."""
        custom = aclient.CustomObjectsApi(self.api)
        listing = functools.partial(
            custom.list_namespaced_custom_object,
            *_coordinates(kind, namespace),
            label_selector=MANAGED_BY_SELECTOR,
        )
        return await self._list_pages(listing, f"list {kind.kind}s", keep=keep, max_items=max_items)

    async def watch_kind(
        self,
        kind: KindDescription,
        namespace: str,
        resource_version: str,
        timeout_seconds: int,
        read_timeout: float | None = None,
    ) -> AsyncIterator[tuple[str, dict[str, Any]]]:
        custom = aclient.CustomObjectsApi(self.api)
        async for event in self._watch(
            custom.list_namespaced_custom_object,
            *_coordinates(kind, namespace),
            resource_version,
            timeout_seconds,
            read_timeout,
            label_selector=MANAGED_BY_SELECTOR,
        ):
            yield event

    async def get_kind(self, kind: KindDescription, namespace: str, name: str) -> dict[str, Any] | None:
        """The object now (None: there is none of that name)."""
        custom = aclient.CustomObjectsApi(self.api)
        read = functools.partial(
            custom.get_namespaced_custom_object,
            *_coordinates(kind, namespace),
            name,
            _preload_content=False,
            _request_timeout=REQUEST_TIMEOUT,
        )
        try:
            resp = await acall_with_retry(lambda: checked(read()), f"read {kind.kind}")
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        return dict(json.loads(await cast(Any, resp).read()))

    async def children_of(self, kind: KindDescription, namespace: str, name: str) -> list[dict[str, Any]]:
        """The object's child Jobs, read now (the kind's controller labels them with its name); none for a
        kind without children."""
        if kind.child_label is None:
            return []
        custom = aclient.CustomObjectsApi(self.api)
        listing = functools.partial(
            custom.list_namespaced_custom_object,
            *_coordinates(child_kind(), namespace),
            label_selector=f"{kind.child_label}={name}",
            _preload_content=False,
            _request_timeout=REQUEST_TIMEOUT,
        )
        resp = await acall_with_retry(lambda: checked(listing()), f"list the {kind.kind}'s Jobs")
        items, _ = items_and_version(json.loads(await cast(Any, resp).read()))
        return items

    async def delete_unless_finished(
        self, kind: KindDescription, namespace: str, name: str, uid: str | None = None
    ) -> str:
        """Delete the object if it is still queued or running: "deleted", "finished" (kept) or "gone".

        A finished object holds no resources, and it is the record that the UI and a later try read; its
        TTL removes it. The delete carries the read's resourceVersion as a precondition, so one that
        finishes in between is kept too (up to the last of a few attempts). With ``uid``, an object of that
        name that is another one (re-created since) counts as "gone". Background propagation: its Jobs,
        pods and Workload go with it.
        """
        custom = aclient.CustomObjectsApi(self.api)
        for attempt in range(1, DELETE_ATTEMPTS + 1):
            obj = await self.get_kind(kind, namespace, name)
            step = delete_unless_finished_step(obj, uid, attempt == DELETE_ATTEMPTS)
            if isinstance(step, str):
                return step
            delete = functools.partial(
                custom.delete_namespaced_custom_object,
                *_coordinates(kind, namespace),
                name,
                body=step,  # type: ignore[arg-type]  # a DeleteOptions dict is sent as it is
                _request_timeout=REQUEST_TIMEOUT,
            )
            try:
                await acall_with_retry(delete, f"delete {kind.kind}")
                return "deleted"
            except ApiException as exc:
                if exc.status == 404:
                    return "gone"
                if exc.status != 409:  # 409: it changed since the read; look again
                    raise
        raise KueueApiError(
            f"{kind.kind} {namespace}/{name} could not be deleted: it kept changing (409 Conflict)"
        )
