"""What the UI pages show, read from the cluster through ``KueueHook`` (orchestration only)."""

from __future__ import annotations

import contextvars
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar

from kubernetes.client.rest import ApiException

from ..hooks.kueue_hook import KueueHook
from ..kueue.api_time import parse_api_time
from ..kueue.checkpoints.shard_packing import packs_of_job
from ..kueue.identity.airflow_identity import AirflowIdentity
from ..kueue.job_progress import JobView, progress_line, view_of
from ..kueue.kinds import ChildOf, child_kind, child_of, operator_names, workload_owner_uid
from ..kueue.names import TRY_NUMBER_LABEL
from ..kueue.progress.deadline import deadline_of
from ..kueue.progress.eta import Estimate, FinishClock, average_finish
from ..kueue.progress.workload_state import WorkloadPhase, WorkloadState
from ..watch.event_index import EventIndex
from .pending_positions import SHARED
from .views.admission_timeline import NOISY_REASONS, TimelineStep, admission_timeline
from .views.index_grid import IndexGrid, index_grid, likely_running, shard_grid
from .views.queue_overview import QueueRow, queue_rows
from .views.run_trends import QueueSampleRing

KUEUE_OPERATORS = operator_names()
"""Operators whose task instances make Kueue Jobs (by class name, as Airflow records a task's operator:
every registered kind's ``operator_names``; ``@task.kueue`` tasks are ``KueueDecoratedOperator``)."""

QUEUE_SAMPLES = QueueSampleRing()
EVENTS = EventIndex(skip_reasons=NOISY_REASONS)
"""The Events of the Jobs and Workloads the task pages show, one feed per namespace and kind."""
"""Each ClusterQueue's status over time in this API server process: a sample of every read of the
ClusterQueues below (the queue page's loads and live stream), no read of its own."""


def queue_dashboard(
    hook: KueueHook, namespaces: Sequence[str], samples: QueueSampleRing | None = QUEUE_SAMPLES
) -> list[QueueRow]:
    """Every LocalQueue in ``namespaces`` (all namespaces when empty) with its ClusterQueue's usage; the
    ClusterQueues read are also sampled into ``samples``."""
    if namespaces:
        local_queues = [q for ns in namespaces for q in hook.list_local_queues(ns)]
    else:
        local_queues = hook.list_local_queues(None)
    try:
        cluster_queues = hook.list_cluster_queues()
    except ApiException as exc:
        if exc.status != 403:
            raise
        cluster_queues = []  # namespace-scoped RBAC: the rows show the LocalQueues only
    if samples is not None:
        samples.record(cluster_queues, time.time())
    return queue_rows(local_queues, cluster_queues)


@dataclass(frozen=True)
class TaskInstanceFacts:
    """What Airflow's database says about the task instance a Kueue tab shows, to say why it has no Job."""

    operator: str | None
    """The class name of the task's operator; None when Airflow has no such task instance."""
    mapped_instances: int = 0
    """For a map index of -1 that has no task instance: how many mapped instances the task has in that run."""

    @property
    def makes_kueue_jobs(self) -> bool:
        return self.operator in KUEUE_OPERATORS


@dataclass(frozen=True)
class JobPanel:
    """One Job of a task instance (one per try that made a Job)."""

    namespace: str
    name: str
    try_number: str
    workload_name: str | None
    cluster_queue: str | None
    live: LiveState
    timeline: list[TimelineStep]
    worker_cluster: str | None = None
    """The MultiKueue worker cluster the Job was dispatched to, on a manager cluster."""
    parent: ChildOf | None = None
    """For a child Job (a ``KueueJobSetOperator`` task's): its parent (a JobSet, admitted as one Workload)
    and which part of it (a replicated job) it runs."""
    placement: str | None = None
    """Where Kueue's topology-aware scheduling put the Job's pods (its replicated job's pod set, for a
    JobSet's Job), when it did."""

    @property
    def summary(self) -> str:
        return self.live.summary

    @property
    def grid(self) -> IndexGrid:
        return self.live.grid

    def to_dict(self) -> dict[str, Any]:
        return {
            "namespace": self.namespace,
            "name": self.name,
            "try_number": self.try_number,
            "workload_name": self.workload_name,
            "cluster_queue": self.cluster_queue,
            "worker_cluster": self.worker_cluster,
            "parent": (
                {"kind": self.parent.parent.kind, "name": self.parent.name, "part": self.parent.part}
                if self.parent
                else None
            ),
            "placement": self.placement,
            "summary": self.summary,
            "eta": self.live.eta.to_dict() if self.live.eta else None,
            "deadline": self.live.deadline.isoformat() if self.live.deadline else None,
            "escalations": [dict(e) for e in self.live.escalations],
            "grid": self.grid.to_dict(),
            "timeline": [step.to_dict() for step in self.timeline],
        }


