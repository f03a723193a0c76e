"""The result of one Indexed Job run: the operator's XCom ``return_value``, the final trigger event's fields.

The keys of ``JobResult.to_dict()`` are a contract (docs/design.md, docs/results.md): users' DAGs read them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from airflow_kueue_provider.kueue.index_set import IndexSet
from airflow_kueue_provider.kueue.progress.workload_state import WorkloadState


@dataclass(frozen=True)
class JobResult:
    job_name: str
    namespace: str
    workload_name: str | None
    cluster_queue: str | None
    completions: int
    completed_indexes: str
    """Interval string, e.g. ``"0-3,7,9-11"`` (Kubernetes ``status.completedIndexes`` format)."""
    failed_indexes: str
    succeeded: int
    """Number of completed indexes (not of succeeded pods)."""
    failed: int
    """Number of failed indexes (not of failed pods)."""
    queued_seconds: float | None
    running_seconds: float | None
    evictions: int
    admitted_parallelism: int | None = None
    """Pods the Job's admission held quota for: below its parallelism after a partial admission
    (``min_parallelism``); None when not known (never admitted)."""
    eviction_causes: str | None = None
    """What ``evictions`` were, e.g. ``"Preempted/InCohortFairSharing: 1"`` (Kueue's ``reason/cause``);
    None without evictions."""
    topology_placement: str | None = None
    """Where Kueue's topology-aware scheduling placed the pods (``topology=``), e.g.
    ``"kubernetes.io/hostname: aks-spot-0 (3), aks-spot-1 (1)"``; None without TAS."""
    worker_cluster: str | None = None
    """The MultiKueue worker cluster that ran the Job (its MultiKueueCluster name); None on one cluster."""
    quota_released_pod_seconds: float | None = None
    """Pod-seconds of quota Kueue gave back to the queue before the Job ended, once fewer indexes were left
    than pods admitted (ReclaimablePods; see released_quota); None when not measured."""
    quota_released_cpu_seconds: float | None = None
    """The same in CPU-seconds, from the admission's CPU per pod; None when the admission had no CPU."""
    finished_at: str | None = None
    """When the Job ended (its Complete or Failed condition), ISO 8601 UTC; None when it has not."""

    @property
    def completed(self) -> IndexSet:
        return IndexSet.parse(self.completed_indexes)

    @property
    def failed_set(self) -> IndexSet:
        return IndexSet.parse(self.failed_indexes)

    @property
    def pending(self) -> IndexSet:
        """Indexes neither completed nor failed."""
        return IndexSet.range(0, self.completions) - self.completed - self.failed_set

    @property
    def all_succeeded(self) -> bool:
        return self.succeeded == self.completions

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable dict (str, int, float, None only)."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> JobResult:
        """Inverse of ``to_dict``. Unknown keys (e.g. an event's ``status``/``message``) are ignored."""
        fields = dataclasses.fields(cls)
        required = [f.name for f in fields if f.default is dataclasses.MISSING]
        missing = [name for name in required if name not in data]
        if missing:
            raise ValueError(f"JobResult dict is missing {missing}")
        return cls(**{f.name: data[f.name] for f in fields if f.name in data})


def job_result_from_status(
    job: Mapping[str, Any],
    workload_state: WorkloadState | None,
    queued_seconds: float | None,
    running_seconds: float | None,
) -> JobResult:
    """Build the result from a Job object (dict as returned by the API) and, when known, its Workload.

    Counts come from ``status.completedIndexes`` / ``status.failedIndexes`` parsed as index sets, which is
    exact per index; ``status.succeeded``/``failed`` count pods (a retried index counts each failed pod).
    """
    metadata = _mapping(job.get("metadata"))
    spec = _mapping(job.get("spec"))
    status = _mapping(job.get("status"))
    completed = IndexSet.parse(_str(status.get("completedIndexes")))
    failed = IndexSet.parse(_str(status.get("failedIndexes")))
    completions = spec.get("completions")
    return JobResult(
        job_name=str(metadata.get("name") or ""),
        namespace=str(metadata.get("namespace") or ""),
        workload_name=(workload_state.workload_name or None) if workload_state else None,
        cluster_queue=workload_state.cluster_queue if workload_state else None,
        completions=completions if isinstance(completions, int) else 0,
        completed_indexes=str(completed),
        failed_indexes=str(failed),
        succeeded=len(completed),
        failed=len(failed),
        queued_seconds=queued_seconds,
        running_seconds=running_seconds,
        evictions=workload_state.eviction_count if workload_state else 0,
        admitted_parallelism=workload_state.pods_admitted if workload_state else None,
        eviction_causes=(
            ", ".join(f"{cause}: {count}" for cause, count in workload_state.eviction_causes) or None
            if workload_state
            else None
        ),
        topology_placement=(
            workload_state.topology.describe() if workload_state and workload_state.topology else None
        ),
        worker_cluster=workload_state.worker_cluster if workload_state else None,
    )


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _str(value: object) -> str | None:
    return value if isinstance(value, str) else None
