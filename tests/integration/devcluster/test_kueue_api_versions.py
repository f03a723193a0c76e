"""The bed serves Kueue v0.20's API surface by default (``kueue.x-k8s.io`` v1beta2 only, visibility v1beta2
only), so every other bed test of the suite runs against it; ``DEVCLUSTER_KUEUE_API=both`` brings back 0.19.2
as it ships (docs/kueue-versions.md). The provider negotiates the served version and reads the visibility API
there."""

from __future__ import annotations

import asyncio
import os
from typing import Any

from kubernetes.client.rest import ApiException

from airflow_kueue_provider.hooks.kueue_async_hook import AsyncKueueHook
from airflow_kueue_provider.hooks.kueue_hook import KueueHook
from devcluster.manifests import KUEUE_API_ENV, KUEUE_GROUP, kueue_api_mode

from ..cluster import Cluster, KueueEnv, indexed_job, is_true, wait_for

VISIBILITY_GROUP = "visibility.kueue.x-k8s.io"


def _expected_versions() -> list[str]:
    """What the bed serves in the mode this run brought it up in (the session fixture ran ``up``)."""
    both = kueue_api_mode(os.environ.get(KUEUE_API_ENV)) == "both"
    return ["v1beta1", "v1beta2"] if both else ["v1beta2"]


def _served(cluster: Cluster, group: str) -> list[str]:
    return sorted(v["version"] for v in cluster.get_raw(f"/apis/{group}")["versions"])


def _status(cluster: Cluster, path: str) -> int:
    try:
        cluster.get_raw(path)
    except ApiException as exc:
        return int(exc.status)
    return 200


def _assert_serves_the_mode(cluster: Cluster) -> None:
    expected = _expected_versions()
    assert _served(cluster, KUEUE_GROUP) == expected
    assert _served(cluster, VISIBILITY_GROUP) == expected
    v1beta1 = 200 if "v1beta1" in expected else 404
    assert _status(cluster, f"/apis/{KUEUE_GROUP}/v1beta1") == v1beta1
    assert _status(cluster, f"/apis/{KUEUE_GROUP}/v1beta1/workloads") == v1beta1
    assert _status(cluster, f"/apis/{VISIBILITY_GROUP}/v1beta1") == v1beta1
    assert _status(cluster, f"/apis/{KUEUE_GROUP}/v1beta2/workloads") == 200
    crds = cluster.get_raw(
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions?labelSelector=app.kubernetes.io/name=kueue"
    )["items"]
    kueue_crds = [c for c in crds if c["spec"]["group"] == KUEUE_GROUP]
    assert len(kueue_crds) >= 11, [c["metadata"]["name"] for c in crds]
    for crd in kueue_crds:
        versions = {v["name"]: v for v in crd["spec"]["versions"]}
        assert sorted(n for n, v in versions.items() if v["served"]) == expected, crd["metadata"]["name"]
        assert versions["v1beta2"]["storage"] is True, crd["metadata"]["name"]


def test_the_bed_serves_what_its_kueue_api_mode_says(cluster: Cluster) -> None:
    _assert_serves_the_mode(cluster)


def test_multikueue_workers_serve_the_same_versions(multikueue_workers: list[Cluster]) -> None:
    for worker in multikueue_workers:
        _assert_serves_the_mode(worker)


def _pending_job(env: KueueEnv) -> dict[str, Any]:
    """A Job held pending behind one that takes the queue's whole quota."""
    env.create_job(indexed_job("holder", env.local_queue, completions=1, cpu="1", hold=True))
    waiting = env.create_job(indexed_job("waiting", env.local_queue, completions=1, cpu="1"))
    wait_for("the holder admitted", lambda: env.running_pods("holder"), timeout=90)
    wait_for("the waiting Job's Workload", lambda: env.workload(waiting), timeout=60)
    assert not is_true(env.workload(waiting), "QuotaReserved")
    return waiting


def test_the_provider_speaks_the_served_version_and_reads_the_visibility_api(
    kueue_env_factory: Any,
) -> None:
    env: KueueEnv = kueue_env_factory(cpu="1", memory="4Gi")
    waiting = _pending_job(env)
    workload = env.workload(waiting)
    assert workload is not None
    name = workload["metadata"]["name"]
    newest = _expected_versions()[-1]

    hook = KueueHook()
    assert hook.kueue_version == newest
    read = hook.workload_for_job(env.namespace, waiting["metadata"]["uid"])
    assert read is not None and read["metadata"]["name"] == name
    assert wait_for(
        "the sync hook's queue position", lambda: hook.pending_position(env.namespace, env.local_queue, name)
    ) == (0, 0)

    async def through_the_async_hook() -> tuple[str, tuple[int, int] | None, list[str]]:
        async with AsyncKueueHook().session() as ahook:
            items, _ = await ahook.list_workloads(env.namespace)
            position = await ahook.pending_position(env.namespace, env.local_queue, name)
            return await ahook.kueue_version(), position, [w["metadata"]["name"] for w in items]

    version, position, names = asyncio.run(through_the_async_hook())
    assert (version, position) == (newest, (0, 0))
    assert name in names
