"""The shared watch follows JobSets only once a JobSet follower joins (a cluster without the JobSet CRD is
never asked for them); a JobSet follower wakes on its JobSet, its Jobs and its Workload."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, ClassVar

import pytest
from kubernetes_asyncio.client.exceptions import ApiException

from airflow_kueue_provider.hooks.cluster_target import ClusterTarget
from airflow_kueue_provider.kueue.kinds.jobset import JOBSET as JOBSET_KIND
from airflow_kueue_provider.watch import following, namespace_watch
from airflow_kueue_provider.watch.namespace_watch import NamespaceWatch
from tests.unit.watch.kind_dispatch import KindDispatch

JOBSET_LABELS = {
    "jobset.sigs.k8s.io/jobset-name": "genomics",
    "jobset.sigs.k8s.io/replicatedjob-name": "workers",
}


def _child(active: int) -> dict[str, Any]:
    return {
        "metadata": {
            "name": "genomics-workers-0",
            "uid": "child-uid",
            "resourceVersion": str(10 + active),
            "labels": JOBSET_LABELS,
            "ownerReferences": [{"kind": "JobSet", "uid": "js-uid", "controller": True}],
        },
        "status": {"active": active},
    }


JOBSET = {
    "metadata": {"name": "genomics", "uid": "js-uid", "resourceVersion": "5"},
    "spec": {"suspend": False},
}
WORKLOAD = {
    "metadata": {
        "name": "jobset-genomics",
        "uid": "wl",
        "resourceVersion": "7",
        "labels": {"kueue.x-k8s.io/job-uid": "js-uid"},
        "ownerReferences": [{"kind": "JobSet", "name": "genomics", "uid": "js-uid", "controller": True}],
    }
}


class FakeHook(KindDispatch):
    listed: ClassVar[list[str]] = []

    def __init__(self, conn_id: object) -> None:
        pass

    @asynccontextmanager
    async def session(self) -> AsyncIterator[FakeHook]:
        yield self

    async def list_jobs(self, namespace: str, **_: Any) -> tuple[list[dict[str, Any]], str]:
        FakeHook.listed.append("jobs")
        return [_child(2)], "1"

    async def list_workloads(self, namespace: str, **_: Any) -> tuple[list[dict[str, Any]], str]:
        FakeHook.listed.append("workloads")
        return [dict(WORKLOAD)], "1"

    async def list_jobsets(self, namespace: str, **_: Any) -> tuple[list[dict[str, Any]], str]:
        FakeHook.listed.append("jobsets")
        return [dict(JOBSET)], "1"

    def _never(self, *args: Any) -> AsyncIterator[tuple[str, dict[str, Any]]]:
        async def events() -> AsyncIterator[tuple[str, dict[str, Any]]]:
            await asyncio.Event().wait()
            yield "BOOKMARK", {}

        return events()

    watch_jobs = watch_workloads = watch_jobsets = _never


def test_jobsets_are_watched_once_asked_for_and_their_jobs_and_workload_wake_their_follower(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(namespace_watch, "AsyncKueueHook", FakeHook)
    monkeypatch.setattr(following, "AsyncKueueHook", FakeHook)  # a follower's own reads
    FakeHook.listed = []

    async def scenario() -> None:
        async with NamespaceWatch.follow("c", "ns", "genomics-workers-0") as job_follower:
            job = await asyncio.wait_for(job_follower.next(), 5)
            assert sorted(FakeHook.listed) == [
                "jobs",
                "workloads",
            ]  # no JobSet LIST without a JobSet follower
            assert job.workload is not None and job.workload["metadata"]["name"] == "jobset-genomics"
            async with NamespaceWatch.follow("c", "ns", "genomics", JOBSET_KIND) as following:
                snap = await asyncio.wait_for(following.next(), 5)
                assert "jobsets" in FakeHook.listed and FakeHook.listed.count("jobs") == 2  # all listed again
                assert snap.obj is not None and snap.obj["metadata"]["uid"] == "js-uid"
                assert [j["metadata"]["name"] for j in snap.children] == ["genomics-workers-0"]
                assert snap.workload is not None and snap.workload["metadata"]["name"] == "jobset-genomics"
                hub = NamespaceWatch._hubs[(ClusterTarget("c"), "ns")]
                hub._apply("jobs", "MODIFIED", _child(5))  # a child Job changed: the JobSet's follower wakes
                snap = await asyncio.wait_for(following.next(), 5)
                assert snap.children[0]["status"]["active"] == 5
                hub._apply_workload(
                    "MODIFIED", {**WORKLOAD, "metadata": {**WORKLOAD["metadata"], "resourceVersion": "8"}}
                )
                snap = await asyncio.wait_for(following.next(), 5)
                assert snap.workload is not None and snap.workload["metadata"]["resourceVersion"] == "8"
                hub._apply("jobsets", "DELETED", dict(JOBSET))
                snap = await asyncio.wait_for(following.next(), 5)
                assert snap.obj is None
        assert NamespaceWatch._hubs == {}

    asyncio.run(scenario())


class NoJobSetCrd(FakeHook):
    async def list_jobsets(self, namespace: str, **_: Any) -> tuple[list[dict[str, Any]], str]:
        FakeHook.listed.append("jobsets")
        raise ApiException(status=404, reason="Not Found")


def test_jobsets_not_served_end_only_the_jobset_followers_naming_the_fix(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(namespace_watch, "AsyncKueueHook", NoJobSetCrd)
    monkeypatch.setattr(following, "AsyncKueueHook", NoJobSetCrd)  # a follower's own reads
    FakeHook.listed = []

    async def scenario() -> None:
        async with NamespaceWatch.follow("c", "ns", "genomics-workers-0") as job_follower:
            await asyncio.wait_for(job_follower.next(), 5)
            async with NamespaceWatch.follow("c", "ns", "genomics", JOBSET_KIND) as following:
                with pytest.raises(namespace_watch.KindUnavailable, match="install the JobSet controller"):
                    await asyncio.wait_for(following.next(), 5)
            hub = NamespaceWatch._hubs[(ClusterTarget("c"), "ns")]
            assert hub.error is None and "jobsets" not in hub.kinds  # the Jobs' followers go on
            hub._apply("jobs", "MODIFIED", _child(7))
            job = await asyncio.wait_for(job_follower.next(), 5)
            assert job.obj is not None and job.obj["status"]["active"] == 7

    asyncio.run(scenario())
