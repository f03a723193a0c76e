"""The UI's shared Events: pages read from a namespace's feed once it has listed, a LIST otherwise; the
feed follows the WATCH; each bound holds and past it only that namespace reads with LISTs again."""

from __future__ import annotations

import queue
import time
from collections.abc import Iterable, Iterator
from typing import Any

import pytest

from airflow_kueue_provider.watch import event_index
from airflow_kueue_provider.watch.event_index import EventIndex

END = {"type": "END"}


def event(uid: str, owner: str, reason: str = "QuotaReserved", kind: str = "Workload") -> dict[str, Any]:
    return {
        "metadata": {"uid": uid, "name": f"e-{uid}", "resourceVersion": "1"},
        "involvedObject": {"kind": kind, "name": f"obj-{owner}", "uid": owner},
        "reason": reason,
        "message": "m",
        "lastTimestamp": "2026-12-06T01:00:00Z",
        "annotations": {"not": "kept"},
    }


class Source:
    kubernetes_conn_id = "test"

    def __init__(self, items: list[dict[str, Any]]) -> None:
        self.items = items
        self.changes: queue.Queue[dict[str, Any]] = queue.Queue()
        self.sent = 0
        self.asked = 0  # the feed asks for the next change once it has taken the one before
        self.lists = 0
        self.selectors: list[tuple[str, tuple[str, ...]]] = []
        self.fail_next_list = False

    def put(self, change: dict[str, Any]) -> None:
        self.sent += 1
        self.changes.put(change)

    def events_of(self, namespace: str, kind: str, name: str) -> list[dict[str, Any]]:
        return [e for e in self.items if e["involvedObject"]["name"] == name]

    def kind_events(
        self, namespace: str, kind: str, skip_reasons: Iterable[str] = (), limit: int | None = None
    ) -> tuple[list[dict[str, Any]], str, bool]:
        self.selectors.append((kind, tuple(skip_reasons)))
        self.lists += 1
        if self.fail_next_list:
            self.fail_next_list = False
            raise ConnectionError("refused")
        more = limit is not None and len(self.items) > limit
        return list(self.items)[:limit], "1", more

    def watch_kind_events(
        self, namespace: str, kind: str, resource_version: str, seconds: int, skip_reasons: Iterable[str] = ()
    ) -> Iterator[dict[str, Any]]:
        while True:
            self.asked += 1
            change = self.changes.get(timeout=10)
            if change is END:
                return
            if change["type"] == "BREAK":
                raise ConnectionError("reset by peer")
            yield change


def until(check: Any, seconds: float = 5.0) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, "not in time"
        time.sleep(0.01)


def current(index: EventIndex, source: Source) -> bool:
    feed = index._feeds.get((source.kubernetes_conn_id, "ns", "Workload"))
    return feed is not None and feed.synced


def settled(source: Source) -> None:
    """The feed has taken every change sent so far."""
    until(lambda: source.asked > source.sent)


@pytest.fixture
def index() -> Iterator[EventIndex]:
    """An index whose feed threads end with the test: its clock jumps past their idle time at teardown (a
    thread left retrying logged into a later test's capture)."""
    skew = [0.0]
    yield EventIndex(
        skip_reasons=["SuccessfulCreate"],
        clock=lambda: time.monotonic() + skew[0],
        sleep=lambda s: time.sleep(0.01),
    )
    skew[0] = 1e9


def test_pages_read_the_feed_once_it_has_listed_and_a_list_before(index: EventIndex) -> None:
    source = Source([event("a", "wl-1"), event("b", "wl-2")])
    assert [e["reason"] for e in index.events_of(source, "ns", "Workload", "obj-wl-1", "wl-1")] == [
        "QuotaReserved"
    ]
    assert index.lists == 1, "the feed had not listed yet"
    until(lambda: current(index, source))
    got = index.events_of(source, "ns", "Workload", "obj-wl-1", "wl-1")
    assert got == [
        {
            "reason": "QuotaReserved",
            "message": "m",
            "lastTimestamp": "2026-12-06T01:00:00Z",
            "involvedObject": {"kind": "Workload"},
        }
    ], "only what the timeline reads"
    assert source.selectors == [("Workload", ("SuccessfulCreate",))], "the apiserver leaves the noise out"
    source.put(END)


