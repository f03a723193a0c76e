from __future__ import annotations

import copy
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from airflow_kueue_provider.kueue.progress.workload_state import (
    WorkloadPhase,
    WorkloadState,
    workload_state_from_dict,
)

FIXTURES = Path(__file__).parents[1] / "fixtures" / "workloads"
T0 = "2026-05-01T10:00:00Z"
T1 = "2026-05-01T10:00:41Z"
T2 = "2026-05-01T10:05:00Z"


def condition(type_: str, status: str, reason: str, message: str = "", at: str = T1) -> dict[str, Any]:
    return {
        "type": type_,
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": at,
        "observedGeneration": 1,
    }


ADMISSION = {
    "clusterQueue": "batch-cluster-queue",
    "podSetAssignments": [
        {
            "name": "main",
            "count": 4,
            "flavors": {"cpu": "default-spot-flavor", "memory": "default-spot-flavor"},
            "resourceUsage": {"cpu": "4", "memory": "8Gi"},
        }
    ],
}
QUOTA_RESERVED = condition(
    "QuotaReserved", "True", "QuotaReserved", "Quota reserved in ClusterQueue batch-cluster-queue"
)
ADMITTED = condition("Admitted", "True", "Admitted", "The workload is admitted")


def workload(
    conditions: list[dict[str, Any]],
    *,
    admission: dict[str, Any] | None = None,
    api_version: str = "kueue.x-k8s.io/v1beta2",
    **status: Any,
) -> dict[str, Any]:
    """A Workload as Kueue writes it for a batch/v1 Job."""
    body: dict[str, Any] = {
        "apiVersion": api_version,
        "kind": "Workload",
        "metadata": {
            "name": "job-shards-3f2a1-8c1e4",
            "namespace": "analytics",
            "creationTimestamp": T0,
            "labels": {"kueue.x-k8s.io/job-uid": "7d9c0b6e-2f4e-4a57-9d0c-2f1f5d7e9a11"},
            "ownerReferences": [
                {"apiVersion": "batch/v1", "kind": "Job", "name": "shards-3f2a1", "controller": True}
            ],
        },
        "spec": {
            "active": True,
            "queueName": "analytics-queue",
            "priority": 100,
            "priorityClassRef": {
                "group": "kueue.x-k8s.io",
                "kind": "WorkloadPriorityClass",
                "name": "nightly",
            },
            "podSets": [
                {"name": "main", "count": 4, "template": {"spec": {"containers": [{"name": "main"}]}}}
            ],
        },
        "status": {"conditions": conditions, **status},
    }
    if admission is not None:
        body["status"]["admission"] = admission
    return body


PENDING_MESSAGE = (
    "couldn't assign flavors to pod set main: "
    "insufficient unused quota for cpu in flavor default-spot-flavor, 2 more needed"
)
PREEMPTED_MESSAGE = (
    "Preempted to accommodate a workload (UID: 5c1b, JobUID: 9e2d) due to prioritization in the ClusterQueue"
)

