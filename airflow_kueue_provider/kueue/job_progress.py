"""What a Job and its Workload say right now: a progress line for humans and, once it is over, the outcome.

Pure functions over the API's dicts, so the trigger only orchestrates and every rule here is unit-tested.
Outcome rules:
- the Job is Complete -> success;
- the Job Failed with reason FailedIndexes and no more failed indexes than ``max_failed_indexes`` -> success
  (Kubernetes marks such a Job Failed even when it stayed within the limit);
- more failed indexes than ``max_failed_indexes`` -> failed at once, naming the indexes;
- any other Failed -> failed with Kubernetes' reason and message;
- the Job disappeared -> error.
A long queue wait is never an outcome here: only the trigger's ``queue_timeout`` turns it into one.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from . import kinds
from .api_time import parse_api_time
from .index_set import IndexSet
from .progress.followed_view import FollowedView, ever_admitted, is_admitted
from .progress.released_quota import ReleasedQuota
from .progress.result import JobResult, job_result_from_status
from .progress.workload_state import WorkloadPhase, WorkloadState, workload_state_from_dict
from .spec.job_spec import MULTIKUEUE_CONTROLLER
from .wording import counted

OutcomeStatus = Literal["success", "failed", "timeout", "error", "deadline_risk"]
"""``deadline_risk`` is not an end: the task resumes to escalate and defers again."""


@dataclass(frozen=True)
class Outcome:
    status: OutcomeStatus
    message: str


@dataclass(frozen=True)
class JobView:
    """One moment of a Job and its Workload."""

    name: str
    namespace: str
    completions: int
    completed: IndexSet
    failed: IndexSet
    active: int
    finished_condition: Mapping[str, Any] | None  # Complete or Failed, when true
    workload: WorkloadState | None
    created_at: datetime | None
    suspended: bool = True
    """``spec.suspend``: the provider creates Jobs suspended; Kueue unsuspends them on admission."""
    ready: int = 0
    started: bool = False
    """The Job was admitted at some point (``followed_view.ever_admitted``): it has a ``status.startTime``
    (cleared when Kueue suspends it), pods or finished indexes, or its Workload says so."""
    managed_by: str | None = None
    """``spec.managedBy``: ``kueue.x-k8s.io/multikueue`` when MultiKueue runs the Job on a worker cluster."""

    @property
    def dispatched_by_multikueue(self) -> bool:
        return self.managed_by == MULTIKUEUE_CONTROLLER

    @property
    def admitted(self) -> bool:
        return is_admitted(self.workload)

    @property
    def done(self) -> int:
        return len(self.completed) + len(self.failed)


def finished_condition(job: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The terminal condition of a Job (or of an object of any registered kind: its own end rule), else
    None: the same rules hold for deleting it."""
    return kinds.finished_condition(job)


def view_of(job: Mapping[str, Any], workload: Mapping[str, Any] | None) -> JobView:
    meta, spec, status = job.get("metadata", {}), job.get("spec", {}), job.get("status") or {}
    finished = finished_condition(job)
    state = workload_state_from_dict(workload) if workload else None
    active = int(status.get("active") or 0)
    completed = IndexSet.parse(status.get("completedIndexes"))
    failed = IndexSet.parse(status.get("failedIndexes"))
    return JobView(
        name=str(meta.get("name", "")),
        namespace=str(meta.get("namespace", "")),
        completions=int(spec.get("completions") or 0),
        completed=completed,
        failed=failed,
        active=active,
        finished_condition=finished,
        workload=state.with_running(active) if state else None,
        created_at=parse_api_time(meta.get("creationTimestamp")),
        suspended=bool(spec.get("suspend")),
        ready=int(status.get("ready") or 0),
        managed_by=spec.get("managedBy") or None,
        started=ever_admitted(state, ran=bool(status.get("startTime") or completed or failed or active)),
    )


def outcome_of(view: JobView, max_failed_indexes: int | None) -> Outcome | None:
    where = f"Job {view.namespace}/{view.name}"
    if undispatched := never_dispatched(view):
        return Outcome("failed", f"{where}: {undispatched}")
    too_many = max_failed_indexes is not None and len(view.failed) > max_failed_indexes
    if too_many:
        return Outcome(
            "failed",
            f"{where}: {counted(len(view.failed), 'index')} failed ({view.failed}), more than "
            f"max_failed_indexes={max_failed_indexes}",
        )
    cond = view.finished_condition
    if cond is None:
        return None
    if cond["type"] == "Complete":
        done = f"all {view.completions} indexes" if view.completions != 1 else "its 1 index"
        return Outcome("success", f"{where} completed {done}")
    if cond.get("reason") == "FailedIndexes" and max_failed_indexes is not None:
        some = counted(len(view.failed), "failed index", "failed indexes")
        return Outcome(
            "success",
            f"{where} finished with {some} ({view.failed}), within max_failed_indexes={max_failed_indexes}",
        )
    failed = f"; failed indexes: {view.failed}" if view.failed else ""
    return Outcome("failed", f"{where} failed ({cond.get('reason')}: {cond.get('message')}){failed}")


