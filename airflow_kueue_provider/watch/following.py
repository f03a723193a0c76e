"""A trigger's handle on the shared watch: the newest snapshot of its object (of any registered kind) after
each change, and one-off reads (the Workload's queue position, a fresh GET before a decision, the pods of a
stuck Job)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, Protocol, TypeVar

from ..hooks.cluster_target import ClusterTarget
from ..hooks.kueue_api import position_of
from ..hooks.kueue_async_hook import AsyncKueueHook, is_connection_error
from ..kueue.kinds import KindDescription
from .cache import _Follower
from .pending_reads import SharedPendingReads
from .snapshots import KindSnapshot, read_snapshot

T = TypeVar("T")


class Hub(Protocol):
    """What a handle reads of the shared hub (``NamespaceWatch``), so this module does not import it."""

    target: ClusterTarget
    namespace: str
    synced: asyncio.Event
    error: BaseException | None
    kind_errors: dict[str, BaseException]
    hook: AsyncKueueHook | None
    pending_reads: SharedPendingReads

    def snapshot(self, kind: KindDescription, name: str) -> KindSnapshot: ...


class Following:
    """A follower's view of one object (its child Jobs and Workload too) through the shared hub; the UI's
    queue page follows ``ANY_JOB`` and only waits on it (``next``)."""

    def __init__(self, hub: Hub, follower: _Follower, kind: KindDescription) -> None:
        self._hub = hub
        self._follower = follower
        self.kind = kind
        self._first = True

    @property
    def name(self) -> str:
        return self._follower.key[len(self.kind.follower_prefix) :]

    def _snapshot(self) -> KindSnapshot:
        if (error := self._hub.kind_errors.get(self.kind.api.plural)) is not None:
            raise error
        return self._hub.snapshot(self.kind, self.name)

    async def next(self) -> KindSnapshot:
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

    def current(self) -> KindSnapshot:
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

    def position_read_at(self, local_queue: str) -> float:
        """When the list the last ``pending_position`` of ``local_queue`` came from was read (epoch seconds):
        the moment that position held."""
        return self._hub.pending_reads.read_at(local_queue)

    async def confirm(self) -> KindSnapshot:
        """The object, its child Jobs and its Workload read from the apiserver now, not from the shared
        cache: asked before a decision that deletes it or ends the task, since a cache can lag or miss an
        event."""
        ns, name, kind = self._hub.namespace, self.name, self.kind
        return await self._read(lambda hook: read_snapshot(hook, kind, ns, name))

    async def pods_and_events(
        self, job_name: str | None = None
    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """A Job's pods (or, with none, its Events), read now: asked only when pods seem stuck. The followed
        Job's, or the named child Job's."""
        ns, name = self._hub.namespace, job_name or self.name
        return await self._read(lambda hook: hook.pods_and_events_of_job(ns, name))

    async def set_parallelism(self, parallelism: int) -> None:
        """Raise the followed Job's parallelism (the ramp capability)."""
        ns, name = self._hub.namespace, self.name
        await self._read(lambda hook: hook.set_parallelism(ns, name, parallelism))
