"""Acceptance 1-3 of the local cluster: Kueue's webhook, gang admission under quota, priority preemption."""

from __future__ import annotations

import time
from typing import Any

from ..cluster import Cluster, KueueEnv, condition, indexed_job, is_true, wait_for


def _complete(env: KueueEnv, name: str) -> dict[str, Any] | None:
    job = env.job(name)
    return job if is_true(job, "Complete") else None


def test_queued_job_is_suspended_admitted_and_completes_every_index(kueue_env: KueueEnv) -> None:
    created = kueue_env.create_job(
        indexed_job("genomics", kueue_env.local_queue, completions=5, parallelism=5)
    )

    assert created["spec"]["suspend"] is True, (
        "Kueue's mutating webhook suspends a queue-labelled Job on create"
    )
    workload = wait_for("Workload with the job-uid label", lambda: kueue_env.workload(created))
    assert workload["metadata"]["ownerReferences"][0]["uid"] == created["metadata"]["uid"]
    wait_for("Workload Admitted", lambda: is_true(kueue_env.workload(created), "Admitted"))
    admission = kueue_env.workload(created)["status"]["admission"]
    assert admission["clusterQueue"] == kueue_env.cluster_queue
    assert admission["podSetAssignments"][0]["flavors"] == {
        "cpu": kueue_env.flavor,
        "memory": kueue_env.flavor,
    }

    job = wait_for("Job Complete", lambda: _complete(kueue_env, "genomics"))
    assert job["status"]["completedIndexes"] == "0-4"
    assert job["status"]["succeeded"] == 5
    pods = kueue_env.pods("genomics")
    # Kueue injected the flavor's nodeLabels, and each pod ran on a node of that pool: the bed's aks-spot-*
    # nodes or a Spot pool another test added beside them (TAS's tas-*, the night's), which the flavor selects
    # as well, so the node's labels say it, not its name (a node its test removed since is not read).
    assert pods and all(p["spec"].get("nodeSelector", {}).get("tier") == "spot" for p in pods), pods
    for node in {p["spec"]["nodeName"] for p in pods}:
        found = kueue_env.cluster.core.list_node(field_selector=f"metadata.name={node}").items
        assert all(n.metadata.labels.get("tier") == "spot" for n in found), (node, found)
    # The flavor's toleration for the Spot taint was injected on admission.
    assert any(
        t.get("key") == "kubernetes.azure.com/scalesetpriority" for t in pods[0]["spec"]["tolerations"]
    )
    wait_for("Workload Finished", lambda: is_true(kueue_env.workload(created), "Finished"))


def test_second_job_waits_for_quota_and_is_never_partially_started(
    kueue_env_factory: Any, cluster: Cluster
) -> None:
    env = kueue_env_factory(cpu="4", memory="16Gi")
    first = env.create_job(indexed_job("first", env.local_queue, completions=2, cpu="2", hold=True))
    wait_for("first admitted", lambda: is_true(env.workload(first), "Admitted"))
    second = env.create_job(indexed_job("second", env.local_queue, completions=2, cpu="2", run_duration="1s"))

    pending = wait_for(
        "second's QuotaReserved=False", lambda: condition(env.workload(second), "QuotaReserved")
    )
    assert pending["status"] == "False" and pending["reason"] == "Pending", pending
    # The visibility API (served by Kueue through the aggregator) reports its place in the queue.
    lq_pending = cluster.get_raw(
        f"/apis/visibility.kueue.x-k8s.io/v1beta2/namespaces/{env.namespace}/localqueues/lq/pendingworkloads"
    )
    assert [(w["metadata"]["name"], w["positionInLocalQueue"]) for w in lq_pending["items"]] == [
        (env.workload(second)["metadata"]["name"], 0)
    ]

    # While the first Job holds the quota, the second stays suspended with no pods at all (gang: all or
    # nothing); then the first is released.
    wait_for("first's pods running", lambda: len(env.running_pods("first")) == 2)
    for _ in range(6):
        job2 = env.job("second")
        assert job2["spec"]["suspend"] is True
        assert not env.pods("second"), "the second Job started pods before it was admitted"
        time.sleep(0.5)
    env.release_until_finished("first")

    wait_for("second admitted", lambda: is_true(env.workload(second), "Admitted"))
    job2 = wait_for("second Complete", lambda: _complete(env, "second"))
    assert job2["status"]["completedIndexes"] == "0,1"


def test_high_priority_job_preempts_low_which_requeues_and_completes(kueue_env_factory: Any) -> None:
    env = kueue_env_factory(cpu="4", memory="16Gi", preemption={"withinClusterQueue": "LowerPriority"})
    low_pc, high_pc = env.priority_class("low", 100), env.priority_class("high", 1000)
    low = env.create_job(
        indexed_job(
            "low",
            env.local_queue,
            completions=2,
            cpu="2",
            hold=True,
            labels={"kueue.x-k8s.io/priority-class": low_pc},
        )
    )
    wait_for("low running", lambda: any(p["status"].get("phase") == "Running" for p in env.pods("low")))

    env.create_job(
        indexed_job(
            "high",
            env.local_queue,
            completions=2,
            cpu="2",
            run_duration="2s",
            labels={"kueue.x-k8s.io/priority-class": high_pc},
        )
    )

    evicted = wait_for("low Evicted", lambda: condition(env.workload(low), "Evicted"), timeout=30)
    assert evicted["reason"] == "Preempted", evicted
    preempted = condition(env.workload(low), "Preempted")
    assert preempted and preempted["reason"] == "InClusterQueue", preempted
    wait_for("low suspended again", lambda: env.job("low")["spec"]["suspend"] is True)
    wait_for("high Complete", lambda: _complete(env, "high"), timeout=60)
    # Requeued and re-admitted once the quota is free, then runs to the end.
    wait_for("low re-admitted", lambda: is_true(env.workload(low), "Admitted"), timeout=60)
    job = env.release_until_finished("low")
    assert job["status"]["completedIndexes"] == "0,1"
    evictions = env.workload(low)["status"].get("schedulingStats", {}).get("evictions", [])
    assert any(e.get("reason") == "Preempted" and e.get("count", 0) >= 1 for e in evictions), evictions