CASES: dict[str, tuple[dict[str, Any], WorkloadPhase]] = {
    "new-without-status": (workload([]), WorkloadPhase.Queued),
    "pending": (
        workload([condition("QuotaReserved", "False", "Pending", PENDING_MESSAGE)]),
        WorkloadPhase.Queued,
    ),
    "inadmissible": (
        workload(
            [condition("QuotaReserved", "False", "Inadmissible", "LocalQueue analytics-queue doesn't exist")]
        ),
        WorkloadPhase.Queued,
    ),
    "quota-reserved-waiting-for-checks": (
        workload(
            [
                QUOTA_RESERVED,
                condition("Admitted", "False", "UnsatisfiedChecks", "The workload has not all checks"),
            ],
            admission=ADMISSION,
            admissionChecks=[{"name": "prov", "state": "Pending", "message": "", "lastTransitionTime": T1}],
        ),
        WorkloadPhase.QuotaReserved,
    ),
    "admitted": (workload([QUOTA_RESERVED, ADMITTED], admission=ADMISSION), WorkloadPhase.Admitted),
    "running-pods-ready": (
        workload(
            [
                QUOTA_RESERVED,
                ADMITTED,
                condition("PodsReady", "True", "Started", "All pods reached readiness"),
            ],
            admission=ADMISSION,
        ),
        WorkloadPhase.Running,
    ),
    "evicted-pods-ready-timeout": (
        workload(
            [
                condition("QuotaReserved", "False", "Pending", "The workload is requeued", at=T2),
                condition("Evicted", "True", "PodsReadyTimeout", "Exceeded the PodsReady timeout", at=T2),
                condition("Requeued", "False", "PodsReadyTimeout", "Exceeded the PodsReady timeout", at=T2),
                condition("Admitted", "False", "NoReservation", "The workload has no reservation", at=T2),
            ],
            requeueState={"count": 2, "requeueAt": "2026-05-01T10:07:00Z"},
            schedulingStats={
                "evictions": [{"reason": "PodsReadyTimeout", "underlyingCause": "", "count": 2}]
            },
        ),
        WorkloadPhase.Evicted,
    ),
    "preempted": (
        workload(
            [
                QUOTA_RESERVED,
                ADMITTED,
                condition("Evicted", "True", "Preempted", PREEMPTED_MESSAGE, at=T2),
                condition("Preempted", "True", "InClusterQueue", PREEMPTED_MESSAGE, at=T2),
            ],
            admission=ADMISSION,
            schedulingStats={
                "evictions": [
                    {"reason": "Preempted", "underlyingCause": "InClusterQueue", "count": 1},
                    {"reason": "PodsReadyTimeout", "underlyingCause": "", "count": 1},
                ]
            },
        ),
        WorkloadPhase.Preempted,
    ),
    "readmitted-after-eviction": (
        workload(
            [
                condition("Evicted", "False", "QuotaReserved", "Previously: " + PREEMPTED_MESSAGE, at=T2),
                condition("Preempted", "False", "QuotaReserved", "Previously: " + PREEMPTED_MESSAGE, at=T2),
                QUOTA_RESERVED,
                ADMITTED,
            ],
            admission=ADMISSION,
            schedulingStats={
                "evictions": [{"reason": "Preempted", "underlyingCause": "InClusterQueue", "count": 1}]
            },
        ),
        WorkloadPhase.Admitted,
    ),
    "succeeded": (
        workload(
            [
                condition("Finished", "True", "Succeeded", "Job finished successfully", at=T2),
                QUOTA_RESERVED,
                ADMITTED,
            ],
            admission=ADMISSION,
        ),
        WorkloadPhase.Succeeded,
    ),
    "failed": (
        workload(
            [
                QUOTA_RESERVED,
                ADMITTED,
                condition("Finished", "True", "Failed", "Job has reached the specified backoff limit", at=T2),
            ],
            admission=ADMISSION,
        ),
        WorkloadPhase.Failed,
    ),
    "finished-out-of-sync": (
        workload(
            [
                condition(
                    "Finished", "True", "OutOfSync", "The prebuilt workload is out of sync with its user job"
                )
            ]
        ),
        WorkloadPhase.Failed,
    ),
    "finished-false-is-not-finished": (
        workload(
            [QUOTA_RESERVED, ADMITTED, condition("Finished", "False", "Running", "")], admission=ADMISSION
        ),
        WorkloadPhase.Admitted,
    ),
}


@pytest.mark.parametrize(("body", "expected"), list(CASES.values()), ids=list(CASES))
def test_phase(body: dict[str, Any], expected: WorkloadPhase) -> None:
    assert workload_state_from_dict(body).phase is expected


@pytest.mark.parametrize(("body", "expected"), list(CASES.values()), ids=list(CASES))
def test_phase_does_not_depend_on_condition_order(body: dict[str, Any], expected: WorkloadPhase) -> None:
    reversed_body = copy.deepcopy(body)
    reversed_body["status"]["conditions"].reverse()
    assert workload_state_from_dict(reversed_body).phase is expected


def _fixture_files() -> list[Path]:
    return sorted(FIXTURES.glob("*.json")) if FIXTURES.is_dir() else []


@pytest.mark.parametrize("path", _fixture_files(), ids=lambda path: path.stem)
def test_recorded_workloads(path: Path) -> None:
    """Workloads recorded from a real cluster: {"workload": {...}, "expected_phase": "..."}."""
    recorded = json.loads(path.read_text())
    state = workload_state_from_dict(recorded["workload"])
    assert state.phase == WorkloadPhase(recorded["expected_phase"])
    assert state.describe()


def test_pending_fields_and_description() -> None:
    state = workload_state_from_dict(CASES["pending"][0])
    assert state.reason == "Pending"
    assert state.message == PENDING_MESSAGE
    assert state.queue_name == "analytics-queue"
    assert state.cluster_queue is None
    assert state.flavors == {}
    assert not state.inadmissible
    assert state.workload_name == "job-shards-3f2a1-8c1e4"
    assert state.priority_class == "nightly"
    assert state.created_at == datetime(2026, 5, 1, 10, 0, tzinfo=UTC)
    assert state.describe() == f"queued in analytics-queue (Pending: {PENDING_MESSAGE})"


