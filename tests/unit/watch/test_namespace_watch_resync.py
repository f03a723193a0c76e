"""A periodic LIST wakes only the followers whose Job or Workload changed (1,000 followers share a hub), runs
beside the open watch, and ends its round only when the watch does not deliver what the LIST shows."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import pytest

from airflow_kueue_provider.watch import namespace_watch, watch_rounds
from airflow_kueue_provider.watch.cache import _Follower
from airflow_kueue_provider.watch.namespace_watch import NamespaceWatch


class RoundsOver(Exception):
    pass


def job(name: str, version: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "uid": f"uid-{name}", "resourceVersion": version}}


def workload(job_name: str, version: str) -> dict[str, Any]:
    return {
        "metadata": {
            "name": f"wl-{job_name}",
            "uid": f"wl-uid-{job_name}",
            "resourceVersion": version,
            "labels": {"kueue.x-k8s.io/job-uid": f"uid-{job_name}"},
            "ownerReferences": [{"uid": f"uid-{job_name}", "controller": True}],
        }
    }


async def no_events() -> AsyncIterator[tuple[str, dict[str, Any]]]:
    return
    yield  # an async generator that ends at once: the watch round is over


def woken_by_lists(kind: str, lists: list[list[dict[str, Any]]], names: list[str]) -> list[set[str]]:
    """Run the hub's LIST+WATCH loop over ``lists`` (each watch round ends at once); after each LIST, the
    names of the followers it woke."""
    hub = NamespaceWatch("kubernetes_default", "ns")
    followers = {name: _Follower(f"jobs/{name}") for name in names}
    hub.followers = {f.key: {f} for f in followers.values()}
    hub._names_by_uid = {"jobs": {f"uid-{name}": name for name in names}}
    pending = iter(lists)
    woken: list[set[str]] = []

    async def list_fn(namespace: str, **_: Any) -> tuple[list[dict[str, Any]], str]:
        try:
            return next(pending), "100"
        except StopIteration:
            raise RoundsOver from None

    def watch_fn(*args: Any) -> AsyncIterator[tuple[str, dict[str, Any]]]:
        woken.append({name for name, f in followers.items() if f.changed.is_set()})
        for f in followers.values():
            f.changed.clear()
        return no_events()

    apply = functools.partial(hub._apply, "jobs") if kind == "jobs" else hub._apply_workload
    with pytest.raises(RoundsOver):
        asyncio.run(hub._list_and_watch_rounds(kind, list_fn, watch_fn, apply))
    return woken


def test_a_resync_wakes_only_the_followers_whose_job_changed() -> None:
    first = [job(f"j{i}", "1") for i in range(1000)]
    second = [job("j7", "2")] + [j for j in first if j["metadata"]["name"] not in ("j7", "j9")]
    woken = woken_by_lists("jobs", [first, first, second], [f"j{i}" for i in range(1000)])
    assert len(woken[0]) == 1000  # the first LIST: every Job is news
    assert woken[1] == set()  # nothing changed
    assert woken[2] == {"j7", "j9"}  # j7 changed, j9 is gone


def test_a_resync_wakes_the_follower_whose_workload_changed() -> None:
    names = ["a", "b"]
    first = [workload("a", "1"), workload("b", "1")]
    woken = woken_by_lists("workloads", [first, [workload("a", "1"), workload("b", "5")]], names)
    assert woken[0] == {"a", "b"}
    assert woken[1] == {"b"}


def test_the_cache_keeps_no_managed_fields_and_no_pod_templates() -> None:
    hub = NamespaceWatch("kubernetes_default", "ns")
    big = job("a", "1") | {"spec": {"completions": 3, "template": {"spec": {"containers": [{}]}}}}
    big["metadata"]["managedFields"] = [{"manager": "kube-controller-manager"}]
    hub._replace("jobs", [big])
    wl = workload("a", "1") | {"spec": {"podSets": [{"name": "main", "count": 3, "template": {"spec": {}}}]}}
    wl["metadata"]["managedFields"] = [{"manager": "kueue"}]
    hub._apply_workload("ADDED", wl)
    assert (
        hub.slot("jobs")["a"]["spec"] == {"completions": 3}
        and "managedFields" not in hub.slot("jobs")["a"]["metadata"]
    )
    kept = hub.workloads["uid-a"]
    assert (
        kept["spec"]["podSets"] == [{"name": "main", "count": 3}] and "managedFields" not in kept["metadata"]
    )


class OpenWatch:
    """A watch that stays open until the test ends it; ``deliver`` sends one event on it."""

    def __init__(self) -> None:
        self.opened = 0
        self.queue: asyncio.Queue[tuple[str, dict[str, Any]] | None] = asyncio.Queue()

    def __call__(self, *args: Any) -> AsyncIterator[tuple[str, dict[str, Any]]]:
        self.opened += 1
        return self._events()

    async def _events(self) -> AsyncIterator[tuple[str, dict[str, Any]]]:
        while (event := await self.queue.get()) is not None:
            yield event


async def rounds_with(
    monkeypatch: pytest.MonkeyPatch, lists: list[Any], scenario: Any
) -> tuple[NamespaceWatch, OpenWatch]:
    """Run the hub's Jobs loop with LISTs answering ``lists`` in turn (the last one from then on; a callable
    is awaited with the watch for its items), a periodic LIST every 0.05 s and a lag grace of 2 s (a busy
    machine), while ``scenario(hub, watch, list_count)`` runs."""
    monkeypatch.setattr(watch_rounds, "RESYNC_SECONDS", 0.05)
    monkeypatch.setattr(watch_rounds, "LAG_GRACE_SECONDS", 2.0)
    hub, watch, answered = NamespaceWatch("kubernetes_default", "ns"), OpenWatch(), [0]

    async def list_fn(namespace: str, **_: Any) -> tuple[list[dict[str, Any]], str]:
        answered[0] += 1
        answer = lists[min(answered[0], len(lists)) - 1]
        items = await answer(watch) if callable(answer) else answer
        return [dict(o, metadata=dict(o["metadata"])) for o in items], "9"

    loop = asyncio.create_task(
        hub._list_and_watch_rounds("jobs", list_fn, watch, functools.partial(hub._apply, "jobs"))
    )
    try:
        await scenario(hub, watch, answered)
    finally:
        loop.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await loop
    return hub, watch


async def until(condition: Any, seconds: float = 30.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.01)


def test_a_periodic_list_that_agrees_with_the_watch_leaves_it_open(monkeypatch: pytest.MonkeyPatch) -> None:
    async def scenario(hub: NamespaceWatch, watch: OpenWatch, answered: list[int]) -> None:
        await until(lambda: answered[0] >= 6)

    hub, watch = asyncio.run(rounds_with(monkeypatch, [[job("a", "1")]], scenario))
    assert watch.opened == 1, "one WATCH for six LISTs"
    assert hub.lists >= 5


def test_a_change_on_its_way_on_the_watch_is_not_lag(monkeypatch: pytest.MonkeyPatch) -> None:
    """The LIST shows a newer Job than the cache; the watch delivers it within the grace: same round."""

    async def scenario(hub: NamespaceWatch, watch: OpenWatch, answered: list[int]) -> None:
        await until(lambda: answered[0] >= 2)  # a periodic LIST saw "a" at 2
        await watch.queue.put(("MODIFIED", job("a", "2")))
        await until(lambda: answered[0] >= 8)

    hub, watch = asyncio.run(rounds_with(monkeypatch, [[job("a", "1")], [job("a", "2")]], scenario))
    assert watch.opened == 1 and hub.slot("jobs")["a"]["metadata"]["resourceVersion"] == "2"


def test_an_object_the_watch_changed_after_the_list_was_sent_is_the_watchs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The watch delivers "a" at 2 while a periodic LIST is in flight, and the LIST, read before, still
    shows 1: the cache keeps 2, and the watch is not called lagging."""
    delivered = asyncio.Event()

    async def in_flight(watch: OpenWatch) -> list[dict[str, Any]]:
        await watch.queue.put(("MODIFIED", job("a", "2")))
        await until(lambda: delivered.is_set())
        return [job("a", "1")]

    async def scenario(hub: NamespaceWatch, watch: OpenWatch, answered: list[int]) -> None:
        await until(lambda: hub.slot("jobs").get("a", {}).get("metadata", {}).get("resourceVersion") == "2")
        delivered.set()
        await until(lambda: answered[0] >= 6)

    hub, watch = asyncio.run(
        rounds_with(monkeypatch, [[job("a", "1")], in_flight, [job("a", "2")]], scenario)
    )
    assert watch.opened == 1 and hub.slot("jobs")["a"]["metadata"]["resourceVersion"] == "2"


