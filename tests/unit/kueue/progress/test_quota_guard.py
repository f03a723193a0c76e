"""A Job Kueue does not manage never runs outside quota: it waits for its Workload, then goes."""

from __future__ import annotations

from typing import Any

from airflow_kueue_provider.kueue.job_progress import view_of
from airflow_kueue_provider.kueue.progress.quota_guard import unmanaged_verdict

WORKLOAD = {
    "metadata": {"name": "job-x-1", "labels": {"kueue.x-k8s.io/job-uid": "u"}},
    "spec": {"queueName": "lq"},
    "status": {"conditions": []},
}


def job(suspend: bool = True, active: int = 0, finished: str | None = None, **status: Any) -> dict[str, Any]:
    conditions = [{"type": finished, "status": "True"}] if finished else []
    return {
        "metadata": {"name": "x", "namespace": "kube-system", "uid": "u"},
        "spec": {"suspend": suspend, "completions": 4},
        "status": {"active": active, "conditions": conditions, **status},
    }


def test_a_suspended_job_without_workload_waits_then_is_deleted_after_the_timeout() -> None:
    view = view_of(job(), None)
    assert unmanaged_verdict(view, 59.0, 60.0) is None
    verdict = unmanaged_verdict(view, 60.0, 60.0)
    assert verdict is not None and not verdict.running_outside_quota
    assert "workload_timeout=60s" in verdict.message and "no pod ran" in verdict.message
    assert "managedJobsNamespaceSelector" in verdict.message and "kube-system" in verdict.message


def test_pods_running_without_a_workload_are_outside_quota_at_once() -> None:
    verdict = unmanaged_verdict(view_of(job(suspend=False, active=4), None), 0.5, 60.0)
    assert verdict is not None and verdict.running_outside_quota
    assert "outside any quota" in verdict.message


def test_a_managed_or_finished_job_is_left_alone() -> None:
    assert unmanaged_verdict(view_of(job(suspend=False, active=4), WORKLOAD), 600, 60) is None
    assert unmanaged_verdict(view_of(job(finished="Complete"), None), 600, 60) is None


def test_started_is_read_from_the_objects_not_memory() -> None:
    assert not view_of(job(), WORKLOAD).started
    assert view_of(job(suspend=False, startTime="2026-11-30T01:00:00Z"), WORKLOAD).started
    assert view_of(job(completedIndexes="0-1"), WORKLOAD).started
    evicted = {
        **WORKLOAD,
        "status": {"schedulingStats": {"evictions": [{"reason": "Preempted", "count": 1}]}},
    }
    assert view_of(job(), evicted).started, "requeued after an eviction: it was admitted before"
