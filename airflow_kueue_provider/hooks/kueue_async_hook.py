"""Asynchronous Kubernetes + Kueue calls for triggers (kubernetes_asyncio), including list+watch streams.

:class:`AsyncKueueHook` is one client session (``async_client``: loading kubernetes_asyncio and the
connection's configuration off the event loop, paged LISTs, watch streams) with the calls of each kind of
object mixed in: any registered kind by its API coordinates (``async_kinds``: read, list, watch, children,
delete unless finished), what only Jobs have (``async_jobs``: parallelism, pods and Events) and Kueue's
Workloads and visibility API (``async_workloads``). Importing it is cheap: the client libraries are
imported by the first session, in a worker thread (see ``async_client``).
"""

from __future__ import annotations

from .async_client import (
    LIST_PAGE_SIZE,
    MANAGED_BY_SELECTOR,
    api_status,
    is_connection_error,
    load_clients,
)
from .async_jobs import AsyncJobCalls
from .async_kinds import AsyncKindCalls
from .async_workloads import AsyncWorkloadCalls

__all__ = [
    "LIST_PAGE_SIZE",
    "MANAGED_BY_SELECTOR",
    "AsyncKueueHook",
    "api_status",
    "is_connection_error",
    "load_clients",
]


class AsyncKueueHook(AsyncKindCalls, AsyncJobCalls, AsyncWorkloadCalls):
    """One ``kubernetes_asyncio`` client over the cncf ``kubernetes`` connection (see :meth:`session`)."""
