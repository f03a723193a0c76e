"""A JobSet run as the task reports it: the progress line, the result per replicated job, and the verdict on
a JobSet Kueue does not manage."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from airflow_kueue_provider.kueue.jobset import jobset_view
from airflow_kueue_provider.kueue.jobset_result import (
    JobSetResult,
    jobset_progress_line,
    jobset_result_of,
    jobset_start_overdue,
    unmanaged_jobset_verdict,
)
from airflow_kueue_provider.kueue.names import JOBSET_NAME_LABEL, REPLICATED_JOB_LABEL
from airflow_kueue_provider.kueue.progress.workload_state import WorkloadPhase, WorkloadState
from airflow_kueue_provider.kueue.spec.topology import TopologyPlacement
from airflow_kueue_provider.plugins.views.run_history import RunRecord

T0 = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)


def _jobset(suspend: bool = False, finished: str | None = None) -> dict[str, Any]:
    conditions = []
    if finished:
        conditions.append(
            {
                "type": finished,
                "status": "True",
                "lastTransitionTime": "2026-12-01T10:05:00Z",
                "reason": "FailedJobs",
                "message": "jobset failed due to one or more job failures",
            }
        )
    return {
        "metadata": {
            "name": "genomics",
            "namespace": "batch",
            "uid": "js-uid",
            "creationTimestamp": "2026-12-01T10:00:00Z",
        },
        "spec": {
            "suspend": suspend,
            "replicatedJobs": [{"name": "coordinator", "replicas": 1}, {"name": "workers", "replicas": 1}],
        },
        "status": {"conditions": conditions},
    }


def _job(replicated: str, completions: int, completed: str = "", failed: str = "", active: int = 0) -> Any:
    return {
        "metadata": {
            "name": f"genomics-{replicated}-0",
            "labels": {JOBSET_NAME_LABEL: "genomics", REPLICATED_JOB_LABEL: replicated},
            "ownerReferences": [{"kind": "JobSet", "name": "genomics", "uid": "js-uid", "controller": True}],
        },
        "spec": {"completions": completions},
        "status": {"completedIndexes": completed, "failedIndexes": failed, "active": active},
    }


def _workload(phase: WorkloadPhase, **kw: Any) -> WorkloadState:
    return WorkloadState(
        workload_name="jobset-genomics-1", phase=phase, queue_name="lq", cluster_queue="cq", **kw
    )


def test_lines_say_queued_then_per_replicated_job_while_it_runs() -> None:
    children = [_job("coordinator", 1, active=1), _job("workers", 8, "0-4", active=3)]
    queued = jobset_view(_jobset(suspend=True), [])
    assert (
        jobset_progress_line(queued, None) == "submitted; waiting for Kueue to create the JobSet's Workload"
    )
    assert jobset_progress_line(queued, _workload(WorkloadPhase.Queued)).startswith("queued in lq")
    running = jobset_view(_jobset(), children)
    assert jobset_progress_line(running, _workload(WorkloadPhase.Running)) == (
        "running: coordinator 0/1 done, 1 active; workers 5/8 done, 3 active"
    )
    on_worker = _workload(WorkloadPhase.Running, worker_cluster="worker-2")
    assert jobset_progress_line(running, on_worker).startswith("running on worker cluster worker-2: ")


def test_the_result_lists_each_replicated_job_and_names_failed_indexes_by_job() -> None:
    children = [_job("coordinator", 1, "0"), _job("workers", 8, "0-2,4-7", failed="3")]
    view = jobset_view(_jobset(finished="Failed"), children)
    admitted = datetime(2026, 12, 1, 10, 1, tzinfo=UTC)
    causes = (("Preempted/InCohortFairSharing", 1),)
    wl = _workload(WorkloadPhase.Failed, admitted_at=admitted, eviction_count=1, eviction_causes=causes)
    result = jobset_result_of(_jobset(finished="Failed"), view, wl, T0)
    assert (result.queued_seconds, result.running_seconds, result.evictions) == (60.0, 240.0, 1)
    assert result.eviction_causes == "Preempted/InCohortFairSharing: 1"
    assert [(r.name, r.completions, r.succeeded, r.failed_indexes) for r in result.replicated_jobs] == [
        ("coordinator", 1, 1, ""),
        ("workers", 8, 7, "genomics-workers-0: 3"),
    ]
    assert (result.completions, result.succeeded, result.failed) == (9, 8, 1)  # over every replicated job
    record = RunRecord.from_result("d", "r", "t", -1, T0, result.to_dict())
    assert record is not None and (record.completions, record.succeeded, record.failed) == (9, 8, 1)
    assert JobSetResult.from_dict(result.to_dict()) == result  # XCom round trip
    status, message = view.outcome() or ("", "")
    assert status == "failed" and message.endswith("failed indexes: genomics-workers-0: 3")


def test_a_jobset_kueue_does_not_manage_is_refused_in_time_or_at_once_if_it_runs() -> None:
    suspended = jobset_view(_jobset(suspend=True), [])
    assert unmanaged_jobset_verdict(suspended, False, 10, 60) is None  # Kueue still has time
    assert unmanaged_jobset_verdict(suspended, True, 600, 60) is None  # it has a Workload
    late = unmanaged_jobset_verdict(suspended, False, 61, 60)
    assert late is not None and not late.running_outside_quota
    assert "jobset.x-k8s.io/jobset" in late.message and "within workload_timeout=60s" in late.message
    running = jobset_view(_jobset(suspend=False), [_job("workers", 8, active=8)])
    outside = unmanaged_jobset_verdict(running, False, 1, 60)
    assert outside is not None and outside.running_outside_quota and "8 pod(s) active" in outside.message
    done = jobset_view(_jobset(finished="Completed"), [])
    assert unmanaged_jobset_verdict(done, False, 600, 60) is None


def test_each_replicated_job_reports_where_kueues_tas_put_it() -> None:
    children = [_job("coordinator", 1, "0"), _job("workers", 4, "0-3")]
    view = jobset_view(_jobset(finished="Completed"), children)
    host = "kubernetes.io/hostname"
    one = TopologyPlacement((host,), ((("n2",), 4),))
    wl = _workload(WorkloadPhase.Running, placements=(("workers", one),))
    assert jobset_progress_line(jobset_view(_jobset(), children), wl).startswith(
        f"running (placed: {host}: n2 (4)): "
    )
    result = jobset_result_of(_jobset(finished="Completed"), view, wl, T0)
    assert [(r.name, r.topology_placement) for r in result.replicated_jobs] == [
        ("coordinator", None),
        ("workers", f"{host}: n2 (4)"),
    ]
    assert JobSetResult.from_dict(result.to_dict()) == result


def test_the_quota_kueue_released_while_the_jobset_ran_is_in_its_result() -> None:
    """The coordinator's replica finished first: Kueue reclaimed its pod (ReclaimablePods) for the 60 s until
    the JobSet completed; the meter closes at the JobSet's Completed condition."""
    from airflow_kueue_provider.kueue.job_progress import observe_released
    from airflow_kueue_provider.kueue.progress.released_quota import ReleasedQuota

    children = [_job("coordinator", 1, "0"), _job("workers", 8, "0-7")]
    admitted = datetime(2026, 12, 1, 10, 1, tzinfo=UTC)
    wl = _workload(WorkloadPhase.Running, admitted_at=admitted, reclaimable_pods=1, cpu_per_pod=2.0)
    running = jobset_view(_jobset(), children)
    meter = observe_released(ReleasedQuota(), _with_workload(running, wl), T0.timestamp() + 240)  # 10:04
    done = jobset_view(_jobset(finished="Completed"), children)
    result = jobset_result_of(_jobset(finished="Completed"), done, wl, T0, meter)
    assert (result.quota_released_pod_seconds, result.quota_released_cpu_seconds) == (60.0, 120.0)
    assert JobSetResult.from_dict(result.to_dict()) == result


