"""A trigger's handle on the shared watch: the newest snapshot of its Job or JobSet after each change, and
one-off reads (the Workload's queue position, a fresh GET before a decision, the pods of a stuck Job)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, Generic, Protocol, TypeVar

from ..hooks.cluster_target import ClusterTarget
from ..hooks.kueue_api import position_of
from ..hooks.kueue_async_hook import AsyncKueueHook, is_connection_error
from .cache import JOBSET_KEY_PREFIX, _Follower
from .pending_reads import SharedPendingReads
from .snapshots import JobSetSnapshot, JobSnapshot, read_jobset_snapshot, read_snapshot

T = TypeVar("T")
S = TypeVar("S")


class Hub(Protocol):
    """What a handle reads of the shared hub (``NamespaceWatch``), so this module does not import it."""

    target: ClusterTarget
    namespace: str
    synced: asyncio.Event
    error: BaseException | None
    jobsets_error: BaseException | None
    hook: AsyncKueueHook | None
    pending_reads: SharedPendingReads

    def snapshot(self, job_name: str) -> JobSnapshot: ...
    def jobset_snapshot(self, name: str) -> JobSetSnapshot: ...


class _FollowingBase(Generic[S]):
    """A follower's view of its object(s) through the shared hub."""

    def __init__(self, hub: Hub, follower: _Follower) -> None:
        self._hub = hub
        self._follower = follower
        self._first = True

    def _snapshot(self) -> S:
        raise NotImplementedError

    async def next(self) -> S:
        """The current state at first, then the newest state after each change; never a half-resynced
        cache (after a break, the hub lists Jobs and Workloads again before anyone reads)."""
        await self._hub.synced.wait()
        if self._first:
            self._first = False
            self._follower.changed.clear()
        else:
            await self._follower.changed.wait()
            self._follower.changed.clear()
            await self._hub.synced.wait()
        if self._hub.error is not None:
            raise self._hub.error
        return self._snapshot()

    def current(self) -> S:
        """The newest state without waiting for a change."""
        if self._hub.error is not None:
            raise self._hub.error
        return self._snapshot()

    async def _read(self, call: Callable[[AsyncKueueHook], Awaitable[T]]) -> T:
        """A one-off read over the hub's open client while its watch is healthy, else over a client of its
        own (the hub's may be closing after a break)."""
        hook = self._hub.hook
        if hook is not None and self._hub.synced.is_set():
            try:
                return await call(hook)
            except Exception as exc:
                if not is_connection_error(exc):
                    raise
                # the hub's session closed under us: its watch broke just now
        async with AsyncKueueHook(self._hub.target).session() as own:
            return await call(own)

    async def pending_position(self, local_queue: str, workload: str) -> tuple[int, int] | None:
        """The Workload's place in its LocalQueue (Kueue's visibility API), from a read of the LocalQueue's
        pending list that the hub's followers share (``pending_reads``)."""
        ns = self._hub.namespace
        pending = await self._hub.pending_reads.get(
            local_queue, lambda: self._read(lambda hook: hook.pending_workloads(ns, local_queue))
        )
        return None if pending is None else position_of(pending, workload)


class Following(_FollowingBase[JobSnapshot]):
    """A trigger's view of one Job through the shared hub."""

    def _snapshot(self) -> JobSnapshot:
        return self._hub.snapshot(self._follower.job_name)

    async def set_parallelism(self, parallelism: int) -> None:
        ns, name = self._hub.namespace, self._follower.job_name
        await self._read(lambda hook: hook.set_parallelism(ns, name, parallelism))

    async def confirm(self) -> JobSnapshot:
        """The Job and its Workload read from the apiserver now (two GETs), not from the shared cache: asked
        before a decision that deletes the Job or ends the task, since a cache can lag or miss an event."""
        ns, name = self._hub.namespace, self._follower.job_name
        return await self._read(lambda hook: read_snapshot(hook, ns, name))

    async def pods_and_events(self) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """The Job's pods (or, with none, its Events), read now: asked only when pods seem stuck."""
        ns, name = self._hub.namespace, self._follower.job_name
        return await self._read(lambda hook: hook.pods_and_events_of_job(ns, name))


class FollowingJobSet(_FollowingBase[JobSetSnapshot]):
    """A trigger's view of one JobSet (its Jobs and Workload too) through the shared hub."""

    @property
    def name(self) -> str:
        return self._follower.job_name[len(JOBSET_KEY_PREFIX) :]

    def _snapshot(self) -> JobSetSnapshot:
        if self._hub.jobsets_error is not None:
            raise self._hub.jobsets_error
        return self._hub.jobset_snapshot(self.name)

    async def confirm(self) -> JobSetSnapshot:
        """The JobSet, its Jobs and its Workload read from the apiserver now (before a delete or the end)."""
        ns, name = self._hub.namespace, self.name
        return await self._read(lambda hook: read_jobset_snapshot(hook, ns, name))

    async def pods_and_events(self, job_name: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """One child Job's pods (or, with none, its Events), read now: asked only when pods seem stuck."""
        ns = self._hub.namespace
        return await self._read(lambda hook: hook.pods_and_events_of_job(ns, job_name))
