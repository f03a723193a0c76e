"""Queue declarations: read, converted from v1beta1 as Kueue does, ordered, and compared with live objects."""

from __future__ import annotations

import pytest

from airflow_kueue_provider.kueue.queues.queue_setup import InvalidQueueDeclaration, drift, read_declarations

V1 = "kueue.x-k8s.io/v1beta1"
V2 = "kueue.x-k8s.io/v1beta2"


def _doc(kind: str, name: str, version: str = V2, **fields: object) -> dict[str, object]:
    metadata: dict[str, object] = {"name": name}
    if kind == "LocalQueue":
        metadata["namespace"] = "team-a"
    return {"apiVersion": version, "kind": kind, "metadata": metadata, **fields}


def test_v1beta1_cluster_queues_are_converted_as_kueue_does() -> None:
    (cq,) = read_declarations(
        [
            _doc(
                "ClusterQueue",
                "cq",
                V1,
                spec={
                    "cohort": "team",
                    "admissionChecks": ["prov"],
                    "flavorFungibility": {"whenCanBorrow": "Borrow", "whenCanPreempt": "Preempt"},
                },
                status={"pendingWorkloads": 3},
            )
        ]
    )
    assert cq.body["apiVersion"] == V2 and "status" not in cq.body
    assert cq.body["spec"] == {
        "cohortName": "team",
        "admissionChecksStrategy": {"admissionChecks": [{"name": "prov"}]},
        "flavorFungibility": {"whenCanBorrow": "MayStopSearch", "whenCanPreempt": "MayStopSearch"},
    }


def test_objects_come_in_dependency_order_parents_before_children() -> None:
    objects = read_declarations(
        [
            _doc("LocalQueue", "lq", spec={"clusterQueue": "cq"}),
            _doc("ClusterQueue", "cq", spec={"cohortName": "team"}),
            _doc("Cohort", "team", spec={"parentName": "dept"}),
            _doc("Cohort", "org", spec={}),
            _doc("Cohort", "dept", spec={"parentName": "org"}),
            _doc("ResourceFlavor", "rf", spec={}),
            None,
            _doc("WorkloadPriorityClass", "high", value=10),
        ]
    )
    assert [o.ref for o in objects] == [
        "ResourceFlavor rf",
        "WorkloadPriorityClass high",
        "Cohort org",
        "Cohort dept",
        "Cohort team",
        "ClusterQueue cq",
        "LocalQueue team-a/lq",
    ]
    assert objects[1].declared() == {"value": 10}


@pytest.mark.parametrize(
    ("doc", "says"),
    [
        (_doc("Workload", "w"), "kind 'Workload' is not declared here"),
        (_doc("ClusterQueue", "cq", "kueue.x-k8s.io/v1alpha1"), "use kueue.x-k8s.io/v1beta2"),
        (_doc("ClusterQueue", "Bad_Name"), "needs metadata.name"),
        ({**_doc("ClusterQueue", "cq"), "metadata": {"name": "cq", "namespace": "x"}}, "cluster-scoped"),
        ({**_doc("LocalQueue", "lq"), "metadata": {"name": "lq"}}, "needs metadata.namespace"),
        ("just text", "not a Kubernetes object"),
    ],
)
def test_what_cannot_be_applied_is_refused_with_the_fix(doc: object, says: str) -> None:
    with pytest.raises(InvalidQueueDeclaration, match=says):
        read_declarations([doc], "queues.yaml")


def test_an_object_declared_twice_is_refused() -> None:
    with pytest.raises(InvalidQueueDeclaration, match="declared twice"):
        read_declarations([_doc("ResourceFlavor", "rf"), _doc("ResourceFlavor", "rf", V1)])


def test_drift_is_about_declared_fields_only() -> None:
    declared = {"spec": {"cohortName": "team", "resourceGroups": [{"flavors": [{"nominalQuota": "8"}]}]}}
    live = {
        "spec": {
            "cohortName": "team",
            "resourceGroups": [{"flavors": [{"nominalQuota": 8, "borrowingLimit": None}]}],
            "stopPolicy": "None",  # a default the server adds: not drift
        },
        "status": {"pendingWorkloads": 4},
    }
    assert drift(declared, live) == []
    live["spec"]["resourceGroups"][0]["flavors"][0]["nominalQuota"] = "64"
    assert drift(declared, live) == [
        "spec.resourceGroups[0].flavors[0].nominalQuota: declared '8', live '64'"
    ]
    live["spec"]["resourceGroups"].append({})
    (line,) = drift(declared, live)
    assert line.startswith("spec.resourceGroups: declared [{'flavors': [{'nominalQuota': '8'}]}], live [")
    assert drift({"spec": {"cohortName": "team"}}, {"spec": {}}) == [
        "spec.cohortName: declared 'team', live None"
    ]
