"""What happened during a soak, from witnesses that survive the faults.

- ``Recorder``: list+watch of Workloads, Jobs and Pods (one thread per kind). When a watch breaks (the
  apiserver or etcd was killed) it relists; the time between the break and the relist is a ``Gap`` of that
  kind: the checker treats what may have changed inside it as unknown, it never guesses.
- the process nodes' journals (``journal.jsonl``, written by the procnode processes themselves),
- the shard programs' items logs (``<shard>:<item> <pod> <t>``, written by the shard processes),
- the Airflow task instances' final states and results (the deployment's REST API, after the run), and the
  shards' done markers (Blob, after the run).

Everything is plain data (``History``), saved as JSON next to the soak's logs so a failing run can be
checked again offline (``History.load``).
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from airflow_kueue_provider.kueue.names import (
    CHECKPOINT_PREFIX_ENV,
    CHECKPOINT_URL_ENV,
    DAG_ID_LABEL,
    INDEX_ANNOTATION,
    MAP_INDEX_LABEL,
    RUN_ID_LABEL,
    SEAL_ANNOTATION,
    TASK_ID_LABEL,
    TRY_NUMBER_LABEL,
)

KINDS = ("Workload", "Job", "Pod")


def api_time(value: str | None) -> float | None:
    """An API timestamp (RFC 3339, whole seconds) as unix seconds."""
    if not value:
        return None
    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


def quantity(value: Any) -> float:
    from kubernetes.utils import parse_quantity

    return float(parse_quantity(str(value)))


# --- the reduced views the checker reads -------------------------------------------------------------------
def workload_view(obj: dict[str, Any]) -> dict[str, Any]:
    """Owner Job, ClusterQueue, conditions ``{type: [status, lastTransitionTime]}`` and the quota it holds
    (``status.admission`` less the pods Kueue may reclaim)."""
    meta, status = obj.get("metadata") or {}, obj.get("status") or {}
    owner: dict[str, Any] = next((o for o in meta.get("ownerReferences") or [] if o.get("kind") == "Job"), {})
    conditions = {
        c["type"]: [c.get("status") == "True", api_time(c.get("lastTransitionTime"))]
        for c in status.get("conditions") or []
    }
    admission = status.get("admission") or {}
    reclaim = {r["name"]: int(r.get("count", 0)) for r in status.get("reclaimablePods") or []}
    counts = {p["name"]: int(p.get("count", 1)) for p in (obj.get("spec") or {}).get("podSets") or []}
    usage: dict[str, float] = {}
    for assignment in admission.get("podSetAssignments") or []:
        count = int(assignment.get("count") or counts.get(assignment["name"], 1) or 1)
        left = max(0, count - reclaim.get(assignment["name"], 0)) / count
        for resource, amount in (assignment.get("resourceUsage") or {}).items():
            usage[resource] = usage.get(resource, 0.0) + quantity(amount) * left
    return {
        "job_uid": owner.get("uid"),
        "job_name": owner.get("name"),
        "created": api_time(meta.get("creationTimestamp")),
        "cluster_queue": admission.get("clusterQueue"),
        "conditions": conditions,
        "usage": usage,
    }


def job_view(obj: dict[str, Any]) -> dict[str, Any]:
    """The task-instance identity the Job claims, whether it is sealed, and where its shards checkpoint."""
    meta, spec = obj.get("metadata") or {}, obj.get("spec") or {}
    annotations = meta.get("annotations") or {}
    containers = ((spec.get("template") or {}).get("spec") or {}).get("containers") or [{}]
    env = {e.get("name"): e.get("value") for e in containers[0].get("env") or [] if "value" in e}
    status = obj.get("status") or {}
    return {
        "identity": {
            key: annotations.get(label)
            for key, label in (
                ("dag_id", DAG_ID_LABEL),
                ("task_id", TASK_ID_LABEL),
                ("run_id", RUN_ID_LABEL),
                ("map_index", MAP_INDEX_LABEL),
                ("try_number", TRY_NUMBER_LABEL),
            )
        },
        "sealed": bool(annotations.get(SEAL_ANNOTATION)),
        "created": api_time(meta.get("creationTimestamp")),
        "completions": spec.get("completions"),
        "checkpoint_url": env.get(CHECKPOINT_URL_ENV),
        "checkpoint_prefix": env.get(CHECKPOINT_PREFIX_ENV),
        "conditions": {c["type"]: c.get("status") == "True" for c in status.get("conditions") or []},
    }


def pod_view(obj: dict[str, Any]) -> dict[str, Any]:
    """Owner Job, node, phase and when its container started and ended (API times)."""
    meta, spec, status = obj.get("metadata") or {}, obj.get("spec") or {}, obj.get("status") or {}
    owner: dict[str, Any] = next((o for o in meta.get("ownerReferences") or [] if o.get("kind") == "Job"), {})
    started = finished = None
    for cs in status.get("containerStatuses") or []:
        state = cs.get("state") or {}
        running, terminated = state.get("running") or {}, state.get("terminated") or {}
        started = api_time(running.get("startedAt") or terminated.get("startedAt")) or started
        finished = api_time(terminated.get("finishedAt")) or finished
    return {
        "job_uid": owner.get("uid"),
        "job_name": owner.get("name"),
        "index": (meta.get("annotations") or {}).get(INDEX_ANNOTATION),
        "node": spec.get("nodeName"),
        "created": api_time(meta.get("creationTimestamp")),
        "phase": status.get("phase"),
        "started": started,
        "finished": finished,
        "deleting": meta.get("deletionTimestamp") is not None,
        # when its deletion was asked for: deletionTimestamp is that time plus the grace period
        "delete_asked": (api_time(meta.get("deletionTimestamp")) or 0)
        - int(meta.get("deletionGracePeriodSeconds") or 0)
        if meta.get("deletionTimestamp")
        else None,
        "grace": spec.get("terminationGracePeriodSeconds", 30),
    }


VIEWS: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
    "Workload": workload_view,
    "Job": job_view,
    "Pod": pod_view,
}


# --- the record --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Observation:
    """One state of one object as a watch (or a relist: ``event`` RELISTED / GONE) delivered it. ``batch``
    groups a relist's objects: they are one consistent snapshot and are applied together."""

    t: float
    kind: str
    event: str
    namespace: str
    name: str
    uid: str
    view: dict[str, Any]
    batch: int = 0