def test_the_feed_follows_added_changed_and_deleted_events(index: EventIndex) -> None:
    source = Source([event("a", "wl-1")])
    index.events_of(source, "ns", "Workload", "obj-wl-1", "wl-1")
    until(lambda: current(index, source))
    source.put({"type": "ADDED", "object": event("b", "wl-1", reason="Admitted")})
    source.put({"type": "MODIFIED", "object": event("a", "wl-1", reason="Pending")})
    source.put({"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "9"}}})
    settled(source)
    reasons = [e["reason"] for e in index.events_of(source, "ns", "Workload", "obj-wl-1", "wl-1")]
    assert reasons == ["Pending", "Admitted"]
    source.put({"type": "DELETED", "object": event("a", "wl-1")})
    settled(source)
    assert [e["reason"] for e in index.events_of(source, "ns", "Workload", "obj-wl-1", "wl-1")] == [
        "Admitted"
    ]
    assert index.lists == 1
    source.put(END)


def test_another_objects_events_of_the_same_name_are_not_shown(index: EventIndex) -> None:
    """Bound by uid, not by name: a Job of that name before (or a namesake's Events) is not this one's."""
    old = event("a", "old-uid") | {"involvedObject": {"kind": "Workload", "name": "obj-wl", "uid": "old-uid"}}
    new = event("b", "new-uid") | {"involvedObject": {"kind": "Workload", "name": "obj-wl", "uid": "new-uid"}}
    source = Source([old, new])
    assert len(index.events_of(source, "ns", "Workload", "obj-wl", "new-uid")) == 1, "the LIST, filtered"
    until(lambda: current(index, source))
    assert len(index.events_of(source, "ns", "Workload", "obj-wl", "new-uid")) == 1, "the feed"
    source.put(END)


def test_a_broken_watch_sends_pages_to_a_list_until_the_feed_has_listed_again(index: EventIndex) -> None:
    source = Source([event("a", "wl-1")])
    index.events_of(source, "ns", "Workload", "obj-wl-1", "wl-1")
    until(lambda: current(index, source))
    lists = index.lists
    source.fail_next_list = True
    source.put({"type": "BREAK"})
    until(lambda: source.lists >= 3 and current(index, source))  # the failed LIST, then one that worked
    index.events_of(source, "ns", "Workload", "obj-wl-1", "wl-1")
    assert index.lists == lists, "current again"
    source.put({"type": "ERROR", "object": {"code": 410, "message": "too old resource version"}})
    until(lambda: source.lists >= 4)
    source.put(END)


def test_a_namespace_past_its_bound_reads_with_lists_and_the_others_keep_their_feed(
    index: EventIndex, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(event_index, "MAX_PER_FEED", 3)
    flooded = Source([event(str(k), f"wl-{k}") for k in range(3)])
    calm = Source([event("c", "wl-c")])
    calm.kubernetes_conn_id = "other"
    index.events_of(flooded, "ns", "Workload", "obj-wl-1", "wl-1")
    index.events_of(calm, "ns", "Workload", "obj-wl-c", "wl-c")
    until(lambda: current(index, flooded) and current(index, calm))
    flooded.put({"type": "ADDED", "object": event("x", "wl-x")})  # the fourth
    until(lambda: ("test", "ns", "Workload") in index._over_until)
    lists = index.lists
    assert index.events_of(flooded, "ns", "Workload", "obj-wl-1", "wl-1")
    assert index.lists == lists + 1, "the flooded namespace reads with a LIST"
    assert flooded.lists == 1, "and its feed does not list the flood again"
    index.events_of(calm, "ns", "Workload", "obj-wl-c", "wl-c")
    assert index.lists == lists + 1, "the other one still reads its feed"
    calm.put(END)


def test_a_namespace_flooded_before_its_first_list_is_not_read_whole(
    index: EventIndex, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(event_index, "MAX_PER_FEED", 3)
    flooded = Source([event(str(k), f"wl-{k}") for k in range(10)])
    index.events_of(flooded, "ns", "Workload", "obj-wl-1", "wl-1")
    until(lambda: ("test", "ns", "Workload") in index._over_until)
    assert flooded.lists == 1 and not index.current("test", "ns", "Workload")


def test_an_object_keeps_its_newest_events_up_to_its_bound(
    index: EventIndex, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(event_index, "MAX_PER_OBJECT", 2)
    source = Source([event(str(k), "wl-1", reason=f"R{k}") for k in range(4)])
    index.events_of(source, "ns", "Workload", "obj-wl-1", "wl-1")
    until(lambda: current(index, source))
    assert [e["reason"] for e in index.events_of(source, "ns", "Workload", "obj-wl-1", "wl-1")] == [
        "R2",
        "R3",
    ]
    source.put(END)


def test_feeds_past_their_bound_leave_the_pages_to_lists(index: EventIndex) -> None:
    index._max_feeds = 1  # the fixture's index, whose feed threads end with the test
    first, second = Source([]), Source([])
    second.kubernetes_conn_id = "second"
    index.events_of(first, "ns", "Workload", "n", "u")
    until(lambda: current(index, first))
    index.events_of(second, "ns", "Workload", "n", "u")
    time.sleep(0.05)
    assert second.lists == 0, "no second feed"
    first.put(END)
