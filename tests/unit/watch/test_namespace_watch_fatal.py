"""When the shared watch gives up: a kind refused again and again is fatal even while another kind lists
fine (each kind counts its own failures), the reason names the kind, the status and the RBAC rule, and a hub
that gave up leaves the registry: the next follower gets a fresh hub, even while an old follower (a UI page)
is still joined to the old one."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, ClassVar

import pytest
from kubernetes_asyncio.client.exceptions import ApiException

from airflow_kueue_provider.hooks.cluster_target import ClusterTarget
from airflow_kueue_provider.watch import following, namespace_watch
from airflow_kueue_provider.watch.kind_failures import (
    FATAL_AFTER,
    KindFailures,
    WatchUnavailable,
    unavailable,
)
from airflow_kueue_provider.watch.namespace_watch import NamespaceWatch
from tests.unit.watch.kind_dispatch import KindDispatch

JOB = {"metadata": {"name": "j", "uid": "u", "resourceVersion": "1"}, "status": {}}


class FakeHook(KindDispatch):
    refuse: ClassVar[dict[str, str]] = {}  # kind -> "list" or "watch": answered 403
    calls: ClassVar[list[str]] = []

    def __init__(self, conn_id: object) -> None:
        pass

    @asynccontextmanager
    async def session(self) -> AsyncIterator[FakeHook]:
        yield self

    async def _list(self, kind: str, items: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], str]:
        FakeHook.calls.append(f"list {kind}")
        if FakeHook.refuse.get(kind) == "list":
            raise ApiException(status=403, reason="Forbidden")
        return items, "1"

    async def list_jobs(self, namespace: str, **_: Any) -> tuple[list[dict[str, Any]], str]:
        return await self._list("jobs", [dict(JOB, metadata=dict(JOB["metadata"]))])

    async def list_workloads(self, namespace: str, **_: Any) -> tuple[list[dict[str, Any]], str]:
        await asyncio.sleep(0.01)  # after the Jobs LIST: it would reset a shared count
        return await self._list("workloads", [])

    def _watch(self, kind: str) -> AsyncIterator[tuple[str, dict[str, Any]]]:
        async def events() -> AsyncIterator[tuple[str, dict[str, Any]]]:
            if FakeHook.refuse.get(kind) == "watch":
                raise ApiException(status=403, reason="Forbidden")
            await asyncio.Event().wait()
            yield "BOOKMARK", {}

        return events()

    def watch_jobs(self, *args: Any) -> AsyncIterator[tuple[str, dict[str, Any]]]:
        return self._watch("jobs")

    def watch_workloads(self, *args: Any) -> AsyncIterator[tuple[str, dict[str, Any]]]:
        return self._watch("workloads")


class _NoWait:
    @staticmethod
    def uniform(a: float, b: float) -> float:
        return a  # no backoff in a unit test; watch rounds as long as they get


@pytest.fixture(autouse=True)
def fake(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(namespace_watch, "AsyncKueueHook", FakeHook)
    monkeypatch.setattr(following, "AsyncKueueHook", FakeHook)
    monkeypatch.setattr(namespace_watch, "random", _NoWait)
    FakeHook.refuse, FakeHook.calls = {}, []
    NamespaceWatch._hubs.clear()


async def _until_error(follower: Any) -> None:
    while True:
        await follower.next()


@pytest.mark.parametrize("phase", ["list", "watch"])
def test_a_workloads_403_is_fatal_although_jobs_list_fine_and_names_the_rule(phase: str) -> None:
    FakeHook.refuse = {"workloads": phase}

    async def scenario() -> None:
        async with NamespaceWatch.follow("c", "ns", "j") as follower:
            with pytest.raises(WatchUnavailable) as gave_up:
                await asyncio.wait_for(_until_error(follower), 10)  # a refused WATCH: each LIST synced
            assert NamespaceWatch._hubs == {}, "a hub that gave up leaves the registry at once"
        error = gave_up.value
        assert error.kind == "workloads" and error.status == 403
        assert f"the workloads {phase.upper()} in namespace ns failed 3 times in a row (HTTP 403" in str(
            error
        )
        assert 'apiGroups ["kueue.x-k8s.io"], resources ["workloads"], verbs ["get", "list", "watch"]' in str(
            error
        )
        assert FakeHook.calls.count("list jobs") >= FATAL_AFTER, "the Jobs listed fine every round"

    asyncio.run(scenario())


def test_a_hub_that_gave_up_is_rebuilt_for_the_next_follower_while_an_old_one_is_joined() -> None:
    FakeHook.refuse = {"workloads": "list"}

    async def scenario() -> None:
        async with NamespaceWatch.follow("c", "ns", namespace_watch.ANY_JOB) as ui_page:
            with pytest.raises(WatchUnavailable):
                await asyncio.wait_for(ui_page.next(), 10)
            FakeHook.refuse = {}  # the rule was added
            async with NamespaceWatch.follow("c", "ns", "j") as task_stream:
                snapshot = await asyncio.wait_for(task_stream.next(), 10)
                assert snapshot.obj is not None and snapshot.obj["metadata"]["name"] == "j"
                assert NamespaceWatch._hubs[(ClusterTarget("c"), "ns")].error is None
            with pytest.raises(WatchUnavailable):
                ui_page.current()  # the old follower keeps its hub's reason
        assert NamespaceWatch._hubs == {}

    asyncio.run(scenario())


def test_each_kind_and_phase_counts_its_own_failures() -> None:
    counts = KindFailures()
    assert [counts.failed("workloads") for _ in range(2)] == [1, 2]
    counts.listed("jobs")  # another kind listing fine resets nothing of the Workloads
    assert counts.failed("workloads") == 3
    counts.listed("workloads")
    assert counts.failed("workloads") == 1
    assert counts.failed("workloads", "watch") == 1
    counts.listed("workloads")  # a good LIST does not excuse a refused WATCH
    assert counts.failed("workloads", "watch") == 2 and counts.worst == 2
    counts.watched("workloads")
    assert counts.failed(None) == 1  # the connection itself: reset by any good LIST
    counts.listed("jobs")
    assert counts.failed(None) == 1


def test_the_reason_says_what_to_change_for_each_status() -> None:
    assert "renew its token" in str(unavailable("jobs", 401, "ns", "401 Unauthorized"))
    assert "install its CRD" in str(unavailable("jobsets", 404, "ns", "404"))
    assert 'apiGroups ["batch"], resources ["jobs"]' in str(unavailable("jobs", 403, "ns", "403"))
