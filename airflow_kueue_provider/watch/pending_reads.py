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
from collections.abc import Awaitable, Callable
from typing import Any

SHARE_SECONDS = 30.0  # a position at most this old: a follower asks every 30 s at most (eta_tracking)
MAX_QUEUES = 64  # LocalQueues remembered per hub (a namespace has a few); the oldest goes first

PendingList = dict[str, Any] | None  # the visibility API's answer; None where it is not served


class SharedPendingReads:
    def __init__(self, share_seconds: float = SHARE_SECONDS, max_queues: int = MAX_QUEUES) -> None:
        self._share = share_seconds
        self._max = max_queues
        self._newest: OrderedDict[str, tuple[float, PendingList]] = OrderedDict()
        self._in_flight: dict[str, asyncio.Task[PendingList]] = {}
        self.reads = 0  # reads actually sent, for tests and diagnostics

    async def get(self, local_queue: str, read: Callable[[], Awaitable[PendingList]]) -> PendingList:
        """The LocalQueue's pending list, read now or shared from a read at most ``share_seconds`` old."""
        kept = self._newest.get(local_queue)
        if kept is not None and time.monotonic() - kept[0] < self._share:
            return kept[1]
        task = self._in_flight.get(local_queue)
        if task is None:
            task = asyncio.ensure_future(self._read(local_queue, read))
            self._in_flight[local_queue] = task
        # shielded: a follower cancelled while waiting does not cancel the read the others wait for
        return await asyncio.shield(task)

    async def _read(self, local_queue: str, read: Callable[[], Awaitable[PendingList]]) -> PendingList:
        try:
            self.reads += 1
            pending = await read()
            self._newest[local_queue] = (time.monotonic(), pending)
            self._newest.move_to_end(local_queue)
            while len(self._newest) > self._max:
                self._newest.popitem(last=False)
            return pending
        finally:
            self._in_flight.pop(local_queue, None)
