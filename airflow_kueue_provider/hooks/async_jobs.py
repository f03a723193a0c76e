"""Batch Jobs through :class:`~.kueue_async_hook.AsyncKueueHook`: read, patch, delete, list, watch, and the
pods and Events of a Job whose pods seem stuck."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, cast

from ..kueue.names import JOB_NAME_LABEL
from .async_client import (
    AsyncKueueSession,
    bind_clients,
    checked,
    items_and_version,
)
from .kueue_api import controlled_by_job
from .retry import acall_with_retry

if TYPE_CHECKING:  # bound at run time by async_client's _import_clients() (see bind_clients)
    from kubernetes_asyncio import client as aclient

    from .async_client import REQUEST_TIMEOUT

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
