"""A JobSet run as the task sees it: its progress line, its result (XCom ``return_value``), and the verdict
on a JobSet Kueue does not manage. Pure: the trigger reads the objects, this decides what they mean.

The result's keys are a contract like ``JobResult``'s: ``replicated_jobs`` lists, per replicated job, its
completions, how many finished and which indexes failed, named by child Job (``genomics-workers-0: 3``);
``completions``, ``succeeded`` and ``failed`` add them up (the queue page's run history reads those).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

from .api_time import parse_api_time
from .job_progress import released_totals, waiting_line
from .jobset import JobSetView, ReplicatedJobProgress
from .progress.quota_guard import Unmanaged, no_workload_verdict
from .progress.released_quota import ReleasedQuota
from .progress.workload_state import WorkloadPhase, WorkloadState

JOBSET_LIKELY_CAUSES = (
    "Kueue's JobSet integration is not enabled (integrations.frameworks must list jobset.x-k8s.io/jobset, "
    "and the JobSet CRD must exist when Kueue starts); the namespace is not managed by Kueue; the Kueue "
    "controller is not running; or the queue-name label was removed. Check `kubectl get workloads -n {ns}` "
    "and the Kueue controller's log"
)


@dataclass(frozen=True)
class ReplicatedJobResult:
    name: str
    replicas: int
    completions: int
    """Indexes over all of its Jobs (replicas x the Job's completions)."""
    succeeded: int
    failed_indexes: str
    """Per child Job, e.g. ``"genomics-workers-0: 3,7"``; empty when none failed."""
    topology_placement: str | None = None
    """Where Kueue's topology-aware scheduling put its pods (its ``topology``), e.g.
    ``"kubernetes.io/hostname: aks-spot-0 (4)"``; None when it placed none."""


@dataclass(frozen=True)
class JobSetResult:
    jobset_name: str
    namespace: str
    workload_name: str | None
    cluster_queue: str | None
    queued_seconds: float | None
    running_seconds: float | None
    evictions: int
    replicated_jobs: tuple[ReplicatedJobResult, ...]
    eviction_causes: str | None = None
    worker_cluster: str | None = None
    completions: int = 0
    """Indexes over every replicated job (each ``replicated_jobs`` entry's completions, added up)."""
    succeeded: int = 0
    """Completed indexes over every replicated job."""
    failed: int = 0
    """Failed indexes over every replicated job."""
    quota_released_pod_seconds: float | None = None
    """Quota Kueue released while the JobSet still ran (a replicated job's finished replicas, Kueue's
    ReclaimablePods), as the trigger measured it (see ``kueue.progress.released_quota``)."""
    quota_released_cpu_seconds: float | None = None

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["replicated_jobs"] = [asdict(rj) for rj in self.replicated_jobs]
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> JobSetResult:
        fields = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        fields["replicated_jobs"] = tuple(
            ReplicatedJobResult(**rj) for rj in data.get("replicated_jobs") or ()
        )
        return cls(**fields)


def jobset_progress_line(
    view: JobSetView,
    workload: WorkloadState | None,
    position: tuple[int, int] | None = None,
    waited: float | None = None,
) -> str:
    """Queued / evicted as for a Job (``waiting_line``), then per replicated job once pods run, e.g.
    ``running: coordinator 1/1 done, 0 active; workers 5/8 done, 3 active`` (with where Kueue's TAS placed
    each replicated job, when it did)."""
    if (waiting := waiting_line(workload, position, waited, "the JobSet's Workload")) is not None:
        return waiting
    assert workload is not None  # waiting_line answers while there is no Workload
    running = workload.phase is WorkloadPhase.Running or (
        workload.phase is WorkloadPhase.Admitted and not view.suspended
    )
    if running and view.replicated:
        where = f" on worker cluster {workload.worker_cluster}" if workload.worker_cluster else ""
        if placed := workload.placement_text():
            where += f" (placed: {placed})"
        return f"running{where}: {view.progress_line()}"
    return workload.describe()


def jobset_result_of(
    jobset: Mapping[str, Any],
    view: JobSetView,
    workload: WorkloadState | None,
    now: datetime,
    released: ReleasedQuota | None = None,
) -> JobSetResult:
    """The task's result, with queue and run times from the JobSet's and Workload's timestamps, and the quota
    Kueue released while it ran as the trigger measured it (``released``, closed at the end)."""
    created = parse_api_time((jobset.get("metadata") or {}).get("creationTimestamp"))
    admitted = workload.admitted_at if workload else None
    ended = parse_api_time((view.finished or {}).get("lastTransitionTime")) or now
    causes = workload.eviction_causes if workload else ()
    placed = {name: p.describe() for name, p in workload.placements} if workload else {}
    replicated = tuple(_replicated_result(rj, placed.get(rj.name)) for rj in view.replicated)
    pod_seconds, cpu_seconds = released_totals(released, view, now) if released is not None else (None, None)
    return JobSetResult(
        jobset_name=view.name,
        namespace=view.namespace,
        workload_name=workload.workload_name if workload else None,
        cluster_queue=workload.cluster_queue if workload else None,
        queued_seconds=(admitted - created).total_seconds() if admitted and created else None,
        running_seconds=max((ended - admitted).total_seconds(), 0.0) if admitted else None,
        evictions=workload.eviction_count if workload else 0,
        replicated_jobs=replicated,
        eviction_causes=", ".join(f"{cause}: {n}" for cause, n in causes) or None,
        worker_cluster=workload.worker_cluster if workload else None,
        completions=sum(r.completions for r in replicated),
        succeeded=sum(r.succeeded for r in replicated),
        failed=sum(rj.failed for rj in view.replicated),
        quota_released_pod_seconds=pod_seconds,
        quota_released_cpu_seconds=cpu_seconds,
    )


def _replicated_result(rj: ReplicatedJobProgress, placement: str | None) -> ReplicatedJobResult:
    per_job = rj.jobs[0].completions if rj.jobs else 0
    return ReplicatedJobResult(
        name=rj.name,
        replicas=rj.replicas,
        completions=max(rj.completions, per_job * rj.replicas),
        succeeded=rj.completed,
        failed_indexes="; ".join(rj.failed_indexes()),
        topology_placement=placement,
    )


def unmanaged_jobset_verdict(
    view: JobSetView, has_workload: bool, seconds_since_submit: float, workload_timeout: float
) -> Unmanaged | None:
    """None while Kueue manages the JobSet (it has a Workload), it finished, or Kueue still has time.

    The JobSet is created suspended; one that runs without a Workload runs outside every quota."""
    if view.finished is not None or has_workload:
        return None
    active = sum(rj.active for rj in view.replicated)
    running = None if view.suspended else f"was unsuspended ({active} pod(s) active)"
    where, causes = f"JobSet {view.namespace}/{view.name}", JOBSET_LIKELY_CAUSES.format(ns=view.namespace)
    return no_workload_verdict(where, causes, running, seconds_since_submit, workload_timeout)


def jobset_start_overdue(
    view: JobSetView, seconds_since_admission: float | None, start_timeout: float
) -> bool:
    """The same for a JobSet (admitted as one Workload): admitted long enough ago, not finished, and some
    child Job with no pod ready and no index finished (``JobSetView.unstarted_jobs``), even if others run."""
    return (
        view.finished is None
        and seconds_since_admission is not None
        and seconds_since_admission >= start_timeout
        and bool(view.unstarted_jobs)
    )