def test_a_difference_the_watch_never_delivers_ends_the_round(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The apiserver's watch cache stopped following etcd: the Job finished (the LIST shows it), the watch
    stays silent. After the grace the hub lists and watches anew, and the follower of the Job wakes."""
    follower = _Follower("jobs/a")

    async def scenario(hub: NamespaceWatch, watch: OpenWatch, answered: list[int]) -> None:
        hub.followers = {follower.key: {follower}}
        await until(lambda: watch.opened == 2)

    with caplog.at_level("WARNING", logger=namespace_watch.__name__):
        hub, _ = asyncio.run(rounds_with(monkeypatch, [[job("a", "1")], [job("a", "2")]], scenario))
    assert hub.slot("jobs")["a"]["metadata"]["resourceVersion"] == "2" and follower.changed.is_set()
    assert "change(s) the watch had not delivered" in caplog.text


def written_now(name: str, version: str) -> dict[str, Any]:
    """A Job as the watch delivers it right after the write: its managedFields time is now (to the
    microsecond: the apiserver writes whole seconds, the test's period is 0.05 s)."""
    obj = job(name, version)
    stamp = datetime.now(UTC).isoformat()
    obj["metadata"]["managedFields"] = [{"manager": "kube-controller-manager", "time": stamp}]
    return obj


def test_no_periodic_list_while_the_watch_delivers_fresh_writes(monkeypatch: pytest.MonkeyPatch) -> None:
    """A busy namespace: every event is of a write made moments before, so the watch is current and the
    periodic LIST is not sent; once the events stop, it is sent again."""

    async def scenario(hub: NamespaceWatch, watch: OpenWatch, answered: list[int]) -> None:
        monkeypatch.setattr(watch_rounds, "RESYNC_SECONDS", 0.3)  # a stall of 0.3 s would be a LIST
        for _ in range(150):  # 1.5 s: five periods
            await watch.queue.put(("MODIFIED", written_now("a", "1")))
            await asyncio.sleep(0.01)
        busy_lists = answered[0]
        await until(lambda: answered[0] >= busy_lists + 3)  # quiet: the LISTs come back
        scenario.busy_lists = busy_lists  # type: ignore[attr-defined]

    _, watch = asyncio.run(rounds_with(monkeypatch, [[job("a", "1")]], scenario))
    busy_lists = scenario.busy_lists  # type: ignore[attr-defined]
    assert busy_lists <= 2, "at most the round's LIST and one due before the first event"
    assert watch.opened == 1


def test_late_events_do_not_stand_in_for_the_list(monkeypatch: pytest.MonkeyPatch) -> None:
    """Events of writes an hour old (a watch cache far behind) are no evidence of a current watch."""

    def written_long_ago(name: str, version: str) -> dict[str, Any]:
        obj = job(name, version)
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - 3600))
        obj["metadata"]["managedFields"] = [{"manager": "kube-controller-manager", "time": stamp}]
        return obj

    async def scenario(hub: NamespaceWatch, watch: OpenWatch, answered: list[int]) -> None:
        for _ in range(40):  # the LIST agrees with them: no lag, only no evidence
            await watch.queue.put(("MODIFIED", written_long_ago("a", "1")))
            await asyncio.sleep(0.01)
        scenario.lists = answered[0]  # type: ignore[attr-defined]

    asyncio.run(rounds_with(monkeypatch, [[job("a", "1")]], scenario))
    assert scenario.lists >= 4, "the periodic LIST went on every 0.05 s"  # type: ignore[attr-defined]


