"""One phase, with its reason, from a Kueue Workload object.

A Workload carries several independent conditions (QuotaReserved, Admitted, Evicted, Preempted, Requeued,
PodsReady, Finished, ...), looked up by type (``workload_conditions``). What its admission holds is
``workload_admission``'s to read, its evictions ``workload_evictions``'s.

Precedence, first match wins:

1. ``Finished=True``  -> ``Succeeded`` (reason ``Succeeded``) or ``Failed`` (any other reason).
2. ``Evicted=True``   -> ``Preempted`` (reason ``Preempted``) or ``Evicted``. Kueue keeps ``Evicted=True``
   while the Workload waits to be requeued and resets it when quota is reserved again.
3. ``Admitted=True``  -> ``Running`` when ``PodsReady=True``, else ``Admitted`` (see ``with_running``).
4. ``QuotaReserved=True`` -> ``QuotaReserved`` (quota held, admission checks pending).
5. otherwise ``Queued``, with the reason/message of ``QuotaReserved=False`` (``Pending``, ``Inadmissible``).

Reads ``kueue.x-k8s.io/v1beta2`` objects and tolerates ``v1beta1`` ones (``spec.priorityClassName``).
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ..api_fields import count, items, mapping, str_or_none, text
from ..api_time import parse_api_time
from ..spec.topology import TopologyPlacement, placements_of
from . import workload_admission as admission
from .workload_conditions import (
    COND_ADMITTED,
    COND_EVICTED,
    COND_FINISHED,
    COND_PODS_READY,
    COND_PREEMPTED,
    COND_QUOTA_RESERVED,
    COND_REQUEUED,
    REASON_INADMISSIBLE,
    REASON_PREEMPTED,
    REASON_SUCCEEDED,
    Conditions,
    conditions_by_type,
    is_true,
    true_condition,
)
from .workload_evictions import eviction_causes, eviction_count, last_preemption_reason


class WorkloadPhase(str, enum.Enum):
    """Where a Workload is in Kueue's lifecycle. Values equal the names (they go into events and XCom)."""

    Queued = "Queued"
    QuotaReserved = "QuotaReserved"
    Admitted = "Admitted"
    Running = "Running"
    Evicted = "Evicted"
    Preempted = "Preempted"
    Succeeded = "Succeeded"
    Failed = "Failed"

    @property
    def is_terminal(self) -> bool:
        return self in (WorkloadPhase.Succeeded, WorkloadPhase.Failed)

    def __str__(self) -> str:
        return self.value


_MESSAGE_LIMIT = 200


