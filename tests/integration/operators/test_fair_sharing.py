"""Kueue's fair sharing with hierarchical cohorts: a team over its fair share is preempted when the other
team borrows too, and the task's log and result name the reason (``InCohortFairSharing``)."""

from __future__ import annotations

from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest

from ..airflow_runner import AirflowHome
from ..cluster import SPOT_TOLERATION, Cluster, indexed_job, is_true, short_id, wait_for
from .test_indexed_job_queueing import returned_result, write_operator_dag


def _cluster_queue(name: str, cohort: str, flavor: str, namespace: str) -> dict[str, Any]:
    return {
        "kind": "ClusterQueue",
        "metadata": {"name": name},
        "spec": {
            "cohortName": cohort,
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
            "preemption": {"reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority"},
            "resourceGroups": [_quota(flavor, "1", "8Gi")],
        },
    }


def _quota(flavor: str, cpu: str, memory: str) -> dict[str, Any]:
    resources = [{"name": "cpu", "nominalQuota": cpu}, {"name": "memory", "nominalQuota": memory}]
    return {"coveredResources": ["cpu", "memory"], "flavors": [{"name": flavor, "resources": resources}]}


@pytest.fixture
def department(cluster: Cluster) -> Iterator[SimpleNamespace]:
    """Cohort ``dept`` holds a shared pool of 6 CPUs; teams ``a`` and ``b`` (cohorts under it) own 1 CPU each
    in their ClusterQueue, one namespace and LocalQueue ``lq`` per team."""
    sid = short_id()
    dept, flavor = f"dept-{sid}", f"rf-fs-{sid}"
    teams = {team: SimpleNamespace(namespace=f"t-fs-{team}-{sid}", cq=f"cq-fs-{team}-{sid}") for team in "ab"}
    cluster.kueue_create(
        "resourceflavors",
        {
            "kind": "ResourceFlavor",
            "metadata": {"name": flavor},
            "spec": {"nodeLabels": {"tier": "spot"}, "tolerations": [SPOT_TOLERATION]},
        },
    )
    cluster.kueue_create(
        "cohorts",
        {
            "kind": "Cohort",
            "metadata": {"name": dept},
            "spec": {"resourceGroups": [_quota(flavor, "6", "48Gi")]},
        },
    )
    for team, t in teams.items():
        cluster.core.create_namespace(
            {"metadata": {"name": t.namespace, "labels": {"devcluster/test": "true"}}}
        )
        cluster.kueue_create(
            "cohorts",
            {"kind": "Cohort", "metadata": {"name": f"{dept}-{team}"}, "spec": {"parentName": dept}},
        )
        cluster.kueue_create("clusterqueues", _cluster_queue(t.cq, f"{dept}-{team}", flavor, t.namespace))
        cluster.kueue_create(
            "localqueues",
            {
                "kind": "LocalQueue",
                "metadata": {"name": "lq", "namespace": t.namespace},
                "spec": {"clusterQueue": t.cq},
            },
            namespace=t.namespace,
        )
        wait_for(
            f"LocalQueue lq in {t.namespace} active",
            lambda t=t: is_true(cluster.kueue_get("localqueues", "lq", t.namespace), "Active"),
            timeout=30,
        )
    yield SimpleNamespace(dept=dept, flavor=flavor, **teams)
    for t in teams.values():
        cluster.core.delete_namespace(t.namespace, propagation_policy="Background")
        cluster.kueue_delete("clusterqueues", t.cq)
    for name in (f"{dept}-a", f"{dept}-b", dept):
        cluster.kueue_delete("cohorts", name)
    cluster.kueue_delete("resourceflavors", flavor)


def test_a_team_over_its_fair_share_is_preempted_when_the_other_team_borrows_too(
    cluster: Cluster, airflow_home: AirflowHome, department: SimpleNamespace
) -> None:
    a, b = department.a, department.b
    # Team a's task: 6 pods of 1 CPU, its own 1 and 5 borrowed from the department's pool.
    env_a = SimpleNamespace(namespace=a.namespace, local_queue="lq")
    write_operator_dag(airflow_home, "fair_share", env_a, completions=6, cpu="1", hold=True)  # type: ignore[arg-type]
    background = airflow_home.start_dag("fair_share")
    try:

        def ours() -> dict[str, Any] | None:
            jobs = cluster.batch.list_namespaced_job(a.namespace).items
            return cluster.job(a.namespace, jobs[0].metadata.name) if jobs else None

        job_a = wait_for("team a's Job", ours, timeout=240)
        wait_for("team a admitted, borrowing", lambda: is_true(_workload(cluster, job_a), "Admitted"), 120)
        # Team b wants 3 CPUs: its own 1 and 2 borrowed. Only 2 are free; b borrowing 2 is fairer than a
        # borrowing 5, so Kueue preempts a (fair sharing), not waits.
        cluster.batch.create_namespaced_job(
            b.namespace, indexed_job("team-b", "lq", completions=3, cpu="1", hold=True)
        )
        wait_for(
            "team b admitted",
            lambda: is_true(_workload(cluster, cluster.job(b.namespace, "team-b") or {}), "Admitted"),
            timeout=120,
        )
        cluster.release_until_finished(b.namespace, "team-b")
        cluster.release_until_finished(a.namespace, job_a["metadata"]["name"])
        run = background.wait(timeout=300)
    finally:
        background.kill()
    assert run.succeeded, run.output[-6000:]
    assert "InCohortFairSharing" in run.output, run.output[-6000:]
    result = returned_result(run)
    assert result["evictions"] == 1 and result["eviction_causes"] == "Preempted/InCohortFairSharing: 1", (
        result
    )


def _workload(cluster: Cluster, job: dict[str, Any]) -> dict[str, Any] | None:
    uid = (job.get("metadata") or {}).get("uid")
    return cluster.workload_for_job(job["metadata"]["namespace"], uid) if uid else None
