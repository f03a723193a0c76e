"""What the cluster did during a night, as seen by watches of its own (admin identity, threads of their own):
every pod's life, every Job's creation, admission and end, every Workload's admissions and evictions.

Times are this machine's wall clock when the watch saw the change (the API's own times have one-second
resolution). Nothing here asks Airflow: the report joins these records with the task instances.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from airflow_kueue_provider.kueue.checkpoints.shard_packing import packs_of_job
from airflow_kueue_provider.kueue.index_set import IndexSet
from airflow_kueue_provider.kueue.names import (
    DAG_ID_LABEL,
    INDEX_ANNOTATION,
    JOB_UID_LABEL,
    MAP_INDEX_LABEL,
    SHARDS_ENV,
    TASK_ID_LABEL,
    TRY_NUMBER_LABEL,
)


@dataclass
class PodRecord:
    namespace: str
    name: str
    job_uid: str
    index: int
    node: str = ""
    created: float = 0.0
    running: float | None = None
    ended: float | None = None
    phase: str = "Pending"
    disrupted: bool = False  # a DisruptionTarget condition (eviction, node loss, preemption)
    stopping: bool = False  # evicted or deleted before its first terminal phase: told to stop
    history: list[str] = field(default_factory=list)  # phases, DisruptionTarget and deletion, in order seen
    api_created: float = 0.0  # the pod's creationTimestamp (the apiserver's clock, whole seconds)
    deleting: float | None = None  # when its deletionTimestamp was first seen


@dataclass
class JobRecord:
    namespace: str
    name: str
    uid: str
    dag_id: str
    task_id: str
    map_index: int
    try_number: int
    completions: int
    shard_ids: list[int]  # Job index i runs shard shard_ids[i] (a checkpointed retry runs the unfinished)
    created: float
    unsuspended: float | None = None
    suspended: list[float] = field(default_factory=list)  # each time spec.suspend went true again (preempted)
    complete: float | None = None
    failed: float | None = None
    completed_indexes: str = ""
    index_shards: list[list[int]] = field(default_factory=list)  # packed: index i runs these (else shard_ids)

    @property
    def task_key(self) -> tuple[str, str, int]:
        return (self.dag_id, self.task_id, self.map_index)


@dataclass
class WorkloadRecord:
    job_uid: str
    admitted: list[float] = field(default_factory=list)  # each QuotaReserved=True seen
    evicted: list[tuple[float, str]] = field(default_factory=list)  # (seen, reason) each Evicted=True
    api_reserved: list[float] = field(default_factory=list)  # each QuotaReserved=True lastTransitionTime


def _cond(obj: dict[str, Any], ctype: str) -> dict[str, Any] | None:
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c.get("type") == ctype:
            return dict(c)
    return None


def _api_time(value: Any) -> float:
    """An API timestamp (RFC 3339, whole seconds) as epoch seconds; 0 when absent."""
    from datetime import datetime

    return datetime.fromisoformat(str(value).replace("Z", "+00:00")).timestamp() if value else 0.0


def _is_true(obj: dict[str, Any], ctype: str) -> bool:
    c = _cond(obj, ctype)
    return bool(c and c.get("status") == "True")


def task_identity(job: dict[str, Any]) -> tuple[str, str, int, int] | None:
    """(dag id, task id, map index, try) of a Job either provider made: ours annotates the Job, the cncf
    operator labels the pod template (``dag_id``, ``task_id``, ``map_index``, ``try_number``)."""
    ann = job["metadata"].get("annotations") or {}
    if DAG_ID_LABEL in ann:
        return (
            ann[DAG_ID_LABEL],
            ann.get(TASK_ID_LABEL, ""),
            int(ann.get(MAP_INDEX_LABEL, "-1")),
            int(ann.get(TRY_NUMBER_LABEL, "0")),
        )
    labels = ((job.get("spec") or {}).get("template") or {}).get("metadata", {}).get("labels") or {}
    if "dag_id" in labels:
        return (
            labels["dag_id"],
            labels.get("task_id", ""),
            int(labels.get("map_index", "-1")),
            int(labels.get("try_number", "0")),
        )
    return None


def index_shards_of(job: dict[str, Any]) -> list[list[int]]:
    """What each index of a packed Job runs (the operator's ``SHARDS_PER_POD_ENV``); [] unpacked."""
    packs = packs_of_job(job)
    if packs is None or not packs.is_packed:
        return []
    return [list(packs.shards_of_index(i)) for i in range(packs.index_count)]


def shard_ids_of(job: dict[str, Any]) -> list[int]:
    spec = job.get("spec") or {}
    completions = int(spec.get("completions") or 1)
    for container in (spec.get("template") or {}).get("spec", {}).get("containers") or []:
        for env in container.get("env") or []:
            if env.get("name") == SHARDS_ENV and env.get("value"):
                return list(IndexSet.parse(env["value"]))
    return list(range(completions))


class PodEvents(Protocol):
    """Told of a pod's first sight, of its first sight Running, of its being told to stop while running
    (after ``running_for`` seconds Running), of its success and of its end (its first terminal phase or its
    deletion, whatever came before), in the order of the pod watch's events."""

    def pod_seen(self, pod: dict[str, Any]) -> None: ...

    def pod_running(self, pod: dict[str, Any]) -> None: ...

    def pod_stopping(self, pod: dict[str, Any], running_for: float) -> None: ...

    def pod_succeeded(self, pod: dict[str, Any]) -> None: ...

    def pod_ended(self, pod: dict[str, Any]) -> None: ...


class ClusterRecorder:
    """List+watch of pods, Jobs and Workloads in ``namespaces``; records until ``stop()``."""

    def __init__(
        self,
        api_client: Any,
        namespaces: list[str],
        pod_events: PodEvents | None = None,
    ) -> None:
        self.api = api_client
        self.namespaces = namespaces
        self._pod_events = pod_events  # told of pods' events in their order, outside the lock
        self.pods: dict[str, PodRecord] = {}
        self.jobs: dict[str, JobRecord] = {}
        self.workloads: dict[str, WorkloadRecord] = {}
        self._suspended: dict[str, bool] = {}  # Job uid -> spec.suspend last seen
        self.lock = threading.Lock()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self.errors: list[str] = []

    # --- lifecycle ---
    def start(self) -> None:
        from kubernetes import client

        core, batch, custom = (
            client.CoreV1Api(self.api),
            client.BatchV1Api(self.api),
            client.CustomObjectsApi(self.api),
        )
        for ns in self.namespaces:
            lists: list[tuple[str, Callable[..., Any], Callable[[dict[str, Any]], None]]] = [
                ("pods", lambda ns=ns, **kw: core.list_namespaced_pod(ns, **kw), self._pod),
                ("jobs", lambda ns=ns, **kw: batch.list_namespaced_job(ns, **kw), self._job),
                (
                    "workloads",
                    lambda ns=ns, **kw: custom.list_namespaced_custom_object(
                        "kueue.x-k8s.io", "v1beta2", ns, "workloads", **kw
                    ),
                    self._workload,
                ),
            ]
            for kind, lister, handle in lists:
                t = threading.Thread(
                    target=self._follow, args=(lister, handle), name=f"night-{kind}-{ns}", daemon=True
                )
                t.start()
                self._threads.append(t)

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(timeout=15)

    def _follow(self, lister: Callable[..., Any], handle: Callable[[dict[str, Any]], None]) -> None:
        """List, then watch from the list's resourceVersion; list again after any break (410 included)."""
        while not self._stop.is_set():
            try:
                listed = lister(_preload_content=False)
                import json

                body = json.loads(listed.data)
                for item in body.get("items") or []:
                    handle(item)
                rv = body["metadata"]["resourceVersion"]
                while not self._stop.is_set():
                    resp = lister(
                        watch=True,
                        resource_version=rv,
                        timeout_seconds=30,
                        allow_watch_bookmarks=True,
                        _preload_content=False,
                    )
                    with contextlib.closing(resp):
                        for line in resp:
                            if self._stop.is_set():
                                return
                            event = json.loads(line)
                            if event["type"] == "ERROR":
                                raise RuntimeError(str(event["object"].get("message")))
                            obj = event["object"]
                            rv = obj["metadata"]["resourceVersion"]
                            if event["type"] != "BOOKMARK":
                                handle({**obj, "_deleted": event["type"] == "DELETED"})
            except Exception as exc:
                if not self._stop.is_set():
                    with self.lock:
                        self.errors.append(f"{time.strftime('%H:%M:%S')} {type(exc).__name__}: {exc}"[:300])
                    time.sleep(1)

    # --- handlers ---
    def _pod(self, obj: dict[str, Any]) -> None:
        now = time.time()
        meta, status = obj["metadata"], obj.get("status") or {}
        owner = next((o for o in meta.get("ownerReferences") or [] if o.get("controller")), None)
        if owner is None or owner.get("kind") != "Job":
            return
        index = (meta.get("annotations") or {}).get(INDEX_ANNOTATION)
        with self.lock:
            rec = self.pods.get(meta["uid"])
            seen = rec is None
            if rec is None:
                rec = self.pods[meta["uid"]] = PodRecord(
                    meta["namespace"], meta["name"], owner["uid"], int(index or -1), created=now
                )
            rec.node = (obj.get("spec") or {}).get("nodeName") or rec.node
            rec.api_created = rec.api_created or _api_time(meta.get("creationTimestamp"))
            phase = status.get("phase", "Pending")
            started = phase == "Running" and rec.running is None
            if started:
                rec.running = now
            had_ended = rec.ended is not None
            if phase in ("Succeeded", "Failed") and rec.ended is None:
                rec.ended = now
            if obj.get("_deleted") and rec.ended is None:
                rec.ended = now
            # A pod's outcome is its first terminal phase. On the bed a pod told to stop can get two: KWOK's
            # completion, scheduled before the eviction, lands beside the Failed of the eviction or of the
            # pod GC in either order (a short night saw Running > DisruptionTarget > deleting > Succeeded >
            # Failed, and the Job replaced that pod): the Job controller counts whichever it sees at its sync.
            # ``stopping`` marks such a pod: its end says nothing about its shard.
            was_terminal = rec.phase in ("Succeeded", "Failed")
            if not was_terminal and (not obj.get("_deleted") or phase in ("Succeeded", "Failed")):
                rec.phase = phase
            if _is_true(obj, "DisruptionTarget") and not rec.disrupted:
                rec.disrupted = True
                rec.history.append("DisruptionTarget")
            if meta.get("deletionTimestamp") and "deleting" not in rec.history:
                rec.history.append("deleting")
                rec.deleting = now
            # Evicted or deleted while still running: told to stop (an eviction, the Job controller removing
            # an extra pod), so an end it still reaches is not the shard's work run to the end on its own.
            # Evicted or deleted once ended (the node's loss, the namespace's teardown): not told to stop.
            told = _is_true(obj, "DisruptionTarget") or bool(meta.get("deletionTimestamp"))
            stopped_running: float | None = None
            if told and not was_terminal and phase not in ("Succeeded", "Failed"):
                if not rec.stopping and rec.running is not None:
                    stopped_running = now - rec.running
                rec.stopping = True
            if phase not in rec.history:
                rec.history.append(phase)
            succeeded = phase == "Succeeded" and not was_terminal and not rec.stopping
            ended = not had_ended and rec.ended is not None
        events = self._pod_events
        if events is not None:
            if seen:
                events.pod_seen(obj)
            if started:
                events.pod_running(obj)
            if stopped_running is not None:
                events.pod_stopping(obj, stopped_running)
            if succeeded:
                events.pod_succeeded(obj)
            if ended:
                events.pod_ended(obj)

    def _job(self, obj: dict[str, Any]) -> None:
        now = time.time()
        meta, spec, status = obj["metadata"], obj.get("spec") or {}, obj.get("status") or {}
        ident = task_identity(obj)
        if ident is None:
            return
        with self.lock:
            rec = self.jobs.get(meta["uid"])
            if rec is None:
                rec = self.jobs[meta["uid"]] = JobRecord(
                    meta["namespace"], meta["name"], meta["uid"], ident[0], ident[1], ident[2], ident[3],
                    int(spec.get("completions") or 1), shard_ids_of(obj), now,
                    index_shards=index_shards_of(obj),
                )  # fmt: skip
            if spec.get("suspend") is False and rec.unsuspended is None:
                rec.unsuspended = now
            if spec.get("suspend") and rec.unsuspended is not None and not self._suspended.get(meta["uid"]):
                rec.suspended.append(now)  # Kueue evicted its Workload: the Job controller removes its pods
            self._suspended[meta["uid"]] = bool(spec.get("suspend"))
            if _is_true(obj, "Complete") and rec.complete is None:
                rec.complete = now
            if _is_true(obj, "Failed") and rec.failed is None:
                rec.failed = now
            rec.completed_indexes = status.get("completedIndexes") or rec.completed_indexes

    def _workload(self, obj: dict[str, Any]) -> None:
        now = time.time()
        meta = obj["metadata"]
        job_uid = (meta.get("labels") or {}).get(JOB_UID_LABEL)
        if not job_uid:
            return
        with self.lock:
            rec = self.workloads.setdefault(job_uid, WorkloadRecord(job_uid))
            reserved = _is_true(obj, "QuotaReserved")
            if reserved:
                at = _api_time((_cond(obj, "QuotaReserved") or {}).get("lastTransitionTime"))
                if at and at not in rec.api_reserved:
                    rec.api_reserved.append(at)
            readmitted = bool(rec.evicted) and rec.evicted[-1][0] > rec.admitted[-1] if rec.admitted else True
            if reserved and readmitted:
                rec.admitted.append(now)
            evicted = _cond(obj, "Evicted")
            new_eviction = not rec.evicted or bool(rec.admitted and rec.admitted[-1] > rec.evicted[-1][0])
            if evicted and evicted.get("status") == "True" and new_eviction:
                rec.evicted.append((now, str(evicted.get("reason", ""))))

    # --- reads ---
    def snapshot(self) -> tuple[list[PodRecord], list[JobRecord], list[WorkloadRecord]]:
        with self.lock:
            return list(self.pods.values()), list(self.jobs.values()), list(self.workloads.values())

    def running_now(self) -> dict[str, int]:
        """Running pods per Job's task id right now (the timeline's sampler)."""
        out: dict[str, int] = {}
        with self.lock:
            task_of = {uid: (j.dag_id, j.task_id) for uid, j in self.jobs.items()}
            for p in self.pods.values():
                if p.running is not None and p.ended is None:
                    dag, task = task_of.get(p.job_uid, ("?", "?"))
                    key = "risk" if "risk" in dag else task.rsplit(".", 1)[-1]
                    out[key] = out.get(key, 0) + 1
        return out