@dataclass(frozen=True)
class LiveState:
    """What the task view redraws as the Job changes: from the Job and its Workload alone (no pods)."""

    job_name: str
    summary: str
    eta: Estimate | None
    grid: IndexGrid
    finished: bool
    deadline: datetime | None = None
    """From the Job's annotation (the task's ``deadline=``)."""
    escalations: tuple[dict[str, str], ...] = ()

    @property
    def eta_text(self) -> str:
        return f"ETA {self.eta.describe()}" if self.eta else ""

    @property
    def deadline_text(self) -> str:
        """``deadline 07:00 UTC (ETA 12 min before)``; the escalations taken, if any."""
        if self.deadline is None:
            return ""
        text = f"deadline {self.deadline.astimezone(UTC):%Y-%m-%d %H:%M} UTC"
        if self.eta is not None and not self.finished:
            minutes = (self.deadline - self.eta.at).total_seconds() / 60
            text += f" (ETA {abs(minutes):.0f} min {'before' if minutes >= 0 else 'after'})"
        steps = [
            f"{s.get('step')} {s.get('detail', '')}".strip() + f" at {s.get('at', '')[11:19]}"
            for s in self.escalations
        ]
        return text + (f"; escalated: {', '.join(steps)}" if steps else "")


def live_state(
    job: dict[str, Any],
    workload: dict[str, Any] | None,
    now: float,
    clock: FinishClock | None = None,
    position: tuple[int, int] | None = None,
) -> LiveState:
    """The Job's line, finish estimate and index grid. ``clock``: a live view's finished-index readings, this
    one recorded into it (its rate is the recent one); without enough of them, the Job's mean rate since its
    ``startTime``. Running indexes are estimated from ``status.active`` (``likely_running``)."""
    view = view_of(job, workload)
    max_failed = (job.get("spec") or {}).get("maxFailedIndexes")
    finished = len(view.completed) + len(view.failed)
    if clock is not None:
        clock.record(now, finished)
    eta = None
    if view.finished_condition is None and view.started:
        eta = clock.estimate(now, view.active) if clock is not None else None
        started = parse_api_time((job.get("status") or {}).get("startTime"))
        if eta is None and started is not None:
            eta = average_finish(view.completions, finished, view.active, started.timestamp(), now)
    deadline, escalations = deadline_of(job)
    return LiveState(
        job_name=view.name,
        summary=_summary(view, max_failed, position),
        eta=eta,
        grid=grid_of(job),
        finished=view.finished_condition is not None,
        deadline=deadline,
        escalations=tuple(escalations),
    )


def grid_of(job: dict[str, Any]) -> IndexGrid:
    """The Job's grid: per index, or per shard for a Job that runs a checkpointed task's shards (a retry's
    shard ids, several per pod when packed)."""
    grid = index_grid(job, likely_running(job))
    packs = packs_of_job(job)
    return grid if packs is None else shard_grid(grid, packs)


def task_panels(
    hook: KueueHook, namespaces: Sequence[str], dag_id: str, run_id: str, task_id: str, map_index: int
) -> list[JobPanel]:
    """The Jobs of one task instance, oldest first, each with its index grid and admission timeline."""
    identity = AirflowIdentity(dag_id, task_id, run_id, map_index=map_index)
    scopes: Sequence[str | None] = namespaces or [None]
    jobs = [j for ns in scopes for j in hook.task_instance_jobs(ns, identity)]
    jobs.sort(key=lambda j: j["metadata"].get("creationTimestamp") or "")
    return [_panel(hook, job) for job in jobs]