def _with_workload(view: Any, wl: WorkloadState) -> Any:
    from dataclasses import replace

    return replace(view, workload=wl)


def test_a_jobset_is_overdue_to_start_while_one_child_job_has_no_ready_pod_even_if_another_runs() -> None:
    coordinator = {**_job("coordinator", 1, active=1), "status": {"active": 1, "ready": 1}}
    workers = _job("workers", 2, active=2)  # pods exist, none ready: an image that never pulls
    view = jobset_view(_jobset(), [coordinator, workers])
    assert [job.name for job in view.unstarted_jobs] == ["genomics-workers-0"]
    assert not jobset_start_overdue(view, 599.0, 600.0)
    assert jobset_start_overdue(view, 600.0, 600.0)
    assert not jobset_start_overdue(view, None, 600.0)  # never admitted
    started = {**workers, "status": {"active": 2, "ready": 2}}
    assert not jobset_start_overdue(jobset_view(_jobset(), [coordinator, started]), 900.0, 600.0)
    some_done = _job("workers", 2, completed="0", active=1)
    assert not jobset_start_overdue(jobset_view(_jobset(), [coordinator, some_done]), 900.0, 600.0)
    finished = jobset_view(_jobset(finished="Failed"), [coordinator, workers])
    assert not jobset_start_overdue(finished, 900.0, 600.0)
