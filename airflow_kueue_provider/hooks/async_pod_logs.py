"""Pod logs read as they are written (``triggers.log_stream``): the pods a Job controls, and one pod's log
followed (``follow=true``) through the shared ``kubernetes_asyncio`` session.

A reconnect skips the bytes already read: ``sinceTime`` would lose or repeat lines written in the same second,
and not every kubelet serves it (the bed's process nodes answer 400), while a container's log file is
append-only for the life of the container.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any, cast

from ..kueue.names import JOB_NAME_LABEL
from .async_client import AsyncKueueSession, bind_clients, checked, items_and_version
from .kueue_api import controlled_by_job
from .retry import acall_with_retry

if TYPE_CHECKING:  # bound at run time by async_client's _import_clients() (see bind_clients)
    import aiohttp
    from kubernetes_asyncio import client as aclient

    from .async_client import REQUEST_TIMEOUT

bind_clients(globals())

LOG_READ_IDLE_SECONDS = 300.0
"""A followed log that sends nothing for this long is reconnected (a half-open connection)."""


class AsyncPodLogs(AsyncKueueSession):
    """The Job's pods, and their logs as they grow."""

    async def job_pods(self, namespace: str, job_name: str, job_uid: str | None) -> list[dict[str, Any]]:
        """The pods the Job (of ``job_uid``) controls: a pod anyone made with its label is not one."""
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
        pods, _ = items_and_version(json.loads(await cast(Any, resp).read()))
        return [p for p in pods if controlled_by_job(p, job_name, job_uid)]

    async def follow_log(
        self, namespace: str, pod: str, container: str | None, skip: int = 0
    ) -> AsyncIterator[bytes]:
        """The pod's log from byte ``skip`` on, line by line as it is written, until the container ends
        (the server closes the stream). A pod not started yet raises ApiException (400)."""
        core = aclient.CoreV1Api(self.api)
        extra: dict[str, Any] = {"container": container} if container else {}
        resp = await checked(
            core.read_namespaced_pod_log(
                pod,
                namespace,
                follow=True,
                _preload_content=False,
                _request_timeout=aiohttp.ClientTimeout(
                    total=None, sock_connect=10, sock_read=LOG_READ_IDLE_SECONDS
                ),
                **extra,
            )
        )
        raw = resp[0] if isinstance(resp, tuple) else resp
        try:
            while line := await raw.content.readline():
                if skip >= len(line):
                    skip -= len(line)
                    continue
                yield line[skip:]
                skip = 0
        finally:
            raw.release()