def test_inadmissible() -> None:
    state = workload_state_from_dict(CASES["inadmissible"][0])
    assert state.inadmissible
    assert state.phase is WorkloadPhase.Queued
    assert (
        state.describe()
        == "inadmissible in analytics-queue (Inadmissible: LocalQueue analytics-queue doesn't exist)"
    )


def test_admitted_fields_and_description() -> None:
    state = workload_state_from_dict(CASES["admitted"][0])
    assert state.cluster_queue == "batch-cluster-queue"
    assert state.flavors == {"cpu": "default-spot-flavor", "memory": "default-spot-flavor"}
    assert state.reason == "Admitted"
    assert state.admitted_at == datetime(2026, 5, 1, 10, 0, 41, tzinfo=UTC)
    assert state.describe() == (
        "admitted to batch-cluster-queue [cpu: default-spot-flavor, memory: default-spot-flavor]"
    )


def test_a_partial_admission_says_how_many_pods_it_got() -> None:
    partial = {**ADMISSION, "podSetAssignments": [{**ADMISSION["podSetAssignments"][0], "count": 3}]}
    state = workload_state_from_dict(workload([QUOTA_RESERVED, ADMITTED], admission=partial))
    assert (state.pods_requested, state.pods_admitted, state.partially_admitted) == (4, 3, True)
    assert state.describe().endswith(", 3 of 4 pods (partial admission)")
    full = workload_state_from_dict(CASES["admitted"][0])
    assert (full.pods_admitted, full.partially_admitted) == (4, False)
    queued = workload_state_from_dict(workload([]))
    assert (queued.pods_requested, queued.pods_admitted) == (4, None)


def test_the_cause_of_a_preemption_is_kept_after_the_workload_is_admitted_again() -> None:
    previously = condition(
        "Preempted",
        "False",
        "QuotaReserved",
        "Previously: Preempted to accommodate a workload (UID: u, JobUID: j) due to Fair Sharing within the "
        "cohort; preemptor path: /dept/b/cq-b; preemptee path: /dept/a/cq-a",
    )
    stats = {"evictions": [{"reason": "Preempted", "underlyingCause": "", "count": 1}]}
    once = workload_state_from_dict(workload([QUOTA_RESERVED, ADMITTED, previously], schedulingStats=stats))
    assert once.eviction_causes == (("Preempted/InCohortFairSharing", 1),)
    stats["evictions"][0]["count"] = 3
    thrice = workload_state_from_dict(workload([QUOTA_RESERVED, ADMITTED, previously], schedulingStats=stats))
    assert thrice.eviction_causes == (("Preempted (last InCohortFairSharing)", 3),)
    unknown = workload_state_from_dict(workload([QUOTA_RESERVED, ADMITTED], schedulingStats=stats))
    assert unknown.eviction_causes == (("Preempted", 3),)


def test_quota_reserved_description() -> None:
    state = workload_state_from_dict(CASES["quota-reserved-waiting-for-checks"][0])
    assert state.describe().startswith("quota reserved in batch-cluster-queue [cpu: default-spot-flavor")


def test_with_running_upgrades_only_admitted() -> None:
    admitted = workload_state_from_dict(CASES["admitted"][0])
    assert admitted.with_running(3).phase is WorkloadPhase.Running
    assert admitted.with_running(0) is admitted
    assert admitted.with_running(3).describe().startswith("running in batch-cluster-queue [cpu:")
    queued = workload_state_from_dict(CASES["pending"][0])
    assert queued.with_running(5) is queued
    succeeded = workload_state_from_dict(CASES["succeeded"][0])
    assert succeeded.with_running(1).phase is WorkloadPhase.Succeeded


def test_evicted_counts_and_requeue() -> None:
    state = workload_state_from_dict(CASES["evicted-pods-ready-timeout"][0])
    assert state.reason == "PodsReadyTimeout"
    assert state.requeue_count == 2
    assert state.requeue_at == datetime(2026, 5, 1, 10, 7, tzinfo=UTC)
    assert state.eviction_count == 2
    assert (
        state.describe() == "evicted (PodsReadyTimeout: Exceeded the PodsReady timeout), 2 eviction(s) so far"
    )
    assert state.eviction_causes == (("PodsReadyTimeout", 2),)
    preempted = workload_state_from_dict(CASES["preempted"][0])
    assert preempted.eviction_causes == (("PodsReadyTimeout", 1), ("Preempted/InClusterQueue", 1))


