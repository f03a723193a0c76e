"""One read of a LocalQueue's pending Workloads (Kueue's visibility API) for every follower that asks.

Each queued trigger asks for its position (eta_tracking: after 10 s of queueing, then every 30 s and more);
on a night of 145 Jobs queued for minutes in one LocalQueue, those reads were most of the triggerers'
apiserver requests, every one of them the same list. A hub keeps the newest list per LocalQueue for
``SHARE_SECONDS``, and followers that ask while a read is in flight wait for that one.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Hashable
from typing import Any, Generic, TypeVar

SHARE_SECONDS = 30.0  # a position at most this old on a page of the UI (plugins.pending_positions)
TRIGGER_SHARE_SECONDS = 60.0
"""A position at most this old for a trigger: it feeds a progress line and the admission pace, which the
followers record at the list's read time (``read_at``), so a shared list does not bend the pace. Each
triggerer reads each LocalQueue's list at most once a minute, however many Jobs wait in it."""
MAX_QUEUES = 64  # LocalQueues remembered per hub (a namespace has a few); the oldest goes first

PendingList = dict[str, Any] | None  # the visibility API's answer; None where it is not served
K = TypeVar("K", bound=Hashable)


class RecentLists(Generic[K]):
    """Each LocalQueue's newest pending list while it is at most ``share_seconds`` old; at most ``max_queues``
    are kept, the oldest goes first. No locking: the triggers' hub uses it from one event loop, the UI's
    ``plugins.pending_positions`` under its own lock."""

    def __init__(self, share_seconds: float, max_queues: int) -> None:
        self._share, self._max = share_seconds, max_queues
        self._newest: OrderedDict[K, tuple[float, float, PendingList]] = OrderedDict()

    def fresh(self, key: K) -> tuple[bool, PendingList]:
        """(whether a fresh list is kept, that list): a kept list may be None (the API is not served)."""
        kept = self._newest.get(key)
        if kept is not None and time.monotonic() - kept[0] < self._share:
            return True, kept[2]
        return False, None

    def read_at(self, key: K) -> float | None:
        """When the kept list of ``key`` was read (epoch seconds), if one is kept."""
        kept = self._newest.get(key)
        return None if kept is None else kept[1]

    def keep(self, key: K, pending: PendingList) -> None:
        self._newest[key] = (time.monotonic(), time.time(), pending)
        self._newest.move_to_end(key)
        while len(self._newest) > self._max:
            self._newest.popitem(last=False)

    def __contains__(self, key: object) -> bool:
        return key in self._newest

    def __len__(self) -> int:
        return len(self._newest)


class SharedPendingReads:
    def __init__(self, share_seconds: float = TRIGGER_SHARE_SECONDS, max_queues: int = MAX_QUEUES) -> None:
        self._newest: RecentLists[str] = RecentLists(share_seconds, max_queues)
        self._in_flight: dict[str, asyncio.Task[PendingList]] = {}
        self.reads = 0  # reads actually sent, for tests and diagnostics

    async def get(self, local_queue: str, read: Callable[[], Awaitable[PendingList]]) -> PendingList:
        """The LocalQueue's pending list, read now or shared from a read at most ``share_seconds`` old."""
        found, pending = self._newest.fresh(local_queue)
        if found:
            return pending
        task = self._in_flight.get(local_queue)
        if task is None:
            task = asyncio.ensure_future(self._read(local_queue, read))
            self._in_flight[local_queue] = task
        # shielded: a follower cancelled while waiting does not cancel the read the others wait for
        return await asyncio.shield(task)

    def read_at(self, local_queue: str) -> float:
        """When the list last served for ``local_queue`` was read (epoch seconds; now if none is kept)."""
        read_at = self._newest.read_at(local_queue)
        return time.time() if read_at is None else read_at

    async def _read(self, local_queue: str, read: Callable[[], Awaitable[PendingList]]) -> PendingList:
        try:
            self.reads += 1
            pending = await read()
            self._newest.keep(local_queue, pending)
            return pending
        finally:
            self._in_flight.pop(local_queue, None)
