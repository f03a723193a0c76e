"""A queued Job's place in its LocalQueue for every page of the API server, from one read per queue.

The Kueue tab of a queued task reads the LocalQueue's whole pending list (Kueue's visibility API) to say
"3rd of 40". On a night with 100 Jobs queued in one LocalQueue, each view of any of their tabs read that same
list again. The API server keeps the newest list per LocalQueue for ``SHARE_SECONDS`` (the position is
coarser than that anyway), and a page that asks while a read is under way waits for that read. At most
``MAX_QUEUES`` lists are kept; the oldest goes first.
"""

from __future__ import annotations

import threading
from typing import Protocol

from ..hooks.kueue_api import position_of
from ..watch.pending_reads import SHARE_SECONDS, PendingList, RecentLists

MAX_QUEUES = 64

Key = tuple[str, str, str]  # (connection, namespace, LocalQueue)


class PendingReader(Protocol):
    kubernetes_conn_id: str

    def pending_workloads(self, namespace: str, local_queue: str) -> PendingList: ...


class SharedPendingLists:
    """Thread-safe: the UI's routes run in the API server's thread pool. The lists are the triggers' kind of
    store (``watch.pending_reads.RecentLists``); a lock per queue being read makes the pages that ask at once
    wait for one read, and goes with that read."""

    def __init__(self, share_seconds: float = SHARE_SECONDS, max_queues: int = MAX_QUEUES) -> None:
        self._lock = threading.Lock()
        self._newest: RecentLists[Key] = RecentLists(share_seconds, max_queues)
        self._reading: dict[Key, tuple[threading.Lock, int]] = {}  # the lock, and how many hold or wait
        self.reads = 0  # reads actually sent, for tests

    def position(
        self, reader: PendingReader, namespace: str, local_queue: str, workload_name: str
    ) -> tuple[int, int] | None:
        """(place, of how many) of ``workload_name``, from a list at most ``share_seconds`` old."""
        pending = self.pending(reader, namespace, local_queue)
        return None if pending is None else position_of(pending, workload_name)

    def pending(self, reader: PendingReader, namespace: str, local_queue: str) -> PendingList:
        key = (reader.kubernetes_conn_id, namespace, local_queue)
        with self._lock:
            found, pending = self._newest.fresh(key)
            if found:
                return pending
            reading, users = self._reading.get(key) or (threading.Lock(), 0)
            self._reading[key] = (reading, users + 1)
        try:
            with reading:  # one read per queue at a time; who waited takes what it read
                with self._lock:
                    found, pending = self._newest.fresh(key)
                if found:
                    return pending
                self.reads += 1
                pending = reader.pending_workloads(namespace, local_queue)
                with self._lock:
                    self._newest.keep(key, pending)
                return pending
        finally:
            with self._lock:  # the last one out drops the lock: the table holds only queues being read
                lock, users = self._reading[key]
                if users > 1:
                    self._reading[key] = (lock, users - 1)
                else:
                    del self._reading[key]


SHARED = SharedPendingLists()
"""The API server process's one instance."""
