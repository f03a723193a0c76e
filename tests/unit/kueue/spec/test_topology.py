"""``topology=`` and the placement Kueue's topology-aware scheduling records (v1beta2 slices)."""

from __future__ import annotations

import pytest

from airflow_kueue_provider.kueue.names import PREFERRED_TOPOLOGY_ANNOTATION, REQUIRED_TOPOLOGY_ANNOTATION
from airflow_kueue_provider.kueue.progress.workload_state import workload_state_from_dict
from airflow_kueue_provider.kueue.spec.topology import (
    InvalidTopology,
    TopologyPlacement,
    TopologyRequest,
    placements_of,
    with_topology,
)

ZONE, HOST = "topology.kubernetes.io/zone", "kubernetes.io/hostname"


def test_a_request_is_a_level_or_a_mode_and_a_level() -> None:
    assert TopologyRequest.from_param(ZONE) == TopologyRequest(ZONE, required=True)
    assert TopologyRequest.from_param({"preferred": HOST}) == TopologyRequest(HOST, required=False)
    assert TopologyRequest.from_param(None) is None
    assert TopologyRequest(ZONE).pod_annotations() == {REQUIRED_TOPOLOGY_ANNOTATION: ZONE}
    assert TopologyRequest(HOST, False).pod_annotations() == {PREFERRED_TOPOLOGY_ANNOTATION: HOST}
    for bad, says in (
        ("zone name with spaces", "not a node label key"),
        ({"required": ZONE, "preferred": HOST}, "give a node label key"),
        ({"within": ZONE}, "give a node label key"),
        (3, "give a node label key"),
    ):
        with pytest.raises(InvalidTopology, match=says):
            TopologyRequest.from_param(bad)  # type: ignore[arg-type]


def placement_of(status: dict[str, object]) -> TopologyPlacement | None:
    """The placement a Job's Workload state reports (its one pod set's)."""
    return workload_state_from_dict({"metadata": {"name": "w"}, "spec": {}, "status": status}).topology


def _status(topology: dict[str, object]) -> dict[str, object]:
    return {
        "admission": {
            "clusterQueue": "cq",
            "podSetAssignments": [{"name": "main", "count": 4, "topologyAssignment": topology}],
        }
    }


def test_the_placement_is_read_from_compressed_slices() -> None:
    status = _status(
        {
            "levels": [ZONE, HOST],
            "slices": [
                {
                    "domainCount": 2,
                    "valuesPerLevel": [
                        {"universal": "westeurope-1"},
                        {"individual": {"prefix": "aks-spot-", "roots": ["000000", "000003"]}},
                    ],
                    "podCounts": {"individual": [3, 1]},
                },
                {
                    "domainCount": 1,
                    "valuesPerLevel": [{"universal": "westeurope-2"}, {"universal": "aks-spot-000001"}],
                    "podCounts": {"universal": 2},
                },
            ],
        }
    )
    placement = placement_of(status)
    assert placement is not None and placement.levels == (ZONE, HOST)
    assert placement.domains == (
        (("westeurope-1", "aks-spot-000000"), 3),
        (("westeurope-1", "aks-spot-000003"), 1),
        (("westeurope-2", "aks-spot-000001"), 2),
    )
    assert placement.describe() == (
        f"{ZONE}/{HOST}: westeurope-1/aks-spot-000000 (3), westeurope-1/aks-spot-000003 (1), "
        "westeurope-2/aks-spot-000001 (2)"
    )
    workload = {"metadata": {"name": "w"}, "spec": {}, "status": {**status, "conditions": []}}
    assert workload_state_from_dict(workload).topology == placement


def test_no_placement_without_tas_and_none_from_a_malformed_one() -> None:
    assert placement_of({}) is None
    assert placement_of({"admission": {"podSetAssignments": [{"name": "main", "count": 2}]}}) is None
    broken = {
        "levels": [HOST],
        "slices": [
            {"domainCount": 2, "valuesPerLevel": [{"universal": "n"}], "podCounts": {"individual": [1]}}
        ],
    }
    assert placement_of(_status(broken)) is None


def test_a_long_placement_is_shortened() -> None:
    slices = [
        {
            "domainCount": 12,
            "valuesPerLevel": [{"individual": {"roots": [f"n{i}" for i in range(12)]}}],
            "podCounts": {"universal": 1},
        }
    ]
    placement = placement_of(_status({"levels": [HOST], "slices": slices}))
    assert placement is not None and placement.describe().endswith("n7 (1) and 4 more")


def _one_host(host: str, pods: int) -> dict[str, object]:
    slices = [{"domainCount": 1, "valuesPerLevel": [{"universal": host}], "podCounts": {"universal": pods}}]
    return {"levels": [HOST], "slices": slices}


def test_each_pod_set_of_a_jobset_has_its_own_placement() -> None:
    status = {
        "admission": {
            "clusterQueue": "cq",
            "podSetAssignments": [
                {"name": "coordinator", "count": 1, "topologyAssignment": _one_host("n1", 1)},
                {"name": "workers", "count": 4, "topologyAssignment": _one_host("n2", 4)},
                {"name": "sidecars", "count": 1},  # not topology-aware
            ],
        }
    }
    placements = placements_of(status)
    assert [(name, p.describe()) for name, p in placements] == [
        ("coordinator", f"{HOST}: n1 (1)"),
        ("workers", f"{HOST}: n2 (4)"),
    ]
    state = workload_state_from_dict({"metadata": {"name": "w"}, "spec": {}, "status": status})
    assert state.topology == placements[0][1]  # a Job's one pod set
    assert state.placement_text() == f"coordinator on {HOST}: n1 (1); workers on {HOST}: n2 (4)"
    single = workload_state_from_dict(
        {"metadata": {"name": "w"}, "spec": {}, "status": _status(_one_host("n3", 4))}
    )
    assert single.placement_text() == f"{HOST}: n3 (4)"
    assert (
        workload_state_from_dict({"metadata": {"name": "w"}, "spec": {}, "status": {}}).placement_text()
        is None
    )


def test_topology_and_a_topology_annotation_are_refused_together() -> None:
    request = TopologyRequest(ZONE)
    assert with_topology({"a": "b"}, request) == {"a": "b", REQUIRED_TOPOLOGY_ANNOTATION: ZONE}
    assert with_topology({"a": "b"}, None) == {"a": "b"}
    with pytest.raises(InvalidTopology, match="use topology= alone"):
        with_topology({PREFERRED_TOPOLOGY_ANNOTATION: HOST}, request)