def never_dispatched(view: JobView) -> str | None:
    """Why a MultiKueue Job will never run, when it will not: Kueue admitted it on the manager with no
    flavor, because its pods request nothing its ClusterQueue covers, and the MultiKueue admission check
    applies only to admissions that use a flavor. Nothing runs it there (the Job controller leaves it to
    MultiKueue) and nothing dispatches it."""
    wl = view.workload
    if not view.dispatched_by_multikueue or not view.admitted or wl is None or view.finished_condition:
        return None
    if wl.flavors or wl.worker_cluster:
        return None
    return (
        "admitted on the MultiKueue manager without being dispatched to a worker cluster: its pods request "
        "no resource that the ClusterQueue covers, so no ResourceFlavor (and no MultiKueue admission "
        "check) applies; set resources={'requests': {'cpu': ..., 'memory': ...}}"
    )


def progress_line(view: JobView, position: tuple[int, int] | None = None, waited: float | None = None) -> str:
    """A line a human reads at a glance: queued (position, wait) / admitted / evicted / N/M done."""
    wl = view.workload
    if (waiting := waiting_line(wl, position, waited, "the Workload")) is not None:
        return waiting
    assert wl is not None  # waiting_line answers while there is no Workload
    if wl.phase is WorkloadPhase.Running or (wl.phase is WorkloadPhase.Admitted and view.completed):
        return (
            f"running {len(view.completed)}/{view.completions} done, {len(view.failed)} failed"
            + (f" ({_shorten(str(view.failed))})" if view.failed else "")
            + f", {view.active} active"
            + _admission_facts(wl)
        )
    return wl.describe()


def waiting_line(
    wl: WorkloadState | None, position: tuple[int, int] | None, waited: float | None, workload: str
) -> str | None:
    """The line while the object waits for Kueue, the same for every kind: no Workload yet, queued (position,
    wait, Kueue's reason) or requeued after an eviction; None once it is admitted."""
    if wl is None:
        return f"submitted; waiting for Kueue to create {workload}"
    queue = wl.queue_name or "its LocalQueue"
    extra = [
        f"position {position[0] + 1}" if position else "",
        f"{waited:.0f} s" if waited is not None else "",
    ]
    detail = ", ".join(x for x in extra if x)
    detail = f" ({detail})" if detail else ""
    if wl.phase is WorkloadPhase.Queued:
        where = f"{'inadmissible' if wl.inadmissible else 'queued'} in {queue}"
        return where + detail + (f": {wl.message}" if wl.message else "") + _gang_hint(wl)
    if wl.requeued and wl.phase in (WorkloadPhase.Evicted, WorkloadPhase.Preempted):
        # The evicted moment itself may be coalesced away (the trigger reads the newest state), so this line
        # names the preemption reason too.
        why = f"{wl.reason}: {wl.preemption_reason}" if wl.preemption_reason else wl.reason
        return f"requeued in {queue} after eviction ({why}, {wl.eviction_count} so far){detail}"
    return None


GANG_HINT_AFTER = "insufficient quota"  # Kueue's message when the free quota is short (flavor assignment)


def _gang_hint(wl: WorkloadState) -> str:
    """Why a Job waits while the queue shows free quota: it needs every pod's quota at once, in one flavor.
    Measured on the night benchmark: 50-pod Jobs waited beside 27 free CPUs of one flavor and 32 of another.
    Only for one pod set (a Job): partial admission is Kueue's for batch/v1 Jobs alone."""
    gang = wl.pod_sets == 1 and wl.pods_minimum is None and wl.pods_requested > 1
    if not gang or GANG_HINT_AFTER not in (wl.message or ""):
        return ""
    return (
        f" (it starts when the quota of all {wl.pods_requested} pods is free at once, in one flavor; "
        "min_parallelism lets Kueue start it with fewer)"
    )


