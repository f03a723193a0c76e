"""LocalQueues joined with their ClusterQueue's quota and usage."""

from __future__ import annotations

from typing import Any

from airflow_kueue_provider.plugins.views.queue_overview import ResourceUse, queue_rows

ACTIVE = {"conditions": [{"type": "Active", "status": "True"}]}


def local_queue(ns: str, name: str, cq: str, **status: Any) -> dict[str, Any]:
    return {
        "metadata": {"namespace": ns, "name": name},
        "spec": {"clusterQueue": cq},
        "status": {**ACTIVE, **status},
    }


CLUSTER_QUEUE = {
    "metadata": {"name": "risk-cq"},
    "spec": {
        "cohortName": "monte-carlo",
        "resourceGroups": [
            {
                "coveredResources": ["cpu", "memory"],
                "flavors": [
                    {
                        "name": "spot",
                        "resources": [
                            {"name": "cpu", "nominalQuota": "80"},
                            {"name": "memory", "nominalQuota": "320Gi"},
                        ],
                    }
                ],
            }
        ],
    },
    "status": {
        **ACTIVE,
        "pendingWorkloads": 3,
        "flavorsReservation": [
            {"name": "spot", "resources": [{"name": "cpu", "total": "84", "borrowed": "4"}]}
        ],
    },
}


def test_rows_join_local_and_cluster_queues_sorted() -> None:
    rows = queue_rows(
        [
            local_queue(
                "team-b", "lq", "risk-cq", pendingWorkloads=1, admittedWorkloads=2, reservingWorkloads=2
            ),
            local_queue("team-a", "lq", "missing-cq"),
        ],
        [CLUSTER_QUEUE],
    )
    assert [(r.namespace, r.local_queue) for r in rows] == [("team-a", "lq"), ("team-b", "lq")]
    orphan, risk = rows
    assert orphan.cluster_queue_pending is None and orphan.usage == () and orphan.cohort is None
    assert (risk.pending, risk.reserving, risk.admitted, risk.cluster_queue_pending) == (1, 2, 2, 3)
    assert risk.cohort == "monte-carlo" and risk.active
    assert risk.usage == (
        ResourceUse("spot", "cpu", "80", "84", "4"),
        ResourceUse("spot", "memory", "320Gi", "0", "0"),
    )
    assert risk.to_dict()["usage"][0] == {
        "flavor": "spot",
        "resource": "cpu",
        "nominal": "80",
        "reserved": "84",
        "borrowed": "4",
    }


def test_an_inactive_cluster_queue_makes_the_row_inactive() -> None:
    stopped = {**CLUSTER_QUEUE, "status": {"conditions": [{"type": "Active", "status": "False"}]}}
    (row,) = queue_rows([local_queue("ns", "lq", "risk-cq")], [stopped])
    assert not row.active
