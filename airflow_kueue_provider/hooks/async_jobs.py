"""Batch Jobs through :class:`~.kueue_async_hook.AsyncKueueHook`: read, patch, delete, list, watch, and the
pods and Events of a Job whose pods seem stuck."""

from __future__ import annotations

import functools
import json
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any, cast

from ..kueue.job_ownership import delete_unless_finished_step
from ..kueue.names import JOB_NAME_LABEL
from .async_client import (
    MANAGED_BY_SELECTOR,
    AsyncKueueSession,
    ItemFilter,
    bind_clients,
    checked,
    items_and_version,
)
from .kueue_api import controlled_by_job
from .retry import acall_with_retry

if TYPE_CHECKING:  # bound at run time by async_client's _import_clients() (see bind_clients)
    from kubernetes_asyncio import client as aclient
    from kubernetes_asyncio.client.rest import ApiException

    from .async_client import REQUEST_TIMEOUT
    from .kueue_hook import DELETE_ATTEMPTS, KueueApiError

bind_clients(globals())


class AsyncJobCalls(AsyncKueueSession):
    """The hook's calls on Jobs (and their pods and Events)."""

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
        """The Job's pods and, when it has none, the Events on the Job (why no pod could be created). Its pods
        are those it controls: a pod anyone made with its ``job-name`` label is not one."""
        core = aclient.CoreV1Api(self.api)
        resp = await acall_with_retry(
            lambda: checked(
                core.list_namespaced_pod(
                    namespace,
                    label_selector=f"{JOB_NAME_LABEL}={job_name}",
                    _preload_content=False,
                    _request_timeout=REQUEST_TIMEOUT,
                )
            ),
            "list the Job's pods",
        )
        listed_pods, _ = items_and_version(json.loads(await cast(Any, resp).read()))
        pods = [p for p in listed_pods if controlled_by_job(p, job_name)]
        if pods:
            return pods, []
        selector = f"involvedObject.kind=Job,involvedObject.name={job_name}"
        listed: Any = await acall_with_retry(
            lambda: checked(
                core.list_namespaced_event(
                    namespace,
                    field_selector=selector,
                    _preload_content=False,
                    _request_timeout=REQUEST_TIMEOUT,
                )
            ),
            "list the Job's Events",
        )
        events, _ = items_and_version(json.loads(await listed.read()))
        return [], events

    async def get_job(self, namespace: str, name: str) -> dict[str, Any] | None:
        batch = aclient.BatchV1Api(self.api)
        try:
            resp = await acall_with_retry(
                lambda: checked(
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
    async def list_jobs(
        self, namespace: str, keep: ItemFilter | None = None, max_items: int | None = None
    ) -> tuple[list[dict[str, Any]], str]:
        """The namespace's objects for the watch hub (``keep``, ``max_items``: see ``_list_pages``)."""
        batch = aclient.BatchV1Api(self.api)
        return await self._list_pages(
            functools.partial(batch.list_namespaced_job, namespace, label_selector=MANAGED_BY_SELECTOR),
            "list Jobs",
            keep=keep,
            max_items=max_items,
        )

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