PANEL_READ_THREADS = 2
"""A panel's reads that do not wait on each other go out together, in two rounds (the Workload beside the
Job's Events, then the Workload's Events beside its queue position): at the night's peak each read waits on a
busy API server, and four in a row made the task page's slowest loads. Two threads a panel, so a page's
reads stay bounded by the route's caps."""

T = TypeVar("T")


def _beside(reads: ThreadPoolExecutor, read: Callable[..., T], *args: Any) -> Future[T]:
    """``read(*args)`` on another thread, in the request's context (as ``read_caps`` runs the page)."""
    return reads.submit(contextvars.copy_context().run, read, *args)


def _panel(hook: KueueHook, job: dict[str, Any]) -> JobPanel:
    """At most four reads, however many pods the Job has: its Workload, its queue position while it waits
    (Kueue's visibility API), and the Events of the Job and of the Workload (``EVENTS``: from memory while
    their namespace's feeds are current); two rounds of them."""
    meta = job["metadata"]
    namespace, name = meta["namespace"], meta["name"]
    parent = child_of(job)
    with ThreadPoolExecutor(PANEL_READ_THREADS, thread_name_prefix="kueue-panel") as reads:
        job_events = _beside(
            reads, EVENTS.events_of, hook, namespace, child_kind().kind, name, meta.get("uid", "")
        )
        workload = hook.workload_for_job(namespace, workload_owner_uid(job) or meta["uid"])
        workload_events: Future[list[dict[str, Any]]] | None = None
        if workload is not None:
            held = workload["metadata"]
            workload_events = _beside(
                reads, EVENTS.events_of, hook, namespace, "Workload", held["name"], held.get("uid", "")
            )
        view = view_of(job, workload)
        position, state = None, view.workload
        if state is not None and state.phase is WorkloadPhase.Queued and state.queue_name:
            position = SHARED.position(hook, namespace, state.queue_name, state.workload_name)
        events = job_events.result() + (workload_events.result() if workload_events is not None else [])
    return JobPanel(
        namespace=namespace,
        name=name,
        try_number=(meta.get("labels") or {}).get(TRY_NUMBER_LABEL, "?"),
        workload_name=workload["metadata"]["name"] if workload else None,
        cluster_queue=view.workload.cluster_queue if view.workload else None,
        worker_cluster=view.workload.worker_cluster if view.workload else None,
        parent=parent,
        placement=_placement(view.workload, parent.part if parent else None),
        live=live_state(job, workload, time.time(), position=position),
        timeline=admission_timeline(job, workload, events),
    )


def _placement(workload: WorkloadState | None, part: str | None) -> str | None:
    """The TAS placement of the Job's pods: a parent's Workload (a JobSet's) has one per part (pod set)."""
    if workload is None:
        return None
    if part is None:
        return workload.topology.describe() if workload.topology else None
    placed = dict(workload.placements).get(part)
    return placed.describe() if placed else None


def _summary(view: JobView, max_failed_indexes: int | None, position: tuple[int, int] | None = None) -> str:
    """The Job's state in a line; a Job that Kubernetes marks Failed for failed indexes the task allows
    (``maxFailedIndexes``) is "Finished", as the task's own success says."""
    if view.finished_condition is not None:
        cond = view.finished_condition
        counts = f"{len(view.completed)}/{view.completions} done, {len(view.failed)} failed"
        if cond["type"] == "Complete":
            return f"Complete: {counts}"
        if (
            cond.get("reason") == "FailedIndexes"
            and max_failed_indexes is not None
            and len(view.failed) <= max_failed_indexes
        ):
            return f"Finished: {counts}, within maxFailedIndexes={max_failed_indexes}"
        return f"Failed: {counts} ({cond.get('reason')})"
    return progress_line(view, position)
