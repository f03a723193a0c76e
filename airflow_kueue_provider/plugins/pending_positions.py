"""A queued Job's place in its LocalQueue for every page of the API server, from one read per queue.

The Kueue tab of a queued task reads the LocalQueue's whole pending list (Kueue's visibility API) to say
"3rd of 40". On a night with 100 Jobs queued in one LocalQueue, each view of any of their tabs read that same
list again. The API server keeps the newest list per LocalQueue for ``SHARE_SECONDS`` (the position is
coarser than that anyway), and a page that asks while a read is under way waits for that read. At most
``MAX_QUEUES`` lists are kept; the oldest goes first.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from typing import Any, Protocol

from ..hooks.kueue_api import position_of

SHARE_SECONDS = 30.0  # as the triggers' (watch.pending_reads): a position is coarser than that
MAX_QUEUES = 64

PendingList = dict[str, Any] | None


class PendingReader(Protocol):
    kubernetes_conn_id: str

    def pending_workloads(self, namespace: str, local_queue: str) -> PendingList: ...


class SharedPendingLists:
    """Thread-safe: the UI's routes run in the API server's thread pool."""

    def __init__(self, share_seconds: float = SHARE_SECONDS, max_queues: int = MAX_QUEUES) -> None:
        self._share, self._max = share_seconds, max_queues
        self._lock = threading.Lock()
        self._newest: OrderedDict[tuple[str, str, str], tuple[float, PendingList]] = OrderedDict()
        self._reading: dict[tuple[str, str, str], threading.Lock] = {}
        self.reads = 0  # reads actually sent, for tests

    def position(
        self, reader: PendingReader, namespace: str, local_queue: str, workload_name: str
    ) -> tuple[int, int] | None:
        """(place, of how many) of ``workload_name``, from a list at most ``share_seconds`` old."""
        pending = self.pending(reader, namespace, local_queue)
        return None if pending is None else position_of(pending, workload_name)

    def pending(self, reader: PendingReader, namespace: str, local_queue: str) -> PendingList:
        key = (reader.kubernetes_conn_id, namespace, local_queue)
        if (kept := self._fresh(key)) is not None:
            return kept[1]
        with self._lock:
            reading = self._reading.setdefault(key, threading.Lock())
        with reading:  # one read per queue at a time; who waited takes what it read
            if (kept := self._fresh(key)) is not None:
                return kept[1]
            self.reads += 1
            pending = reader.pending_workloads(namespace, local_queue)
            with self._lock:
                self._newest[key] = (time.monotonic(), pending)
                self._newest.move_to_end(key)
                while len(self._newest) > self._max:
                    old, _ = self._newest.popitem(last=False)
                    self._reading.pop(old, None)
            return pending

    def _fresh(self, key: tuple[str, str, str]) -> tuple[float, PendingList] | None:
        with self._lock:
            kept = self._newest.get(key)
        if kept is not None and time.monotonic() - kept[0] < self._share:
            return kept
        return None


SHARED = SharedPendingLists()
"""The API server process's one instance."""