@dataclass(frozen=True)
class Gap:
    """A watch of ``kind`` was down from ``start`` to ``end``: changes inside are known only by their end
    state (and a condition's lastTransitionTime)."""

    kind: str
    start: float
    end: float


@dataclass(frozen=True)
class TaskOutcome:
    """A task instance's final state and XCom result, from the deployment's REST API."""

    dag_id: str
    task_id: str
    run_id: str
    map_index: int
    state: str | None
    try_number: int
    result: dict[str, Any] | None


@dataclass
class History:
    """Everything the checker reads. ``items_per_shard`` (dag_id/task_id -> items) names the tasks whose
    shards are real programs; ``limits`` is each ClusterQueue's nominal + borrowing limit per resource;
    ``expected_states`` is (dag_id/task_id -> final state); ``done`` maps "<prefix>/<shard>" to the shard's
    done marker as read from Blob."""

    start: float
    end: float
    observations: list[Observation] = field(default_factory=list)
    gaps: list[Gap] = field(default_factory=list)
    journal: list[dict[str, Any]] = field(default_factory=list)
    items: list[dict[str, Any]] = field(default_factory=list)  # {shard, item, pod, t}
    tasks: list[TaskOutcome] = field(default_factory=list)
    done: dict[str, dict[str, Any]] = field(default_factory=dict)
    items_per_shard: dict[str, int] = field(default_factory=dict)
    expected_output: dict[str, dict[str, Any]] = field(default_factory=dict)  # "<dag>/<task>/<shard>"
    limits: dict[str, dict[str, float]] = field(default_factory=dict)
    expected_states: dict[str, str] = field(default_factory=dict)
    tolerance: float = 2.0  # API times are whole seconds; watches deliver late

    def save(self, path: Path) -> None:
        path.write_text(json.dumps(asdict(self)))

    @classmethod
    def load(cls, path: Path) -> History:
        raw = json.loads(path.read_text())
        raw["observations"] = [Observation(**o) for o in raw["observations"]]
        raw["gaps"] = [Gap(**g) for g in raw["gaps"]]
        raw["tasks"] = [TaskOutcome(**t) for t in raw["tasks"]]
        return cls(**raw)