def _admission_facts(wl: WorkloadState) -> str:
    """What the running line adds about how the Job was admitted: a partial admission, a TAS placement, the
    MultiKueue worker cluster it runs on, and the quota Kueue took back in the tail (reclaimable pods)."""
    facts = []
    if wl.partially_admitted:
        facts.append(f"{wl.pods_admitted} of {wl.pods_requested} pods: partial admission")
    if wl.topology is not None:
        facts.append(f"placed on {wl.topology.describe()}")
    if wl.worker_cluster:
        facts.append(f"on worker cluster {wl.worker_cluster}")
    if wl.reclaimable_pods:
        facts.append(f"quota of {wl.reclaimable_pods} pod(s) handed back: fewer indexes left than pods")
    return f" ({'; '.join(facts)})" if facts else ""


def finished_at(view: FollowedView) -> datetime | None:
    """When the object's Complete/Completed or Failed condition turned true; None while it runs."""
    return (
        parse_api_time(view.finished_condition.get("lastTransitionTime")) if view.finished_condition else None
    )


def result_of(
    view: JobView, job: Mapping[str, Any], now: datetime, released: ReleasedQuota | None = None
) -> JobResult:
    """The task's result, with queue and run times measured from the Job's and Workload's timestamps, and
    the quota Kueue released in the tail as the trigger measured it (``released``, closed at the end)."""
    admitted_at = view.workload.admitted_at if view.workload else None
    ended_at = finished_at(view)
    queued = (admitted_at or now) - view.created_at if view.created_at else None
    running = ((ended_at or now) - admitted_at) if admitted_at else None
    result = job_result_from_status(
        job,
        view.workload,
        queued_seconds=round(queued.total_seconds(), 3) if queued is not None else None,
        running_seconds=round(running.total_seconds(), 3) if running is not None else None,
    )
    if ended_at is not None:
        result = dataclasses.replace(result, finished_at=ended_at.isoformat(timespec="seconds"))
    if released is None:
        return result
    pod_seconds, cpu_seconds = released_totals(released, view, now)
    return dataclasses.replace(
        result, quota_released_pod_seconds=pod_seconds, quota_released_cpu_seconds=cpu_seconds
    )


def released_totals(released: ReleasedQuota, view: FollowedView, now: datetime) -> tuple[float, float | None]:
    """The result's released pod- and CPU-seconds, the meter closed at the object's end (or ``now``)."""
    total = released.closed_at((finished_at(view) or now).timestamp())
    return round(total.pod_seconds, 1), round(total.cpu_seconds, 1) if total.cpu_seconds is not None else None


def observe_released(released: ReleasedQuota, view: FollowedView, at: float) -> ReleasedQuota:
    """Count Kueue's reclaimable pods while the object runs (any kind: Kueue reports them for Jobs and
    JobSets); a finished object's count is closed in the result."""
    wl = view.workload
    if view.finished_condition is not None:
        return released
    if wl is None or not view.admitted:
        return released.observe(at, 0, None)
    return released.observe(at, wl.reclaimable_pods, wl.cpu_per_pod)


def released_so_far(result: Mapping[str, Any]) -> dict[str, float | None] | None:
    """The released-quota totals in a trigger event's result keys, which a re-deferral hands to the next
    trigger (``ReleasedQuota.carried``); None when the event has none."""
    pod_seconds = result.get("quota_released_pod_seconds")
    if pod_seconds is None:
        return None
    return {"pod_seconds": pod_seconds, "cpu_seconds": result.get("quota_released_cpu_seconds")}


def released_line(released: ReleasedQuota, view: FollowedView, now: datetime) -> str | None:
    """What the end of the task logs about the quota Kueue gave back in the tail; None when it gave none."""
    total = released.closed_at((finished_at(view) or now).timestamp())
    if total.pod_seconds <= 0:
        return None
    cpu = f"{total.cpu_seconds:.1f} CPU-seconds, " if total.cpu_seconds is not None else ""
    return (
        f"Kueue released {cpu}{total.pod_seconds:.1f} pod-seconds of quota to the queue while the last "
        "indexes ran (ReclaimablePods)"
    )


def _shorten(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[: limit - 1].rsplit(",", 1)[0] + ",…"


def start_overdue(view: JobView, seconds_since_admission: float | None, start_timeout: float) -> bool:
    """Admitted long enough ago, yet no pod is ready and no index finished: time to look at the pods."""
    return (
        view.admitted
        and view.finished_condition is None
        and seconds_since_admission is not None
        and seconds_since_admission >= start_timeout
        and view.ready == 0
        and not view.completed
        and not view.failed
    )
