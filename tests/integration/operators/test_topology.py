"""``topology=``: Kueue's topology-aware scheduling places all of a task's pods in one domain, and a JobSet's
replicated job's pods in one domain of their own (per pod set)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes.client.rest import ApiException

from airflow_kueue_provider.hooks.kueue_hook import KueueHook
from airflow_kueue_provider.kueue.jobset import JOBSET_GROUP, JOBSET_PLURAL, JOBSET_VERSION
from airflow_kueue_provider.kueue.names import RUN_ID_LABEL
from airflow_kueue_provider.plugins.dashboard_data import task_panels
from airflow_kueue_provider.plugins.dashboard_pages import task_page
from devcluster.manifests import SPOT_POOL, ZONE_LABEL, fake_node, topology

from ..airflow_runner import AirflowHome
from ..cluster import Cluster, short_id
from .test_indexed_job_queueing import returned_result, write_operator_dag

POOL_LABEL = "devcluster-tas-pool"


@pytest.fixture
def tas_pool(cluster: Cluster) -> Iterator[dict[str, Any]]:
    """Four fake Spot nodes of 16 CPUs of this test alone, two per zone, and the bed's Topology: the
    ``kueue_env_factory`` arguments of a flavor over them. A taint only that flavor tolerates keeps every
    other test's pods off the nodes this fixture deletes at its end (a 600-pod Job of a parallel test once
    landed there, lost its pods to the pod GC and waited out the Job controller's backoff)."""
    marker = short_id()
    own = {"key": POOL_LABEL, "value": marker, "effect": "NoSchedule"}
    names = [f"tas-{marker}-{i}" for i in range(4)]
    for i, name in enumerate(names):
        node = fake_node(name, SPOT_POOL, zone=1 + i // 2, group=i % 2, extra_labels={POOL_LABEL: marker})
        node["spec"]["taints"].append(own)
        cluster.core.create_node(node)
    try:
        cluster.kueue_create("topologies", topology())
    except ApiException as exc:
        if exc.status != 409:  # the bed made it
            raise
    yield {
        "node_labels": {POOL_LABEL: marker},
        "topology": topology()["metadata"]["name"],
        "tolerations": [{**own, "operator": "Equal"}],
    }
    for name in names:
        cluster.core.delete_node(name)


def test_a_task_that_requires_one_zone_runs_all_its_pods_in_one_zone(
    kueue_env_factory: Any, airflow_home: AirflowHome, tas_pool: dict[str, Any]
) -> None:
    env = kueue_env_factory(**tas_pool)
    # 4 pods of 6 CPUs: two per node. Without a topology the scheduler spreads them over both zones.
    write_operator_dag(
        airflow_home,
        "tas_zone",
        env,
        completions=4,
        parallelism=4,
        cpu="6",
        extra=f"topology={ZONE_LABEL!r},",
    )
    run = airflow_home.test_dag("tas_zone", timeout=300)

    assert run.succeeded, run.output[-6000:]
    result = returned_result(run)
    (job,) = env.jobs()
    pods = env.pods(job.metadata.name)
    nodes = {p["spec"]["nodeName"] for p in pods}
    zones = {env.cluster.core.read_node(n).metadata.labels[ZONE_LABEL] for n in nodes}
    assert len(pods) == 4 and len(zones) == 1, (nodes, zones)
    # Kueue records the placement at the node level (the lowest of the Topology's levels).
    placement = result["topology_placement"]
    assert placement.startswith("kubernetes.io/hostname: ") and all(n in placement for n in nodes), placement
    assert "placed on kubernetes.io/hostname" in run.output
    annotations = job.spec.template.metadata.annotations
    assert annotations["kueue.x-k8s.io/podset-required-topology"] == ZONE_LABEL


JOBSET_TAS_DAG = """
from datetime import datetime
from airflow.sdk import DAG
from airflow_kueue_provider.operators.jobset import KueueJobSetOperator, KueueReplicatedJob

run = {{"kwok.airflow-kueue.io/run-duration": "1s"}}
with DAG({dag_id!r}, schedule=None, start_date=datetime(2026, 1, 1), catchup=False):
    KueueJobSetOperator(
        task_id="gang", namespace={namespace!r}, queue_name={queue!r}, spot=True,
        replicated_jobs=[
            KueueReplicatedJob("coordinator", image="example.invalid/c:1", annotations=run,
                               resources={{"requests": {{"cpu": "1", "memory": "1Gi"}}}}),
            KueueReplicatedJob("workers", image="example.invalid/w:1", completions=4, parallelism=4,
                               annotations=run, topology={zone!r},
                               resources={{"requests": {{"cpu": "6", "memory": "1Gi"}}}}),
        ],
    )
"""


def test_a_jobsets_workers_that_require_one_zone_run_in_one_zone(
    kueue_env_factory: Any, airflow_home: AirflowHome, tas_pool: dict[str, Any]
) -> None:
    """JobSet + TAS, the Batch WG's pairing: the workers' pod set is placed in one zone by Kueue, and the
    result and log say where each replicated job went."""
    env = kueue_env_factory(**tas_pool)
    airflow_home.write_dag(
        "tas_jobset",
        JOBSET_TAS_DAG.format(
            dag_id="tas_jobset", namespace=env.namespace, queue=env.local_queue, zone=ZONE_LABEL
        ),
    )
    run = airflow_home.test_dag("tas_jobset", timeout=400)

    assert run.succeeded, run.output[-6000:]
    result = returned_result(run)
    (jobset,) = env.cluster.custom.list_namespaced_custom_object(
        JOBSET_GROUP, JOBSET_VERSION, env.namespace, JOBSET_PLURAL
    )["items"]
    workers = env.pods(f"{jobset['metadata']['name']}-workers-0")
    nodes = {p["spec"]["nodeName"] for p in workers}
    zones = {env.cluster.core.read_node(n).metadata.labels[ZONE_LABEL] for n in nodes}
    assert len(workers) == 4 and len(zones) == 1, (nodes, zones)
    placed = {rj["name"]: rj["topology_placement"] for rj in result["replicated_jobs"]}
    assert placed["workers"].startswith("kubernetes.io/hostname: ") and all(
        n in placed["workers"] for n in nodes
    ), placed
    template = jobset["spec"]["replicatedJobs"][1]["template"]["spec"]["template"]
    assert template["metadata"]["annotations"]["kueue.x-k8s.io/podset-required-topology"] == ZONE_LABEL
    in_result_line = '"topology_placement": "kubernetes.io/hostname: '
    assert in_result_line in run.output, run.output[-6000:]
    # The task's Kueue view shows the workers' Job placed where the result says.
    run_id = jobset["metadata"]["annotations"][RUN_ID_LABEL]
    panels = task_panels(KueueHook(), [env.namespace], "tas_jobset", run_id, "gang", -1)
    by_replicated = {p.parent.part: p for p in panels if p.parent}
    assert by_replicated["workers"].placement == placed["workers"], panels
    assert f"placed on {placed['workers']}" in task_page("gang", panels)