# --- the watch-based recorder ------------------------------------------------------------------------------
class Recorder:
    """Records Workloads, Jobs and Pods in ``namespaces`` until ``stop()``; each kind's thread has its own
    client from ``new_client()`` and survives apiserver and etcd outages (relist, and a ``Gap``)."""

    def __init__(
        self, new_client: Callable[[], Any], namespaces: Iterable[str], watch_seconds: int = 60
    ) -> None:
        self.new_client = new_client
        self.namespaces = set(namespaces)
        self.watch_seconds = watch_seconds
        self.observations: list[Observation] = []
        self.gaps: list[Gap] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._batches = 0
        self._threads = [
            threading.Thread(target=self._run, args=(kind,), name=f"soak-recorder-{kind}", daemon=True)
            for kind in KINDS
        ]

    def start(self) -> Recorder:
        for thread in self._threads:
            thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=self.watch_seconds + 15)

    @staticmethod
    def _list_fn(kind: str, api_client: Any) -> tuple[Callable[..., Any], dict[str, Any]]:
        from kubernetes import client

        if kind == "Workload":
            api = client.CustomObjectsApi(api_client)
            return api.list_cluster_custom_object, {
                "group": "kueue.x-k8s.io",
                "version": "v1beta2",
                "plural": "workloads",
            }
        if kind == "Job":
            return client.BatchV1Api(api_client).list_job_for_all_namespaces, {}
        return client.CoreV1Api(api_client).list_pod_for_all_namespaces, {}

    def _add(self, t: float, kind: str, event: str, obj: dict[str, Any], batch: int = 0) -> None:
        meta = obj.get("metadata") or {}
        if meta.get("namespace") not in self.namespaces:
            return
        observation = Observation(
            t, kind, event, meta["namespace"], meta["name"], meta.get("uid", ""), VIEWS[kind](obj), batch
        )
        with self._lock:
            self.observations.append(observation)

    def _relist(self, kind: str, api_client: Any, known: dict[str, dict[str, Any]]) -> tuple[str, float]:
        """List every object of ``kind`` as one batch (objects known before and missing now are GONE);
        returns the list's resource version and when it was taken."""
        fn, kwargs = self._list_fn(kind, api_client)
        listed = json.loads(fn(**kwargs, _preload_content=False, _request_timeout=30).data)
        t = time.time()
        with self._lock:
            self._batches += 1
            batch = self._batches
        seen: dict[str, dict[str, Any]] = {}
        for item in listed.get("items") or []:
            seen[item["metadata"]["uid"]] = item
            self._add(t, kind, "RELISTED", item, batch)
        for uid, last in known.items():
            if uid not in seen:
                self._add(t, kind, "GONE", last, batch)
        known.clear()
        known.update(seen)
        return str((listed.get("metadata") or {}).get("resourceVersion") or ""), t

    def _run(self, kind: str) -> None:
        from kubernetes import watch

        api_client = self.new_client()
        known: dict[str, dict[str, Any]] = {}
        version: str | None = None
        broken_at: float | None = None
        while not self._stop.is_set():
            try:
                if version is None:
                    version, listed_at = self._relist(kind, api_client, known)
                    if broken_at is not None:  # the gap ends when the list's snapshot was taken
                        with self._lock:
                            self.gaps.append(Gap(kind, broken_at, listed_at))
                        broken_at = None
                fn, kwargs = self._list_fn(kind, api_client)
                stream = watch.Watch().stream(
                    fn,
                    **kwargs,
                    resource_version=version,
                    timeout_seconds=self.watch_seconds,
                    allow_watch_bookmarks=True,
                    _request_timeout=self.watch_seconds + 10,
                )
                for event in stream:
                    obj = event.get("raw_object") or {}
                    version = (obj.get("metadata") or {}).get("resourceVersion") or version
                    if event["type"] == "BOOKMARK":
                        continue
                    if event["type"] == "ERROR":
                        raise RuntimeError(f"watch error: {obj}")
                    uid = obj["metadata"]["uid"]
                    if event["type"] == "DELETED":
                        known.pop(uid, None)
                    else:
                        known[uid] = obj
                    self._add(time.time(), kind, event["type"], obj)
                    if self._stop.is_set():
                        break
            except Exception:  # the apiserver or etcd is down, or the version expired: relist
                if broken_at is None:
                    broken_at = time.time()
                version = None
                self._stop.wait(1.0)
        if broken_at is not None:
            with self._lock:
                self.gaps.append(Gap(kind, broken_at, time.time()))


# --- the other witnesses -----------------------------------------------------------------------------------
def read_journals(procnode_dir: Path, since: float = 0.0) -> list[dict[str, Any]]:
    """Every process node's journal lines from ``since`` on (a torn last line is skipped)."""
    lines: list[dict[str, Any]] = []
    for path in sorted(procnode_dir.glob("*/journal.jsonl")):
        for raw in path.read_text(errors="replace").splitlines():
            with contextlib.suppress(ValueError):
                entry = json.loads(raw)
                if float(entry.get("t", 0)) >= since:
                    lines.append({**entry, "node": path.parent.name})
    return sorted(lines, key=lambda e: float(e["t"]))


def read_items(paths: Iterable[Path]) -> list[dict[str, Any]]:
    """The items logs' lines as dicts (the pod's name says whose shard it was: ``Index.pod_jobs``)."""
    found: list[dict[str, Any]] = []
    for path in paths:
        if not path.exists():
            continue
        for raw in path.read_text(errors="replace").splitlines():
            parts = raw.split(" ")
            with contextlib.suppress(ValueError, IndexError):  # a line torn by a SIGKILL mid-write
                shard, item = parts[0].split(":")
                found.append({"shard": int(shard), "item": int(item), "pod": parts[1], "t": float(parts[2])})
    return found


def task_outcomes(rest: Any, dag_id: str, run_id: str) -> list[TaskOutcome]:
    """Each task instance of the run with its state and its XCom result (None when it has none)."""
    outcomes = []
    for ti in rest.task_instances(dag_id, run_id):
        result = None
        with contextlib.suppress(Exception):
            result = rest.xcom(dag_id, run_id, ti["task_id"], ti["map_index"])
        outcomes.append(
            TaskOutcome(
                dag_id,
                ti["task_id"],
                run_id,
                int(ti["map_index"]),
                ti["state"],
                int(ti["try_number"]),
                result if isinstance(result, dict) else None,
            )
        )
    return outcomes