def test_a_round_the_server_ends_on_time_goes_on_from_its_version(monkeypatch: pytest.MonkeyPatch) -> None:
    """As client-go's reflector: the next WATCH starts at the last resourceVersion delivered (a bookmark's),
    with no LIST; a round that ends early without delivering anything lists again."""
    monkeypatch.setattr(watch_rounds, "WATCH_ROUND_SECONDS", 0.0)  # every round ends "on time"
    hub, started_at, lists = NamespaceWatch("kubernetes_default", "ns"), [], [0]

    async def list_fn(namespace: str, **_: Any) -> tuple[list[dict[str, Any]], str]:
        lists[0] += 1
        if lists[0] > 2:
            raise RoundsOver
        return [job("a", "1")], "9"

    async def one_bookmark(version: str) -> AsyncIterator[tuple[str, dict[str, Any]]]:
        if int(version) < 12:  # three rounds with a bookmark each, then one that delivers nothing
            yield "BOOKMARK", {"metadata": {"resourceVersion": str(int(version) + 1)}}

    def watch_fn(namespace: str, version: str, *args: Any) -> AsyncIterator[tuple[str, dict[str, Any]]]:
        started_at.append(version)
        return one_bookmark(version)

    with pytest.raises(RoundsOver):
        apply = functools.partial(hub._apply, "jobs")
        asyncio.run(hub._list_and_watch_rounds("jobs", list_fn, watch_fn, apply))
    assert started_at[:4] == ["9", "10", "11", "12"], "each round from the previous one's bookmark"
    assert lists[0] == 3 and started_at[4] == "9", "the empty round: a LIST, and a watch from its version"
