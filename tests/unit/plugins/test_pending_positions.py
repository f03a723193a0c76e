"""The UI's shared pending lists: one read per LocalQueue per interval for every page, bounded."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from airflow_kueue_provider.plugins.pending_positions import SharedPendingLists


class _Reader:
    kubernetes_conn_id = "kubernetes_default"

    def __init__(self, delay: float = 0.0) -> None:
        self.asked: list[tuple[str, str]] = []
        self.delay = delay

    def pending_workloads(self, namespace: str, local_queue: str) -> dict[str, Any] | None:
        self.asked.append((namespace, local_queue))
        time.sleep(self.delay)
        return {"items": [{"metadata": {"name": f"wl-{i}"}, "positionInLocalQueue": i} for i in range(3)]}


def test_pages_within_the_interval_share_one_read_per_queue() -> None:
    shared, reader = SharedPendingLists(share_seconds=60), _Reader()
    assert shared.position(reader, "ns", "q", "wl-1") == (1, 0)
    assert shared.position(reader, "ns", "q", "wl-2") == (2, 0)
    shared.position(reader, "ns", "other", "wl-0")
    assert reader.asked == [("ns", "q"), ("ns", "other")]


def test_a_list_older_than_the_interval_is_read_again() -> None:
    shared, reader = SharedPendingLists(share_seconds=0.0), _Reader()
    shared.position(reader, "ns", "q", "wl-0")
    shared.position(reader, "ns", "q", "wl-0")
    assert len(reader.asked) == 2


def test_pages_asking_together_wait_for_one_read() -> None:
    shared, reader = SharedPendingLists(share_seconds=60), _Reader(delay=0.2)
    found: list[Any] = []
    threads = [
        threading.Thread(target=lambda: found.append(shared.position(reader, "ns", "q", "wl-0")))
        for _ in range(8)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert reader.asked == [("ns", "q")] and found == [(0, 0)] * 8


def test_at_most_max_queues_lists_are_kept() -> None:
    shared, reader = SharedPendingLists(share_seconds=60, max_queues=2), _Reader()
    for q in ("a", "b", "c", "a"):
        shared.position(reader, "ns", q, "wl-0")
    assert [q for _, q in reader.asked] == ["a", "b", "c", "a"], "a was dropped when c came"
    assert len(shared._newest) == 2


def test_no_lock_outlives_its_read_even_when_the_read_fails() -> None:
    """The per-queue locks are bounded by the reads under way: a page's LocalQueues are many over a night."""

    class Failing(_Reader):
        def pending_workloads(self, namespace: str, local_queue: str) -> dict[str, Any] | None:
            raise ConnectionError("apiserver gone")

    shared = SharedPendingLists(share_seconds=60)
    for q in ("a", "b", "c"):
        shared.position(_Reader(), "ns", q, "wl-0")
        with pytest.raises(ConnectionError):
            shared.position(Failing(), "other", q, "wl-0")
    assert shared._reading == {}