@dataclass(frozen=True)
class WorkloadState:
    """What a Workload says about its Job, reduced to what a user and the operator need."""

    workload_name: str
    phase: WorkloadPhase
    reason: str | None = None
    message: str | None = None
    queue_name: str | None = None
    """The LocalQueue (``spec.queueName``)."""
    cluster_queue: str | None = None
    """``status.admission.clusterQueue``; set while quota is reserved."""
    flavors: Mapping[str, str] = field(default_factory=dict)
    """Resource name -> ResourceFlavor, merged over all pod sets of the admission."""
    priority_class: str | None = None
    requeue_count: int = 0
    """``status.requeueState.count``: requeues after PodsReady timeouts / admission-check retries."""
    requeue_at: datetime | None = None
    eviction_count: int = 0
    """Sum of ``status.schedulingStats.evictions[].count``: every eviction, for any reason."""
    eviction_causes: tuple[tuple[str, int], ...] = ()
    """The same by ``reason/underlyingCause`` (e.g. ``Preempted/InCohortFairSharing``), with counts."""
    inadmissible: bool = False
    """``QuotaReserved=False`` with reason ``Inadmissible`` (e.g. the LocalQueue does not exist)."""
    requeued: bool = False
    """Evicted and back in the queue (``Requeued=True``) without quota yet."""
    preemption_reason: str | None = None
    """Reason of the ``Preempted`` condition while true (``InClusterQueue``, ``InCohortReclamation`` ...)."""
    created_at: datetime | None = None
    admitted_at: datetime | None = None
    """When ``Admitted`` last turned true, while it is true."""
    pods_requested: int = 0
    """Pods the Workload asks for (``spec.podSets[].count``: the Job's parallelism)."""
    pod_sets: int = 1
    """How many pod sets it has (a Job one; a JobSet one per replicated job)."""
    pods_minimum: int | None = None
    """The fewest pods Kueue may admit it with (``spec.podSets[0].minCount``: partial admission); None when
    it must have the quota of every pod at once."""
    pods_admitted: int | None = None
    """Pods its admission holds quota for (``status.admission.podSetAssignments[].count``); fewer than
    requested after a partial admission."""
    placements: tuple[tuple[str, TopologyPlacement], ...] = ()
    """Where Kueue's topology-aware scheduling placed each pod set's pods, as (pod set, placement), for the
    pod sets it placed (a Job has one pod set; a JobSet one per replicated job)."""
    worker_cluster: str | None = None
    """The MultiKueue worker cluster the Workload was dispatched to (``status.clusterName``), on a manager
    cluster; Kueue clears it when the Workload is evicted."""
    pending_checks: tuple[tuple[str, str], ...] = ()
    """AdmissionChecks not ``Ready`` yet, as (name, state[: message]) (``status.admissionChecks``)."""
    reclaimable_pods: int = 0
    """Pods of the admission Kueue no longer counts (``status.reclaimablePods``): in a Job's tail, once fewer
    indexes are left than pods may run, the quota of the rest goes back to the queue (ReclaimablePods)."""
    cpu_per_pod: float | None = None
    """CPU cores the admission counts per pod (``podSetAssignments[].resourceUsage.cpu`` over its pods);
    None without an admission or without CPU in it."""

    @property
    def topology(self) -> TopologyPlacement | None:
        """The first pod set's placement: a Job's only one."""
        return self.placements[0][1] if self.placements else None

    def placement_text(self) -> str | None:
        """``kubernetes.io/hostname: n1 (4)``; per pod set (``coordinator on ...; workers on ...``) when
        Kueue placed several; None when it placed none."""
        if len(self.placements) == 1:
            return self.placements[0][1].describe()
        return "; ".join(f"{name} on {p.describe()}" for name, p in self.placements) or None

    @property
    def partially_admitted(self) -> bool:
        return self.pods_admitted is not None and 0 < self.pods_admitted < self.pods_requested

    @classmethod
    def from_workload(cls, workload: Mapping[str, Any]) -> WorkloadState:
        return workload_state_from_dict(workload)

    def with_running(self, active: int) -> WorkloadState:
        """Upgrade ``Admitted`` to ``Running`` when the caller has seen ``active`` > 0 pods of the Job.

        Kueue only reports ``PodsReady`` with waitForPodsReady enabled, so the Job status is the other source.
        Any other phase is returned unchanged.
        """
        if self.phase is WorkloadPhase.Admitted and active > 0:
            return dataclasses.replace(self, phase=WorkloadPhase.Running)
        return self

    @property
    def is_finished(self) -> bool:
        return self.phase.is_terminal

    def flavors_text(self) -> str:
        """``"cpu: spot, memory: spot"``, resources sorted; empty when nothing is assigned."""
        return ", ".join(f"{resource}: {flavor}" for resource, flavor in sorted(self.flavors.items()))

    def describe(self) -> str:
        """A short human line for the task log, e.g. ``admitted to cq [cpu: spot-flavor]``."""
        why = _why(self.reason, self.message)
        flavors = f" [{self.flavors_text()}]" if self.flavors else ""
        cluster_queue = self.cluster_queue or "?"
        phase = self.phase
        if phase is WorkloadPhase.Queued:
            where = f"queued in {self.queue_name}" if self.queue_name else "queued"
            if self.inadmissible:
                where = f"inadmissible in {self.queue_name}" if self.queue_name else "inadmissible"
            line = f"{where}{why}"
            if self.requeue_at is not None:
                line += f", requeue at {self.requeue_at.isoformat()}"
            return line
        if phase is WorkloadPhase.QuotaReserved:
            checks = "; ".join(f"{name}: {state}" for name, state in self.pending_checks)
            return f"quota reserved in {cluster_queue}{flavors}, waiting for admission checks" + (
                f" ({checks})" if checks else ""
            )
        partial = (
            f", {self.pods_admitted} of {self.pods_requested} pods (partial admission)"
            if self.partially_admitted
            else ""
        )
        if placed := self.placement_text():
            partial += f", placed on {placed}"
        if self.worker_cluster:
            partial += f", on worker cluster {self.worker_cluster} (MultiKueue)"
        if phase is WorkloadPhase.Admitted:
            return f"admitted to {cluster_queue}{flavors}{partial}"
        if phase is WorkloadPhase.Running:
            return f"running in {cluster_queue}{flavors}{partial}"
        if phase in (WorkloadPhase.Evicted, WorkloadPhase.Preempted):
            line = f"evicted{why}"
            if self.preemption_reason:
                line += f", preemption: {self.preemption_reason}"
            if self.eviction_count:
                line += f", {self.eviction_count} eviction(s) so far"
            return line
        if phase is WorkloadPhase.Succeeded:
            return f"finished{why}"
        return f"failed{why}"


