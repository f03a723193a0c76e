"""``topology=``: Kueue's topology-aware scheduling places all of a task's pods in one domain."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes.client.rest import ApiException

from devcluster.manifests import SPOT_POOL, ZONE_LABEL, fake_node, topology

from ..airflow_runner import AirflowHome
from ..cluster import Cluster, short_id
from .test_indexed_job_queueing import returned_result, write_operator_dag

POOL_LABEL = "devcluster-tas-pool"


@pytest.fixture
def tas_pool(cluster: Cluster) -> Iterator[tuple[str, str]]:
    """Four fake Spot nodes of 16 CPUs of this test alone, two per zone, and the bed's Topology."""
    marker = short_id()
    names = [f"tas-{marker}-{i}" for i in range(4)]
    for i, name in enumerate(names):
        cluster.core.create_node(
            fake_node(name, SPOT_POOL, zone=1 + i // 2, group=i % 2, extra_labels={POOL_LABEL: marker})
        )
    try:
        cluster.kueue_create("topologies", topology())
    except ApiException as exc:
        if exc.status != 409:  # the bed made it
            raise
    yield marker, topology()["metadata"]["name"]
    for name in names:
        cluster.core.delete_node(name)


def test_a_task_that_requires_one_zone_runs_all_its_pods_in_one_zone(
    kueue_env_factory: Any, airflow_home: AirflowHome, tas_pool: tuple[str, str]
) -> None:
    marker, topology_name = tas_pool
    env = kueue_env_factory(node_labels={POOL_LABEL: marker}, topology=topology_name)
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
