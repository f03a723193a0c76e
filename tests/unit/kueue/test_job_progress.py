"""Outcome rules and progress lines of a Job + Workload."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from airflow_kueue_provider.kueue.job_progress import (
    outcome_of,
    progress_line,
    released_line,
    result_of,
    view_of,
)
from airflow_kueue_provider.kueue.progress.released_quota import ReleasedQuota


def job(status: dict[str, Any] | None = None, completions: int = 4) -> dict[str, Any]:
    return {
        "metadata": {"name": "j", "namespace": "ns", "creationTimestamp": "2026-11-30T10:00:00Z"},
        "spec": {"completions": completions},
        "status": status or {},
    }


def cond(
    ctype: str, reason: str = "", status: str = "True", at: str = "2026-11-30T10:05:00Z"
) -> dict[str, Any]:
    return {
        "type": ctype,
        "status": status,
        "reason": reason,
        "message": f"{reason} message",
        "lastTransitionTime": at,
    }


def workload(*conditions: dict[str, Any], cq: str | None = None) -> dict[str, Any]:
    status: dict[str, Any] = {"conditions": list(conditions)}
    if cq:
        status["admission"] = {"clusterQueue": cq, "podSetAssignments": [{"flavors": {"cpu": "spot"}}]}
    return {
        "metadata": {"name": "job-j-abcde", "namespace": "ns"},
        "spec": {"queueName": "lq"},
        "status": status,
    }


ADMITTED = workload(
    cond("QuotaReserved", "QuotaReserved", at="2026-11-30T10:01:00Z"),
    cond("Admitted", "Admitted", at="2026-11-30T10:01:00Z"),
    cq="cq",
)


@pytest.mark.parametrize(
    ("status", "max_failed", "expected"),
    [
        ({}, None, None),
        ({"completedIndexes": "0-3", "conditions": [cond("Complete")]}, None, "success"),
        (
            {
                "failedIndexes": "1",
                "completedIndexes": "0,2,3",
                "conditions": [cond("Failed", "FailedIndexes")],
            },
            1,
            "success",
        ),
        (
            {
                "failedIndexes": "1",
                "completedIndexes": "0,2,3",
                "conditions": [cond("Failed", "FailedIndexes")],
            },
            None,
            "failed",
        ),
        ({"failedIndexes": "1,2", "active": 2}, 1, "failed"),
        ({"failedIndexes": "1", "active": 2}, 1, None),
        ({"conditions": [cond("Failed", "DeadlineExceeded")]}, 5, "failed"),
        ({"conditions": [cond("Complete", status="False")]}, None, None),
    ],
)
def test_outcome_rules(status: dict[str, Any], max_failed: int | None, expected: str | None) -> None:
    outcome = outcome_of(view_of(job(status), ADMITTED), max_failed)
    assert (outcome.status if outcome else None) == expected


def test_failure_names_the_failed_indexes() -> None:
    outcome = outcome_of(view_of(job({"failedIndexes": "3,7", "active": 1}, completions=20), ADMITTED), 1)
    assert outcome is not None and "3,7" in outcome.message and "max_failed_indexes=1" in outcome.message


def test_progress_lines() -> None:
    queued = workload(cond("QuotaReserved", "Pending", status="False"))
    assert progress_line(view_of(job(), None)).startswith("submitted")
    line = progress_line(view_of(job(), queued), (2, 5), 41.2)
    assert line == "queued in lq (position 3, 41 s): Pending message"
    assert progress_line(view_of(job(), ADMITTED)) == "admitted to cq [cpu: spot]"
    running = view_of(job({"active": 2, "completedIndexes": "0", "failedIndexes": "1"}), ADMITTED)
    assert progress_line(running) == "running 1/4 done, 1 failed (1), 2 active"


def test_result_times_come_from_the_objects() -> None:
    done = job({"completedIndexes": "0-3", "conditions": [cond("Complete", at="2026-11-30T10:05:00Z")]})
    view = view_of(done, ADMITTED)
    result = result_of(view, done, datetime(2026, 11, 30, 11, tzinfo=UTC))
    assert result.queued_seconds == 60 and result.running_seconds == 240
    assert result.completed_indexes == "0-3" and result.succeeded == 4 and result.cluster_queue == "cq"
    assert result.finished_at == "2026-11-30T10:05:00+00:00", "when it ended: no Job read for it"
    running = result_of(view_of(job(), ADMITTED), job(), datetime(2026, 11, 30, 11, tzinfo=UTC))
    assert running.finished_at is None


def test_requeued_after_preemption_line_from_a_recorded_workload() -> None:
    import json
    from pathlib import Path

    recorded = Path(__file__).parent / "fixtures" / "workloads" / "preempted-requeued.json"
    wl = json.loads(recorded.read_text())["workload"]
    line = progress_line(view_of(job({"active": 0}), wl), (0, 0), None)
    assert line == "requeued in lq after eviction (Preempted: InClusterQueue, 1 so far) (position 1)", line


def test_admission_in_the_same_second_is_zero_seconds_queued_not_unknown() -> None:
    same_second = workload(cond("Admitted", "Admitted", at="2026-11-30T10:00:00Z"), cq="cq")
    view = view_of(job(), same_second)
    result = result_of(view, job(), datetime(2026, 11, 30, 10, 0, 5, tzinfo=UTC))
    assert result.queued_seconds == 0 and result.running_seconds == 5


def _multikueue_job() -> dict[str, Any]:
    manager_job = job()
    manager_job["spec"]["managedBy"] = "kueue.x-k8s.io/multikueue"
    return manager_job


def test_a_multikueue_job_admitted_without_a_flavor_fails_naming_its_requests() -> None:
    no_flavor = workload(cond("QuotaReserved", "QuotaReserved"), cond("Admitted", "Admitted"))
    no_flavor["status"]["admission"] = {"clusterQueue": "cq", "podSetAssignments": [{"count": 2}]}
    outcome = outcome_of(view_of(_multikueue_job(), no_flavor), None)
    assert outcome is not None and outcome.status == "failed"
    assert "without being dispatched to a worker cluster" in outcome.message
    assert "resources={'requests'" in outcome.message
    # The same admission on one cluster is an ordinary start, and a dispatched Job is followed as usual.
    assert outcome_of(view_of(job(), no_flavor), None) is None
    dispatched = {**ADMITTED, "status": {**ADMITTED["status"], "clusterName": "worker-1"}}
    assert outcome_of(view_of(_multikueue_job(), dispatched), None) is None
    assert outcome_of(view_of(_multikueue_job(), ADMITTED), None) is None


def test_the_running_line_names_the_worker_cluster() -> None:
    dispatched = {**ADMITTED, "status": {**ADMITTED["status"], "clusterName": "worker-2"}}
    line = progress_line(view_of(job({"active": 2, "completedIndexes": "0"}), dispatched))
    assert line.endswith("(on worker cluster worker-2)"), line


def test_the_running_line_says_when_kueue_takes_the_tails_quota_back() -> None:
    tail = {**ADMITTED, "status": {**ADMITTED["status"], "reclaimablePods": [{"name": "main", "count": 3}]}}
    line = progress_line(view_of(job({"active": 1, "completedIndexes": "0-2"}), tail))
    assert line.endswith("(quota of 3 pod(s) handed back: fewer indexes left than pods)"), line


def test_the_result_and_the_last_line_give_the_quota_released_up_to_the_jobs_end() -> None:
    admission = {
        "clusterQueue": "cq",
        "podSetAssignments": [{"name": "main", "count": 4, "resourceUsage": {"cpu": "2", "memory": "4Gi"}}],
    }
    tail = {**ADMITTED, "status": {**ADMITTED["status"], "admission": admission}}
    view = view_of(job({"active": 1, "completedIndexes": "0-2"}), tail)
    assert view.workload is not None and view.workload.cpu_per_pod == 0.5
    seen = datetime(2026, 11, 30, 10, 4, 0, tzinfo=UTC).timestamp()
    meter = ReleasedQuota().observe(seen, 3, view.workload.cpu_per_pod)
    done = view_of(job({"completedIndexes": "0-3", "conditions": [cond("Complete")]}), tail)  # at 10:05
    later = datetime(2026, 11, 30, 11, 0, tzinfo=UTC)
    result = result_of(done, job({"completedIndexes": "0-3"}), later, meter)
    assert (result.quota_released_pod_seconds, result.quota_released_cpu_seconds) == (180.0, 90.0)
    line = released_line(meter, done, later)
    assert line is not None and line.startswith("Kueue released 90.0 CPU-seconds, 180.0 pod-seconds"), line
    assert released_line(ReleasedQuota(), done, later) is None
    assert result_of(done, job(), later).quota_released_pod_seconds is None  # not measured


def test_a_job_short_of_quota_says_it_waits_for_all_its_pods_and_what_lets_it_start_with_fewer() -> None:
    from airflow_kueue_provider.kueue.job_progress import waiting_line
    from airflow_kueue_provider.kueue.progress.workload_state import (
        workload_state_from_dict as workload_state,
    )

    pending = cond("QuotaReserved", "Pending", status="False")
    pending["message"] = "couldn't assign flavors to pod set main: insufficient quota for cpu in flavor spot"
    gang = workload(pending)
    gang["spec"]["podSets"] = [{"name": "main", "count": 50}]
    line = waiting_line(workload_state(gang), None, 12.0, "job-j-abcde")
    assert line is not None and line.endswith(
        "(it starts when the quota of all 50 pods is free at once, in one flavor; min_parallelism lets Kueue "
        "start it with fewer)"
    ), line
    partial = workload(pending)
    partial["spec"]["podSets"] = [{"name": "main", "count": 50, "minCount": 25}]
    assert "min_parallelism" not in (waiting_line(workload_state(partial), None, 12.0, "job-j-abcde") or "")
    other = workload(cond("QuotaReserved", "Pending", status="False"))
    other["spec"]["podSets"] = [{"name": "main", "count": 50}]
    assert "min_parallelism" not in (waiting_line(workload_state(other), None, 12.0, "job-j-abcde") or "")
    jobset = workload(pending)
    jobset["spec"]["podSets"] = [{"name": "driver", "count": 1}, {"name": "workers", "count": 8}]
    assert "min_parallelism" not in (waiting_line(workload_state(jobset), None, 12.0, "jobset-j") or "")
