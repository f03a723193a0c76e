"""A periodic LIST wakes only the followers whose Job or Workload changed (1,000 followers share a hub)."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import AsyncIterator
from typing import Any

import pytest

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
