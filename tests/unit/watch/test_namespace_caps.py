"""A namespace that makes the shared watch hold more than ``[kueue] watch_max_objects`` objects of a kind or
``watch_max_mib`` MiB ends only its own followers, with an error that names the namespace, the cap, the count,
the option and the fix; its hub drops the flood, another namespace's followers go on, and a follower that
joins the flooded namespace soon after gets the same error without another LIST."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, ClassVar

import pytest

from airflow_kueue_provider.hooks import kueue_config
from airflow_kueue_provider.watch import caps, following, namespace_watch
from airflow_kueue_provider.watch.caps import NamespaceOverCap, configured_caps
from airflow_kueue_provider.watch.kind_failures import WatchUnavailable
from airflow_kueue_provider.watch.namespace_watch import NamespaceWatch
from tests.unit.watch.kind_dispatch import KindDispatch


def job(name: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "uid": f"uid-{name}", "resourceVersion": "1"},
        "spec": {"completions": 1},
        "status": {},
    }


class FakeHook(KindDispatch):
    listed: ClassVar[dict[str, list[dict[str, Any]]]] = {}  # namespace -> its Jobs
    streamed: ClassVar[dict[str, asyncio.Queue[dict[str, Any]]]] = {}  # namespace -> Jobs the watch sends
    lists: ClassVar[list[str]] = []

    def __init__(self, target: object) -> None:
        pass

    @asynccontextmanager
    async def session(self) -> AsyncIterator[FakeHook]:
        yield self

    async def list_jobs(self, namespace: str, **_: Any) -> tuple[list[dict[str, Any]], str]:
        FakeHook.lists.append(namespace)
        return [dict(j, metadata=dict(j["metadata"])) for j in FakeHook.listed.get(namespace, [])], "1"

    async def list_workloads(self, namespace: str, **_: Any) -> tuple[list[dict[str, Any]], str]:
        return [], "1"

    def watch_jobs(self, namespace: str, *args: Any) -> AsyncIterator[tuple[str, dict[str, Any]]]:
        async def events() -> AsyncIterator[tuple[str, dict[str, Any]]]:
            queue = stream(namespace)
            while True:
                yield "ADDED", await queue.get()

        return events()

    def watch_workloads(self, *args: Any) -> AsyncIterator[tuple[str, dict[str, Any]]]:
        async def events() -> AsyncIterator[tuple[str, dict[str, Any]]]:
            await asyncio.Event().wait()
            yield "BOOKMARK", {}

        return events()


def stream(namespace: str) -> asyncio.Queue[dict[str, Any]]:
    """What the namespace's Jobs watch sends next."""
    return FakeHook.streamed.setdefault(namespace, asyncio.Queue())


def set_options(monkeypatch: pytest.MonkeyPatch, **options: str) -> None:
    env = {"AIRFLOW_CONFIG": "/nonexistent/airflow.cfg"}
    env.update({f"AIRFLOW__KUEUE__{k.upper()}": v for k, v in options.items()})
    monkeypatch.setattr(kueue_config, "current_source", lambda: kueue_config.ConfigSource(env))


@pytest.fixture(autouse=True)
def fake(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(namespace_watch, "AsyncKueueHook", FakeHook)
    monkeypatch.setattr(following, "AsyncKueueHook", FakeHook)
    FakeHook.listed, FakeHook.streamed, FakeHook.lists = {}, {}, []
    NamespaceWatch._hubs.clear()
    NamespaceWatch._over_cap.clear()
    set_options(monkeypatch, watch_max_objects="3")


def test_a_listed_flood_ends_only_its_namespace_with_the_cap_and_the_fix() -> None:
    asyncio.run(_listed_flood())


async def _listed_flood() -> None:
    FakeHook.listed = {"flood": [job(f"f{i}") for i in range(5)], "calm": [job("mine")]}
    async with (
        NamespaceWatch.follow("k8s", "calm", "mine") as calm,
        NamespaceWatch.follow("k8s", "flood", "f0") as flooded,
    ):
        with pytest.raises(NamespaceOverCap) as raised:
            await asyncio.wait_for(flooded.next(), 5)
        message = str(raised.value)
        wanted = ("namespace flood", "5 jobs", "watch_max_objects = 3", "count/jobs.batch", "ResourceQuota")
        for part in wanted:
            assert part in message
        assert isinstance(raised.value, WatchUnavailable), "the path a hub that gave up ends followers"
        assert (raised.value.limit, raised.value.count) == (3, 5)
        flood_hub = flooded._hub
        assert isinstance(flood_hub, NamespaceWatch)
        assert flood_hub.objects == {} and flood_hub.retained_bytes == 0, "the hub does not keep the flood"
        assert ("k8s", "flood") not in {(t.conn_id, ns) for t, ns in NamespaceWatch._hubs}
        snapshot = await asyncio.wait_for(calm.next(), 5)
        assert snapshot.obj is not None and snapshot.obj["metadata"]["name"] == "mine"
        stream("calm").put_nowait(job("mine"))
        assert (await asyncio.wait_for(calm.next(), 5)).obj is not None, "the other namespace goes on"
        lists = FakeHook.lists.count("flood")
        async with NamespaceWatch.follow("k8s", "flood", "f1") as again:
            with pytest.raises(NamespaceOverCap):
                await asyncio.wait_for(again.next(), 5)
        assert FakeHook.lists.count("flood") == lists, "no second LIST of the flood within the retry time"


def test_a_flood_that_arrives_by_watch_events_passes_the_byte_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    set_options(monkeypatch, watch_max_objects="100", watch_max_mib="1")
    asyncio.run(_streamed_flood())


async def _streamed_flood() -> None:
    FakeHook.listed = {"flood": [job("mine")]}
    async with NamespaceWatch.follow("k8s", "flood", "mine") as mine:
        assert (await asyncio.wait_for(mine.next(), 5)).obj is not None
        long_status = "1," * 200_000  # kept: status is read (e.g. completedIndexes), so it is counted
        for i in range(4):
            flood = job(f"f{i}")
            flood["status"] = {"completedIndexes": long_status}
            stream("flood").put_nowait(flood)
        with pytest.raises(NamespaceOverCap) as raised:
            for _ in range(5):
                await asyncio.wait_for(mine.next(), 5)
        assert "watch_max_mib = 1 MiB" in str(raised.value) and "namespace flood" in str(raised.value)
        assert mine._hub.objects == {}  # type: ignore[attr-defined]


def test_an_option_that_is_not_a_positive_number_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    set_options(monkeypatch, watch_max_objects="lots")
    with pytest.raises(ValueError, match=r"\[kueue\] watch_max_objects must be a whole number"):
        configured_caps()
    set_options(monkeypatch)
    assert configured_caps() == caps.HubCaps()
