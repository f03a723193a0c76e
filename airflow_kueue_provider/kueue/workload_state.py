"""One phase, with its reason, from a Kueue Workload object.

A Workload carries several independent conditions (QuotaReserved, Admitted, Evicted, Preempted, Requeued,
PodsReady, Finished, ...). Kueue updates them in place and their order in ``status.conditions`` means nothing,
so they are always looked up by type, never by position (reading ``conditions[-1]`` is a known Kueue pitfall).

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

from .api_time import parse_api_time
from .quantity import parse_quantity
from .topology import TopologyPlacement, placements_of


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


# Condition types and reasons, as in apis/kueue/v1beta2/workload_types.go.
COND_QUOTA_RESERVED = "QuotaReserved"
COND_ADMITTED = "Admitted"
COND_EVICTED = "Evicted"
COND_PREEMPTED = "Preempted"
COND_REQUEUED = "Requeued"
COND_PODS_READY = "PodsReady"
COND_FINISHED = "Finished"

REASON_INADMISSIBLE = "Inadmissible"
REASON_PREEMPTED = "Preempted"
REASON_SUCCEEDED = "Succeeded"

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
    metadata = _mapping(workload.get("metadata"))
    spec = _mapping(workload.get("spec"))
    status = _mapping(workload.get("status"))
    conditions = _conditions_by_type(status.get("conditions"))

    finished = _true(conditions, COND_FINISHED)
    evicted = _true(conditions, COND_EVICTED)
    admitted = _true(conditions, COND_ADMITTED)
    quota_reserved = conditions.get(COND_QUOTA_RESERVED)

    phase: WorkloadPhase
    source: Mapping[str, Any] | None
    if finished is not None:
        phase = (
            WorkloadPhase.Succeeded if finished.get("reason") == REASON_SUCCEEDED else WorkloadPhase.Failed
        )
        source = finished
    elif evicted is not None:
        phase = (
            WorkloadPhase.Preempted if evicted.get("reason") == REASON_PREEMPTED else WorkloadPhase.Evicted
        )
        source = evicted
    elif admitted is not None:
        phase = WorkloadPhase.Running if _true(conditions, COND_PODS_READY) else WorkloadPhase.Admitted
        source = admitted
    elif quota_reserved is not None and _is_true(quota_reserved):
        phase = WorkloadPhase.QuotaReserved
        source = quota_reserved
    else:
        phase = WorkloadPhase.Queued
        source = quota_reserved

    preempted = _true(conditions, COND_PREEMPTED)
    requeue_state = _mapping(status.get("requeueState"))
    return WorkloadState(
        workload_name=str(metadata.get("name") or ""),
        phase=phase,
        reason=_text(source, "reason"),
        message=_text(source, "message"),
        queue_name=_str_or_none(spec.get("queueName")),
        cluster_queue=_str_or_none(_mapping(status.get("admission")).get("clusterQueue")),
        flavors=_flavors(status),
        pods_requested=sum(_int(_mapping(p).get("count")) for p in _list(spec.get("podSets"))),
        pod_sets=len(_list(spec.get("podSets"))),
        pods_minimum=_min_count(spec),
        pods_admitted=_admitted_pods(status),
        cpu_per_pod=_cpu_per_pod(status),
        placements=placements_of(status),
        worker_cluster=_str_or_none(status.get("clusterName")),
        pending_checks=_pending_checks(status),
        reclaimable_pods=sum(_int(_mapping(p).get("count")) for p in _list(status.get("reclaimablePods"))),
        priority_class=_priority_class(spec),
        requeue_count=_int(requeue_state.get("count")),
        requeue_at=parse_api_time(requeue_state.get("requeueAt")),
        eviction_count=sum(_int(_mapping(e).get("count")) for e in _list(_stats_evictions(status))),
        eviction_causes=_eviction_causes(status, _last_preemption_reason(conditions.get(COND_PREEMPTED))),
        inadmissible=(
            quota_reserved is not None
            and not _is_true(quota_reserved)
            and quota_reserved.get("reason") == REASON_INADMISSIBLE
        ),
        requeued=_true(conditions, COND_REQUEUED) is not None
        and not (quota_reserved is not None and _is_true(quota_reserved)),
        preemption_reason=_text(preempted, "reason"),
        created_at=parse_api_time(metadata.get("creationTimestamp")),
        admitted_at=parse_api_time(admitted.get("lastTransitionTime")) if admitted is not None else None,
    )


def _min_count(spec: Mapping[str, Any]) -> int | None:
    pod_sets = _list(spec.get("podSets"))
    found = _mapping(pod_sets[0]).get("minCount") if pod_sets else None
    return _int(found) if found is not None else None


def _pending_checks(status: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    pending = []
    for check in _list(status.get("admissionChecks")):
        check = _mapping(check)
        state = str(check.get("state") or "Pending")
        if state != "Ready":
            message = _text(check, "message")
            pending.append((str(check.get("name") or "?"), f"{state}: {message}" if message else state))
    return tuple(pending)


def _conditions_by_type(raw: object) -> dict[str, Mapping[str, Any]]:
    """Conditions keyed by type. ``conditions`` is a list-map keyed by type, so each type appears once."""
    by_type: dict[str, Mapping[str, Any]] = {}
    for item in _list(raw):
        condition = _mapping(item)
        condition_type = condition.get("type")
        if isinstance(condition_type, str):
            by_type[condition_type] = condition
    return by_type


def _true(conditions: Mapping[str, Mapping[str, Any]], condition_type: str) -> Mapping[str, Any] | None:
    condition = conditions.get(condition_type)
    return condition if condition is not None and _is_true(condition) else None


def _is_true(condition: Mapping[str, Any]) -> bool:
    return condition.get("status") == "True"


def _flavors(status: Mapping[str, Any]) -> dict[str, str]:
    flavors: dict[str, str] = {}
    for assignment in _list(_mapping(status.get("admission")).get("podSetAssignments")):
        for resource, flavor in _mapping(_mapping(assignment).get("flavors")).items():
            flavors[str(resource)] = str(flavor)
    return flavors


# Kueue's preemption messages name the reason in words ("... due to Fair Sharing within the cohort; ..."), and
# keep them ("Previously: ...") once the Workload is admitted again and the condition's reason is gone.
_PREEMPTION_WORDS = (
    ("reclamation within the cohort while borrowing", "InCohortReclaimWhileBorrowing"),
    ("reclamation within the cohort", "InCohortReclamation"),
    ("Fair Sharing within the cohort", "InCohortFairSharing"),
    ("prioritization in the ClusterQueue", "InClusterQueue"),
)


def _last_preemption_reason(condition: Mapping[str, Any] | None) -> str | None:
    if condition is None:
        return None
    if _is_true(condition) and condition.get("reason"):
        return str(condition["reason"])
    message = str(condition.get("message") or "")
    return next((reason for words, reason in _PREEMPTION_WORDS if f"due to {words};" in message), None)


def _eviction_causes(status: Mapping[str, Any], last_preemption: str | None) -> tuple[tuple[str, int], ...]:
    """``reason/underlyingCause`` -> count. A preemption's own reason (``InCohortFairSharing`` ...) is not in
    the scheduling stats; the last one is known from the Preempted condition, and named when it is the only
    one (``Preempted/InCohortFairSharing``) or as the last of several (``Preempted (last ...)``)."""
    causes: dict[str, int] = {}
    for eviction in _list(_stats_evictions(status)):
        entry = _mapping(eviction)
        reason, cause = str(entry.get("reason") or "Evicted"), entry.get("underlyingCause")
        key = f"{reason}/{cause}" if cause else reason
        causes[key] = causes.get(key, 0) + _int(entry.get("count"))
    preempted = causes.pop(REASON_PREEMPTED, 0)
    if preempted and last_preemption:
        key = f"Preempted/{last_preemption}" if preempted == 1 else f"Preempted (last {last_preemption})"
        causes[key] = causes.get(key, 0) + preempted
    elif preempted:
        causes[REASON_PREEMPTED] = preempted
    return tuple(sorted((k, n) for k, n in causes.items() if n))


def _admitted_pods(status: Mapping[str, Any]) -> int | None:
    assignments = _list(_mapping(status.get("admission")).get("podSetAssignments"))
    total = 0
    for assignment in assignments:
        count = _mapping(assignment).get("count")
        if not isinstance(count, int):
            return None
        total += count
    return total if assignments else None


def _cpu_per_pod(status: Mapping[str, Any]) -> float | None:
    cpu, pods = 0.0, 0
    for assignment in _list(_mapping(status.get("admission")).get("podSetAssignments")):
        assignment = _mapping(assignment)
        usage = _mapping(assignment.get("resourceUsage")).get("cpu")
        count = assignment.get("count")
        if usage is None or not isinstance(count, int) or count <= 0:
            continue
        try:
            cpu += float(parse_quantity(usage))
        except ValueError:
            return None
        pods += count
    return cpu / pods if pods else None


def _priority_class(spec: Mapping[str, Any]) -> str | None:
    ref = _mapping(spec.get("priorityClassRef"))  # v1beta2
    return _str_or_none(ref.get("name")) or _str_or_none(spec.get("priorityClassName"))  # or v1beta1


def _stats_evictions(status: Mapping[str, Any]) -> object:
    return _mapping(status.get("schedulingStats")).get("evictions")


def _why(reason: str | None, message: str | None) -> str:
    if reason and message:
        return f" ({reason}: {_shorten(message)})"
    if reason or message:
        return f" ({reason or _shorten(message or '')})"
    return ""


def _shorten(message: str) -> str:
    message = " ".join(message.split())
    return message if len(message) <= _MESSAGE_LIMIT else message[: _MESSAGE_LIMIT - 1] + "…"


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _list(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


def _text(source: Mapping[str, Any] | None, key: str) -> str | None:
    return _str_or_none(source.get(key)) if source is not None else None


def _str_or_none(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0
