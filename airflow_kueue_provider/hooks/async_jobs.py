"""Batch Jobs through :class:`~.kueue_async_hook.AsyncKueueHook`: read, patch, delete, list, watch, and the
pods and Events of a Job whose pods seem stuck."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from .async_client import bind_clients, checked, items_and_version
from .async_pod_logs import AsyncPodLogs
from .retry import acall_with_retry

if TYPE_CHECKING:  # bound at run time by async_client's _import_clients() (see bind_clients)
    from kubernetes_asyncio import client as aclient

    from .async_client import REQUEST_TIMEOUT

bind_clients(globals())


class AsyncJobCalls(AsyncPodLogs):
    """The hook's calls on Jobs (and their pods, ``AsyncPodLogs``, and Events)."""

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
        pods = await self.job_pods(namespace, job_name, None)
        if pods:
            return pods, []
        selector = f"involvedObject.kind=Job,involvedObject.name={job_name}"
        core = aclient.CoreV1Api(self.api)
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
