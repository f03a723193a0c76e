"""What a Workload asks for and what its admission holds, read from spec.podSets and status.admission."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_kueue_provider.kueue.progress import workload_admission as admission


def _status(*assignments: dict[str, Any]) -> dict[str, Any]:
    return {"admission": {"clusterQueue": "cq", "podSetAssignments": list(assignments)}}


def test_pods_are_summed_over_pod_sets_and_the_minimum_is_the_first_pod_sets() -> None:
    spec = {"podSets": [{"name": "coordinator", "count": 1, "minCount": 1}, {"name": "workers", "count": 8}]}
    assert admission.pods_requested(spec) == 9
    assert admission.min_pods(spec) == 1
    assert admission.min_pods({"podSets": [{"count": 4}]}) is None
    assert admission.pods_requested({"podSets": "garbage"}) == 0 and admission.min_pods({}) is None


def test_admitted_pods_are_unknown_without_an_admission_or_a_count() -> None:
    assert admission.admitted_pods(_status({"count": 3}, {"count": 5})) == 8
    assert admission.admitted_pods({}) is None
    assert admission.admitted_pods(_status({"count": 3}, {"flavors": {}})) is None


def test_flavors_merge_over_pod_sets() -> None:
    status = _status({"flavors": {"cpu": "spot"}}, {"flavors": {"cpu": "spot", "nvidia.com/gpu": "a100"}})
    assert admission.flavors(status) == {"cpu": "spot", "nvidia.com/gpu": "a100"}


@pytest.mark.parametrize(
    ("assignments", "expected"),
    [
        ([{"count": 4, "resourceUsage": {"cpu": "2"}}], 0.5),
        ([{"count": 4, "resourceUsage": {"cpu": "2"}}, {"count": 1, "resourceUsage": {"cpu": "500m"}}], 0.5),
        ([{"count": 0, "resourceUsage": {"cpu": "2"}}], None),  # no pods: nothing per pod
        ([{"count": 2, "resourceUsage": {"memory": "1Gi"}}], None),  # no CPU in the admission
        ([{"count": 2, "resourceUsage": {"cpu": "two"}}], None),  # a quantity that does not parse
    ],
)
def test_cpu_per_pod(assignments: list[dict[str, Any]], expected: float | None) -> None:
    assert admission.cpu_per_pod(_status(*assignments)) == expected


def test_reclaimable_pods_and_the_checks_not_ready_yet() -> None:
    status = {
        "reclaimablePods": [{"name": "main", "count": 3}, {"name": "x", "count": True}],
        "admissionChecks": [
            {"name": "prov", "state": "Pending", "message": "waiting for nodes"},
            {"name": "ok", "state": "Ready"},
            {"name": "retry"},
        ],
    }
    assert admission.reclaimable_pods(status) == 3
    assert admission.pending_checks(status) == (("prov", "Pending: waiting for nodes"), ("retry", "Pending"))
