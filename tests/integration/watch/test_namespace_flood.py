"""A namespace flooded with Jobs that carry the provider's public ``managed-by`` label (and 100 KiB
annotations) ends only its own deferred task, naming the cap, while a task in another namespace, followed by
the same process's hubs, finishes; the flooded hub drops what it held. The cap is lowered to 20 objects for
the test (``[kueue] watch_max_objects``; the default is 10,000)."""

from __future__ import annotations

import asyncio
import json
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from airflow_kueue_provider.hooks import kueue_config
from airflow_kueue_provider.kueue.names import MANAGED_BY_LABEL, MANAGED_BY_VALUE
from airflow_kueue_provider.watch.namespace_watch import NamespaceWatch

from ..cluster import KueueEnv, wait_for
from ..tenant import Tenant
from ..triggers.test_kueue_job_trigger import _first_event, _submit, _trigger

CAP = 20
JOB_RULES = [{"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["create", "get", "list"]}]
FLOOD = 25


def flood_job(i: int) -> dict[str, Any]:
    """A Job no task made: suspended, no queue label (Kueue leaves it alone), the public label, a big note."""
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": f"flood-{i}",
            "labels": {MANAGED_BY_LABEL: MANAGED_BY_VALUE},
            "annotations": {"flood.example.com/blob": "x" * (100 * 1024)},
        },
        "spec": {
            "suspend": True,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "c", "image": "example.invalid/none:1"}],
                }
            },
        },
    }


@pytest.fixture
def low_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    real = kueue_config.current_source
    monkeypatch.setattr(
        kueue_config,
        "current_source",
        lambda: kueue_config.ConfigSource({**real().environ, "AIRFLOW__KUEUE__WATCH_MAX_OBJECTS": str(CAP)}),
    )


def test_a_flooded_namespace_fails_its_own_task_only(low_cap: None, kueue_env_factory: Any) -> None:
    calm: KueueEnv = kueue_env_factory()
    flooded: KueueEnv = kueue_env_factory()
    calm_job = _submit(calm, run_duration="1s", hold=True)
    flooded_job = _submit(flooded, run_duration="1s", hold=True)
    team = Tenant(flooded.cluster, flooded.namespace, JOB_RULES).batch

    def synced(env: KueueEnv) -> bool:
        hub = next((h for (_, ns), h in NamespaceWatch._hubs.items() if ns == env.namespace), None)
        return hub is not None and hub.synced.is_set()

    async def scenario() -> tuple[dict[str, Any], dict[str, Any], NamespaceWatch]:
        calm_task = asyncio.create_task(_first_event(_trigger(calm, calm_job)))
        flooded_task = asyncio.create_task(_first_event(_trigger(flooded, flooded_job)))
        await asyncio.to_thread(wait_for, "both hubs synced", lambda: synced(calm) and synced(flooded), 60)
        flooded_hub = next(h for (_, ns), h in NamespaceWatch._hubs.items() if ns == flooded.namespace)

        def make_flood() -> None:  # as a team's ServiceAccount with the ordinary Role (create Jobs)
            with ThreadPoolExecutor(4) as pool:
                list(
                    pool.map(
                        lambda i: team.create_namespaced_job(flooded.namespace, flood_job(i)), range(FLOOD)
                    )
                )

        await asyncio.to_thread(make_flood)
        flooded_event = await asyncio.wait_for(flooded_task, 120)
        await asyncio.to_thread(calm.release_until_finished, calm_job["metadata"]["name"])
        return await asyncio.wait_for(calm_task, 150), flooded_event, flooded_hub

    try:
        calm_event, flooded_event, flooded_hub = asyncio.run(scenario())
    finally:  # the flood first: a namespace left with suspended Jobs was seen to stay Terminating
        batch = flooded.cluster.batch
        batch.delete_collection_namespaced_job(flooded.namespace, propagation_policy="Background")

    assert calm_event["status"] == "success", calm_event
    text = json.dumps(flooded_event)
    assert flooded_event["status"] == "error", flooded_event
    for part in (
        "NamespaceOverCap",
        f"namespace {flooded.namespace}",
        f"watch_max_objects = {CAP}",
        "count/jobs.batch",
    ):
        assert part in text, (part, flooded_event)
    assert flooded_hub.objects == {} and flooded_hub.retained_bytes == 0, "the hub dropped the flood"
