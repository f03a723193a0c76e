"""KubernetesPodOperator's connection overrides (cluster_context, config_file, in_cluster) reach every call a
task makes: the operator's hooks, its trigger (serialized with them, and without them exactly as before), the
shared watch (one per target) and the asynchronous client."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from airflow_kueue_provider.hooks import async_client
from airflow_kueue_provider.hooks.cluster_target import ClusterTarget
from airflow_kueue_provider.operators.indexed_job import KueueIndexedJobOperator
from airflow_kueue_provider.operators.jobset import KueueJobSetOperator, KueueReplicatedJob
from airflow_kueue_provider.triggers.kueue_job import KueueJobTrigger

OVERRIDES = {"cluster_context": "aks-westeurope", "config_file": "/etc/kube/batch.yaml", "in_cluster": False}


def test_the_operators_hooks_use_the_overrides() -> None:
    job = KueueIndexedJobOperator(task_id="t", namespace="b", queue_name="lq", image="w", **OVERRIDES)
    jobset = KueueJobSetOperator(
        task_id="s",
        namespace="b",
        queue_name="lq",
        replicated_jobs=[KueueReplicatedJob(name="w", image="w")],
        **OVERRIDES,
    )
    for op in (job, jobset):
        assert op.cluster_target() == ClusterTarget("kubernetes_default", **OVERRIDES)
        kube = op._client().hook._kube
        assert (kube.cluster_context, kube.config_file, kube.in_cluster) == tuple(OVERRIDES.values())


def test_the_trigger_keeps_the_overrides_and_leaves_them_out_when_unset() -> None:
    base: dict[str, Any] = {"job_name": "j", "namespace": "b", "queue_name": "lq"}
    _, kwargs = KueueJobTrigger(**base, **OVERRIDES).serialize()
    assert {k: kwargs[k] for k in OVERRIDES} == OVERRIDES
    again = KueueJobTrigger(**kwargs)
    assert again.target == ClusterTarget("kubernetes_default", **OVERRIDES)
    _, plain = KueueJobTrigger(**base).serialize()
    assert not set(OVERRIDES) & set(plain), "a triggerer of the previous version loads it"


def test_each_target_has_its_own_client_configuration(monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[dict[str, Any]] = []

    class Hook:
        _config_loaded = True

        def __init__(self, **kwargs: Any) -> None:
            made.append(kwargs)

        async def get_conn_extras(self) -> dict[str, Any]:
            return {}

        async def _load_config(self) -> None:
            return None

    async def run() -> None:
        await async_client.load_clients()
        monkeypatch.setattr(async_client, "AsyncKubernetesHook", Hook)
        monkeypatch.setattr(async_client, "_configs", {})
        west = ClusterTarget("k8s", cluster_context="west")
        first = await async_client._kubernetes_hook(west)
        assert await async_client._kubernetes_hook(west) is first, "loaded once per target"
        assert await async_client._kubernetes_hook(ClusterTarget("k8s", cluster_context="east")) is not first

    asyncio.run(run())
    contexts = [(m["conn_id"], m["cluster_context"]) for m in made]
    assert set(contexts) == {("k8s", "west"), ("k8s", "east")}, "each target's cncf hook gets its overrides"
