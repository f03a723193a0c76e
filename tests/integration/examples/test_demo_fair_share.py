"""What ``make demo-fair-share`` counts on from Kueue, without Airflow: its queues (the example's, renamed and
scaled by ``demo_queues``) admit a research Job of 8 CPU by borrowing the risk team's 4 while ``risk-queue``
is held, and releasing the queue gets the risk Job admitted by preempting it (``InCohortReclamation``).
The demo itself, on a real Airflow deployment, is run by hand (``make demo-fair-share``); its summary is
unit-tested in ``tests/unit/example_dags/test_demo_fair_share.py``."""

from __future__ import annotations

from collections.abc import Iterator
from types import ModuleType
from typing import Any

import pytest
import yaml
from kubernetes.client.rest import ApiException

from ...tool_modules import load_tool
from ..cluster import HOLD, SPOT_TOLERATION, Cluster, condition, is_true, short_id, wait_for


@pytest.fixture(scope="module")
def demo() -> ModuleType:
    return load_tool("demo_fair_share")


@pytest.fixture
def demo_objects(cluster: Cluster, demo: ModuleType) -> Iterator[list[dict[str, Any]]]:
    """The demo's queues under a prefix of this test's own, applied; all deleted afterwards."""
    docs = demo.demo_queues(
        [d for d in yaml.safe_load_all(demo.EXAMPLE_QUEUES.read_text()) if d], prefix=f"t-fs-{short_id()}-"
    )
    plural = {
        "ResourceFlavor": "resourceflavors",
        "Cohort": "cohorts",
        "WorkloadPriorityClass": "workloadpriorityclasses",
        "ClusterQueue": "clusterqueues",
        "LocalQueue": "localqueues",
    }
    try:
        for doc in docs:
            meta = doc["metadata"]
            if doc["kind"] == "Namespace":
                cluster.core.create_namespace(
                    {"metadata": {"name": meta["name"], "labels": {"devcluster/test": "true"}}}
                )
            else:
                body = {k: v for k, v in doc.items() if k != "apiVersion"}
                cluster.kueue_create(plural[doc["kind"]], body, namespace=meta.get("namespace"))
        yield docs
    finally:
        for doc in reversed(docs):
            meta = doc["metadata"]
            if doc["kind"] == "Namespace":
                try:
                    cluster.core.delete_namespace(meta["name"], propagation_policy="Background")
                except ApiException as exc:
                    if exc.status != 404:
                        raise
            elif doc["kind"] != "LocalQueue":  # goes with its namespace
                cluster.kueue_delete(plural[doc["kind"]], meta["name"])


def _job(name: str, queue: str, priority: str, pods: int) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "labels": {"kueue.x-k8s.io/queue-name": queue, "kueue.x-k8s.io/priority-class": priority},
        },
        "spec": {
            "suspend": True,
            "completionMode": "Indexed",
            "completions": pods,
            "parallelism": pods,
            "template": {
                "metadata": {"annotations": HOLD},
                "spec": {
                    "restartPolicy": "Never",
                    "tolerations": [SPOT_TOLERATION],
                    "containers": [
                        {
                            "name": "main",
                            "image": "example.invalid/shard:1",
                            "resources": {"requests": {"cpu": "2", "memory": "1Gi"}},
                        }
                    ],
                },
            },
        },
    }


def test_held_risk_queue_lets_research_borrow_and_its_release_reclaims(
    cluster: Cluster, demo: ModuleType, demo_objects: list[dict[str, Any]]
) -> None:
    names = {(d["kind"], d["metadata"]["name"]): d for d in demo_objects}
    queues = {d["metadata"]["name"]: d for d in demo_objects if d["kind"] == "LocalQueue"}
    risk_lq, research_lq = queues[demo.RISK_QUEUE], queues[demo.RESEARCH_QUEUE]
    assert risk_lq["spec"]["stopPolicy"] == "Hold"
    prefix = risk_lq["spec"]["clusterQueue"].removesuffix("risk-cq")
    risk_ns, research_ns = risk_lq["metadata"]["namespace"], research_lq["metadata"]["namespace"]
    assert ("WorkloadPriorityClass", f"{prefix}risk-critical") in names

    cluster.batch.create_namespaced_job(
        research_ns, _job("research", demo.RESEARCH_QUEUE, f"{prefix}research-batch", 4)
    )
    cluster.batch.create_namespaced_job(risk_ns, _job("risk", demo.RISK_QUEUE, f"{prefix}risk-critical", 2))

    def workload(ns: str, job: str) -> dict[str, Any] | None:
        uid = cluster.batch.read_namespaced_job(job, ns).metadata.uid
        return cluster.workload_for_job(ns, uid)

    research = wait_for(
        "the research Workload admitted",
        lambda: (wl := workload(research_ns, "research")) and is_true(wl, "Admitted") and wl,
        timeout=60,
    )
    assert research["status"]["admission"]["podSetAssignments"][0]["resourceUsage"]["cpu"] == "8"
    # Kueue creates the held Job's Workload on its own schedule: wait for it, then check it was not admitted.
    risk = wait_for("the risk Workload created", lambda: workload(risk_ns, "risk"), timeout=60)
    assert not is_true(risk, "QuotaReserved"), "held: not admitted"

    cluster.custom.patch_namespaced_custom_object(
        "kueue.x-k8s.io", "v1beta2", risk_ns, "localqueues", demo.RISK_QUEUE, {"spec": {"stopPolicy": "None"}}
    )
    evicted = wait_for(
        "the research Workload evicted",
        lambda: (wl := workload(research_ns, "research")) and is_true(wl, "Evicted") and wl,
        timeout=60,
    )
    assert (condition(evicted, "Evicted") or {}).get("reason") == "Preempted"
    assert (condition(evicted, "Preempted") or {}).get("reason") in demo.RECLAIM_REASONS
    risk = wait_for(
        "the risk Workload admitted",
        lambda: (wl := workload(risk_ns, "risk")) and is_true(wl, "Admitted") and wl,
        timeout=60,
    )
    assert risk["status"]["admission"]["clusterQueue"] == f"{prefix}risk-cq"