def workload_state_from_dict(workload: Mapping[str, Any]) -> WorkloadState:
    """Map a Workload as returned by the API server (a dict) to a ``WorkloadState``."""
    metadata = mapping(workload.get("metadata"))
    spec = mapping(workload.get("spec"))
    status = mapping(workload.get("status"))
    conditions = conditions_by_type(status.get("conditions"))
    phase, source = _phase(conditions)
    admitted = true_condition(conditions, COND_ADMITTED)
    quota_reserved = conditions.get(COND_QUOTA_RESERVED)
    quota_held = quota_reserved is not None and is_true(quota_reserved)
    requeue_state = mapping(status.get("requeueState"))
    return WorkloadState(
        workload_name=str(metadata.get("name") or ""),
        phase=phase,
        reason=text(source, "reason"),
        message=text(source, "message"),
        queue_name=str_or_none(spec.get("queueName")),
        cluster_queue=str_or_none(mapping(status.get("admission")).get("clusterQueue")),
        flavors=admission.flavors(status),
        pods_requested=admission.pods_requested(spec),
        pod_sets=len(items(spec.get("podSets"))),
        pods_minimum=admission.min_pods(spec),
        pods_admitted=admission.admitted_pods(status),
        cpu_per_pod=admission.cpu_per_pod(status),
        placements=placements_of(status),
        worker_cluster=str_or_none(status.get("clusterName")),
        pending_checks=admission.pending_checks(status),
        reclaimable_pods=admission.reclaimable_pods(status),
        priority_class=_priority_class(spec),
        requeue_count=count(requeue_state.get("count")),
        requeue_at=parse_api_time(requeue_state.get("requeueAt")),
        eviction_count=eviction_count(status),
        eviction_causes=eviction_causes(status, last_preemption_reason(conditions.get(COND_PREEMPTED))),
        inadmissible=(
            quota_reserved is not None
            and not quota_held
            and quota_reserved.get("reason") == REASON_INADMISSIBLE
        ),
        requeued=true_condition(conditions, COND_REQUEUED) is not None and not quota_held,
        preemption_reason=text(true_condition(conditions, COND_PREEMPTED), "reason"),
        created_at=parse_api_time(metadata.get("creationTimestamp")),
        admitted_at=parse_api_time(admitted.get("lastTransitionTime")) if admitted is not None else None,
    )


def _phase(conditions: Conditions) -> tuple[WorkloadPhase, Mapping[str, Any] | None]:
    """The phase by the precedence of the module docstring, and the condition that decided it (its reason
    and message are the state's)."""
    if (finished := true_condition(conditions, COND_FINISHED)) is not None:
        succeeded = finished.get("reason") == REASON_SUCCEEDED
        return (WorkloadPhase.Succeeded if succeeded else WorkloadPhase.Failed), finished
    if (evicted := true_condition(conditions, COND_EVICTED)) is not None:
        preempted = evicted.get("reason") == REASON_PREEMPTED
        return (WorkloadPhase.Preempted if preempted else WorkloadPhase.Evicted), evicted
    if (admitted := true_condition(conditions, COND_ADMITTED)) is not None:
        ready = true_condition(conditions, COND_PODS_READY) is not None
        return (WorkloadPhase.Running if ready else WorkloadPhase.Admitted), admitted
    quota_reserved = conditions.get(COND_QUOTA_RESERVED)
    if quota_reserved is not None and is_true(quota_reserved):
        return WorkloadPhase.QuotaReserved, quota_reserved
    return WorkloadPhase.Queued, quota_reserved


def _priority_class(spec: Mapping[str, Any]) -> str | None:
    ref = mapping(spec.get("priorityClassRef"))  # v1beta2
    return str_or_none(ref.get("name")) or str_or_none(spec.get("priorityClassName"))  # or v1beta1


def _why(reason: str | None, message: str | None) -> str:
    if reason and message:
        return f" ({reason}: {_shorten(message)})"
    if reason or message:
        return f" ({reason or _shorten(message or '')})"
    return ""


def _shorten(message: str) -> str:
    message = " ".join(message.split())
    return message if len(message) <= _MESSAGE_LIMIT else message[: _MESSAGE_LIMIT - 1] + "…"