def test_preempted_uses_evicted_condition_and_reports_preemption_reason() -> None:
    state = workload_state_from_dict(CASES["preempted"][0])
    assert state.reason == "Preempted"
    assert state.message == PREEMPTED_MESSAGE
    assert state.preemption_reason == "InClusterQueue"
    assert state.eviction_count == 2
    assert state.describe().startswith("evicted (Preempted: Preempted to accommodate")
    assert "preemption: InClusterQueue" in state.describe()


def test_readmitted_keeps_eviction_history_but_not_preemption() -> None:
    state = workload_state_from_dict(CASES["readmitted-after-eviction"][0])
    assert state.eviction_count == 1
    assert state.preemption_reason is None


def test_finished_descriptions() -> None:
    assert workload_state_from_dict(CASES["succeeded"][0]).describe() == (
        "finished (Succeeded: Job finished successfully)"
    )
    failed = workload_state_from_dict(CASES["failed"][0])
    assert failed.is_finished
    assert failed.describe() == "failed (Failed: Job has reached the specified backoff limit)"


def test_v1beta1_priority_class_name() -> None:
    body = workload([QUOTA_RESERVED, ADMITTED], admission=ADMISSION, api_version="kueue.x-k8s.io/v1beta1")
    del body["spec"]["priorityClassRef"]
    body["spec"]["priorityClassName"] = "nightly-v1beta1"
    body["spec"]["priorityClassSource"] = "kueue.x-k8s.io/workloadpriorityclass"
    state = workload_state_from_dict(body)
    assert state.priority_class == "nightly-v1beta1"
    assert state.phase is WorkloadPhase.Admitted


def test_flavors_merge_over_pod_sets() -> None:
    admission = {
        "clusterQueue": "gpu-cq",
        "podSetAssignments": [
            {"name": "driver", "flavors": {"cpu": "on-demand"}},
            {"name": "workers", "flavors": {"nvidia.com/gpu": "a100-spot", "memory": "on-demand"}},
        ],
    }
    state = workload_state_from_dict(workload([QUOTA_RESERVED, ADMITTED], admission=admission))
    assert state.flavors == {"cpu": "on-demand", "nvidia.com/gpu": "a100-spot", "memory": "on-demand"}
    assert state.flavors_text() == "cpu: on-demand, memory: on-demand, nvidia.com/gpu: a100-spot"


def test_malformed_input_is_tolerated() -> None:
    state = workload_state_from_dict(
        {
            "metadata": {"name": "wl", "creationTimestamp": "not a time"},
            "status": {
                "conditions": ["junk", {"status": "True"}, {"type": "Admitted", "status": "True"}],
                "requeueState": {"count": "3"},
                "schedulingStats": {"evictions": [{"count": True}, "junk"]},
                "admission": {"podSetAssignments": "junk"},
            },
        }
    )
    assert state.phase is WorkloadPhase.Admitted
    assert state.requeue_count == 0
    assert state.eviction_count == 0
    assert state.created_at is None
    assert state.describe() == "admitted to ?"


def test_long_messages_are_shortened_in_describe() -> None:
    body = workload([condition("QuotaReserved", "False", "Pending", "x" * 1000)])
    state = WorkloadState.from_workload(body)
    assert state.message == "x" * 1000
    assert len(state.describe()) < 260


def test_phase_values_equal_names() -> None:
    for phase in WorkloadPhase:
        assert phase.value == phase.name
        assert str(phase) == phase.name
    assert {phase for phase in WorkloadPhase if phase.is_terminal} == {
        WorkloadPhase.Succeeded,
        WorkloadPhase.Failed,
    }


def test_a_multikueue_workload_names_its_worker_cluster_once_dispatched() -> None:
    state = workload_state_from_dict(
        workload([QUOTA_RESERVED, ADMITTED], admission=ADMISSION, clusterName="worker-2")
    )
    assert state.worker_cluster == "worker-2"
    assert state.describe().endswith(", on worker cluster worker-2 (MultiKueue)")
    assert (
        workload_state_from_dict(workload([QUOTA_RESERVED, ADMITTED], admission=ADMISSION)).worker_cluster
        is None
    )


def test_quota_reserved_lists_the_admission_checks_it_waits_for() -> None:
    checks = [
        {"name": "multikueue", "state": "Pending", "message": 'The workload got reservation on "worker-2"'},
        {"name": "provisioning", "state": "Ready", "message": ""},
    ]
    state = workload_state_from_dict(workload([QUOTA_RESERVED], admission=ADMISSION, admissionChecks=checks))
    assert state.phase is WorkloadPhase.QuotaReserved
    assert state.pending_checks == (("multikueue", 'Pending: The workload got reservation on "worker-2"'),)
    assert state.describe().endswith(
        'waiting for admission checks (multikueue: Pending: The workload got reservation on "worker-2")'
    )
