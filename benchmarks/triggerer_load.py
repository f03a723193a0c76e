#!/usr/bin/env python
"""N deferred tasks in ONE real ``airflow triggerer``: our ``KueueJobTrigger`` against the cncf anchor.

Per implementation (a phase), on the local cluster and a real Airflow deployment (PostgreSQL + separate
processes, ``tests/integration/deployment.py``), in one run:

1. a fresh namespace + queues, the triggers' own ServiceAccount, kubeconfig and APF FlowSchemas, and a
   reference watch (all from ``trigger_requests.py``); N single-index Jobs whose pods KWOK holds Running;
2. a fresh Airflow database and a DAG file of N tasks that *start from the trigger*: the scheduler defers
   them itself (``DagRun.schedule_tis`` → ``TaskInstance.defer_task``), so no worker process ever runs;
   then the scheduler and DAG processor are stopped;
3. one triggerer, its ``kubernetes_default`` pointed at the ServiceAccount; its process tree (supervisor +
   trigger runner) sampled every second with psutil: boot, pick-up of all N triggers, a steady window;
4. the Jobs released over ``--release-seconds``; detection = the triggerer's "Trigger fired event" log
   timestamp minus the reference watch's first sighting of ``Complete=True``; every TI's stored event is
   read back from the database (missed = never fired, or not ``status: success``).

Before the phases, the triggerer alone (no trigger: "idle"); after them, a "control" phase: the same N
tasks with a trigger that only sleeps, which is what the triggerer itself costs with N triggers.

Method, figures and limits: benchmarks/README.md. Try: ``--tasks 20 --steady-seconds 30``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
for _path in (str(REPO), str(HERE)):
    if _path not in sys.path:
        sys.path.insert(0, _path)

import trigger_requests as tr  # noqa: E402  (needs the path above)

RUN_LABEL = "airflow-kueue.io/benchmark-run"  # on the fake nodes a run adds (they go at its end)
NODE_POOL_LABEL = "airflow-kueue.io/benchmark-pool"
NODE_TAINT = "airflow-kueue.io/benchmark"  # only the benchmark's pods tolerate it
TARGET_CPU_PCT = 5.0
TARGET_RSS_MB = 300.0
TARGET_P99_MS = 250.0
FIRED = "Trigger fired event"
STARTING = re.compile(r"^trigger .* starting$")
LABELS = {
    "ours": "ours: `KueueJobTrigger` (shared watch)",
    "cncf": "cncf: `KubernetesJobTrigger` (poll)",
    "control": "control: `DateTimeTrigger` (sleeps, no Kubernetes)",
}
# The control: the same N start-from-trigger tasks with a trigger that only sleeps (until 2099), i.e. what
# the triggerer itself costs with N triggers, whatever they do; no Jobs and no release.
CONTROL_CLS = "airflow.providers.standard.triggers.temporal.DateTimeTrigger"
CONTROL_KWARGS = {"target_time": "2099-01-01T00:00:00+00:00"}
IMPLS = [*tr.IMPLS, "control"]

DAG_TEMPLATE = '''"""Benchmark-only DAGs (benchmarks/triggerer_load.py): tasks that start in the triggerer."""
import json
from datetime import datetime
from pathlib import Path

from airflow.sdk import DAG, BaseOperator
from airflow.triggers.base import StartTriggerArgs

SPEC = json.loads((Path(__file__).parent / {spec_name!r}).read_text())


class BenchDeferredJobWait(BaseOperator):
    """Deferred from the start: the scheduler creates its trigger; no worker ever runs it."""

    start_from_trigger = True

    def __init__(self, *, trigger_cls, trigger_kwargs, **kwargs):
        super().__init__(**kwargs)
        self.start_trigger_args = StartTriggerArgs(
            trigger_cls=trigger_cls,
            trigger_kwargs=trigger_kwargs,
            next_method="execute_complete",
            next_kwargs=None,
            timeout=None,
        )

    def execute(self, context):
        raise RuntimeError("benchmark tasks never run in a worker")

    def execute_complete(self, context, event=None):
        return event


for dag_id, tasks in SPEC["dags"].items():
    with DAG(dag_id, schedule="@once", start_date=datetime(2026, 1, 1), catchup=False, tags=["benchmark"]):
        for task_id, trigger_kwargs in tasks.items():
            BenchDeferredJobWait(
                task_id=task_id, trigger_cls=SPEC["trigger_cls"], trigger_kwargs=trigger_kwargs
            )
'''


def progress(msg: str) -> None:
    print(f"{datetime.now():%H:%M:%S} {msg}", file=sys.stderr, flush=True)


def wait_until(what: str, fn: Callable[[], Any], timeout: float, interval: float = 1.0) -> Any:
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        if last := fn():
            return last
        time.sleep(interval)
    raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what} (last: {last!r})")


def parse_ts(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


# --------------------------------------------------------------------------------------------------------
# Fake node capacity: KWOK nodes of our own, tainted so that only the benchmark's pods land on them (and
# deleting them afterwards evicts nobody else's pods)
# --------------------------------------------------------------------------------------------------------
def node_pool(run_id: str) -> dict[str, Any]:
    return {
        "prefix": f"bench-{run_id}",
        "instance_type": "Standard_D16ds_v5",
        "cpu": "16",
        "memory": "64Gi",
        "labels": {"workload": "benchmark", NODE_POOL_LABEL: run_id, RUN_LABEL: run_id},
        "taints": [{"key": NODE_TAINT, "value": run_id, "effect": "NoSchedule"}],
    }


def create_nodes(cluster: Any, run_id: str, pods: int, pods_per_node: int = 100) -> list[str]:
    """``ceil(pods / pods_per_node)`` fake nodes (110 pods each, as devcluster's), Ready before returning."""
    from devcluster.manifests import fake_node

    pool = node_pool(run_id)
    names = [f"{pool['prefix']}-{i:03d}" for i in range(math.ceil(pods / pods_per_node))]
    for i, name in enumerate(names):
        cluster.core.create_node(fake_node(name, pool, zone=1 + i % 3))

    def ready() -> bool:
        nodes = cluster.core.list_node(label_selector=f"{RUN_LABEL}={run_id}").items
        ok = [
            n
            for n in nodes
            if any(c.type == "Ready" and c.status == "True" for c in n.status.conditions or [])
        ]
        return len(ok) == len(names)

    wait_until(f"{len(names)} benchmark nodes Ready", ready, timeout=120)
    return names


def delete_nodes(cluster: Any, run_id: str | None) -> None:
    """This run's nodes, or (``run_id`` None) those of every run."""
    from kubernetes.client.rest import ApiException

    selector = f"{RUN_LABEL}={run_id}" if run_id else RUN_LABEL
    for node in cluster.core.list_node(label_selector=selector).items:
        try:
            cluster.core.delete_node(node.metadata.name)
        except ApiException as exc:
            if exc.status != 404:
                raise


# --------------------------------------------------------------------------------------------------------
# Jobs: N single-index Indexed Jobs held Running by KWOK until released
# --------------------------------------------------------------------------------------------------------
@dataclass
class HeldJob:
    name: str
    uid: str
    created: float  # epoch of metadata.creationTimestamp
    pod: str = ""


def job_manifest(name: str, queue: str, run_id: str, cpu_m: int) -> dict[str, Any]:
    from tests.integration.cluster import indexed_job

    job = indexed_job(
        name, queue, completions=1, cpu=f"{cpu_m}m", memory="16Mi", run_duration="1s", hold=True,
        labels=tr.MANAGED_BY,
    )  # fmt: skip
    job["spec"]["template"]["spec"]["tolerations"] = [
        {"key": NODE_TAINT, "operator": "Equal", "value": run_id, "effect": "NoSchedule"}
    ]
    return job


def create_held_jobs(env: Any, n: int, run_id: str, cpu_m: int, threads: int) -> dict[str, HeldJob]:
    def create(i: int) -> HeldJob:
        made = env.create_job(job_manifest(f"bench-{i:04d}", env.local_queue, run_id, cpu_m))
        meta = made["metadata"]
        return HeldJob(meta["name"], meta["uid"], parse_ts(meta["creationTimestamp"]))

    with ThreadPoolExecutor(threads) as pool:
        jobs = list(pool.map(create, range(n)))
    return {j.name: j for j in jobs}


def wait_pods_running(cluster: Any, namespace: str, jobs: dict[str, HeldJob], timeout: float) -> None:
    """Until every Job has a Running (held) pod; records each Job's pod name."""

    def running() -> bool:
        resp = cluster.core.list_namespaced_pod(
            namespace, field_selector="status.phase=Running", _preload_content=False
        )  # raw JSON: 1,000 V1Pod models would take seconds of CPU per look
        for pod in json.loads(resp.data)["items"]:
            meta = pod["metadata"]
            job = jobs.get((meta.get("labels") or {}).get("batch.kubernetes.io/job-name", ""))
            if job is not None:
                job.pod = meta["name"]
        return all(j.pod for j in jobs.values())

    wait_until(f"{len(jobs)} held pods Running", running, timeout=timeout, interval=3)


def release_spread(cluster: Any, namespace: str, jobs: list[HeldJob], seconds: float) -> dict[str, float]:
    """Patch each pod's hold annotation, evenly spread over ``seconds``; returns job -> release epoch."""
    from devcluster.manifests import HOLD_ANNOTATION

    released: dict[str, float] = {}
    body = {"metadata": {"annotations": {HOLD_ANNOTATION: "released"}}}
    start = time.monotonic()
    step = seconds / max(1, len(jobs))

    def release(job: HeldJob) -> None:
        released[job.name] = time.time()
        cluster.core.patch_namespaced_pod(job.pod, namespace, body)

    with ThreadPoolExecutor(8) as pool:
        for i, job in enumerate(jobs):
            time.sleep(max(0.0, start + i * step - time.monotonic()))
            pool.submit(release, job)
    return released


# --------------------------------------------------------------------------------------------------------
# Process tree sampling: the triggerer (supervisor) and every descendant (its trigger-runner subprocess)
# --------------------------------------------------------------------------------------------------------
@dataclass
class Sample:
    at: float  # epoch
    cpu_s: float  # cumulative CPU seconds of every process ever seen in the tree
    cpu_pct: float  # over the last interval, % of one core
    rss_mb: float  # sum over the live tree
    pss_mb: float | None  # proportional set size sum (shared pages split): what the tree really costs
    procs: int
    machine_s: float = 0.0  # cumulative busy CPU seconds of the whole machine (every core, every process)


class TreeSampler:
    """Samples CPU and memory of a process and its descendants every ``interval`` seconds (own thread).

    CPU is the sum of each pid's user+system time, keeping the last value of pids that exit, so a dying
    child's work is not lost. RSS double-counts pages a forked child still shares with its parent; PSS
    splits them."""

    def __init__(self, pid: int, interval: float = 1.0) -> None:
        self.pid = pid
        self.interval = interval
        self.samples: list[Sample] = []
        self.names: dict[int, str] = {}
        self._cpu: dict[int, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._main, name="tree-sampler", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)

    def _procs(self) -> list[Any]:
        import psutil

        try:
            root = psutil.Process(self.pid)
            return [root, *root.children(recursive=True)]
        except psutil.Error:
            return []

    def _main(self) -> None:
        import psutil

        last_at, last_cpu = time.time(), 0.0
        while not self._stop.is_set():
            rss = pss = 0.0
            pss_ok = True
            procs = self._procs()
            for proc in procs:
                try:
                    with proc.oneshot():
                        times = proc.cpu_times()
                        self._cpu[proc.pid] = times.user + times.system
                        rss += proc.memory_info().rss
                        try:
                            pss += proc.memory_full_info().pss
                        except (psutil.Error, AttributeError):
                            pss_ok = False
                        self.names.setdefault(proc.pid, " ".join(proc.cmdline()[:3])[:120])
                except psutil.Error:
                    continue
            now, cpu = time.time(), sum(self._cpu.values())
            pct = 100.0 * (cpu - last_cpu) / (now - last_at) if self.samples else 0.0
            mb = 1024 * 1024
            sample = Sample(now, cpu, pct, rss / mb, pss / mb if pss_ok else None, len(procs), machine_busy())
            self.samples.append(sample)
            last_at, last_cpu = now, cpu
            self._stop.wait(self.interval)


def machine_busy() -> float:
    """Busy CPU seconds of the whole machine since boot (all cores): to tell how loaded it was meanwhile."""
    import psutil

    t = psutil.cpu_times()
    return float(sum(t) - t.idle - getattr(t, "iowait", 0.0))


def window_stats(samples: list[Sample], start: float, end: float) -> dict[str, Any]:
    """CPU (mean over the window from cumulative CPU time, and the highest 1-s sample), RSS and PSS."""
    inside = [s for s in samples if start <= s.at <= end]
    if len(inside) < 2:
        return {"seconds": end - start, "samples": len(inside)}
    first, last = inside[0], inside[-1]
    rss = [s.rss_mb for s in inside]
    pss = [s.pss_mb for s in inside if s.pss_mb is not None]
    return {
        "seconds": last.at - first.at,
        "samples": len(inside),
        "cpu_mean_pct": 100.0 * (last.cpu_s - first.cpu_s) / (last.at - first.at),
        "cpu_peak_pct": max(s.cpu_pct for s in inside[1:]),
        "cpu_p95_pct": tr.pct([s.cpu_pct for s in inside[1:]], 95),
        "cpu_seconds": last.cpu_s - first.cpu_s,
        "machine_pct": 100.0 * (last.machine_s - first.machine_s) / (last.at - first.at),
        "rss_mean_mb": sum(rss) / len(rss),
        "rss_peak_mb": max(rss),
        "pss_mean_mb": (sum(pss) / len(pss)) if pss else None,
        "pss_peak_mb": max(pss) if pss else None,
    }


# --------------------------------------------------------------------------------------------------------
# The Airflow side: a deployment per phase (fresh database copy), a DAG file of start-from-trigger tasks
# --------------------------------------------------------------------------------------------------------
def dag_spec(
    impl: str, jobs: dict[str, HeldJob], namespace: str, queue: str, poll_interval: float, per_dag: int
) -> tuple[dict[str, Any], dict[str, tuple[str, str]]]:
    """The spec the DAG file reads (trigger class, DAG id -> task id -> trigger kwargs) and the map
    (dag_id, task_id) -> job. The kwargs are those of ``trigger_requests.build_trigger`` (constructed,
    ``serialize()``d), plus what the real operators pass: ours the Job's UID and creation time, the
    cncf ``KubernetesJobOperator`` its pod's name.

    Why several small DAGs: for a start-from-trigger task the triggerer ships the task's whole serialized
    DAG to the runner and deserializes it once per trigger (to render templates), so one DAG of 1,000
    tasks would cost O(N²) at pick-up, a cost of the harness, not of the triggers."""
    spec: dict[str, Any] = {"trigger_cls": tr.IMPLS.get(impl, CONTROL_CLS), "dags": {}}
    where: dict[str, tuple[str, str]] = {}
    for i, job in enumerate(sorted(jobs.values(), key=lambda j: j.name)):
        if impl == "control":
            kwargs: dict[str, Any] = dict(CONTROL_KWARGS)
        else:
            classpath, kwargs = tr.build_trigger(impl, job.name, namespace, queue, poll_interval).serialize()
            assert classpath == tr.IMPLS[impl], classpath
        if impl == "ours":
            kwargs.update(job_uid=job.uid, submitted_at=job.created)
        elif impl == "cncf":
            kwargs.update(pod_names=[job.pod])
        dag_id, task_id = f"bench_{impl}_{i // per_dag:04d}", f"wait_{job.name.replace('-', '_')}"
        spec["dags"].setdefault(dag_id, {})[task_id] = kwargs
        where[job.name] = (dag_id, task_id)
    return spec, where


def new_deployment(pg: Any, root: Path, impl: str, n: int, dags: int, triggerers: int = 1) -> Any:
    from tests.integration.deployment import TEMPLATE_DB, AirflowDeployment

    database = f"bench_{impl}_{uuid.uuid4().hex[:6]}"
    pg.create_database(database, template=TEMPLATE_DB)
    config = {
        "triggerer.capacity": str(max(1000, n)),
        "scheduler.max_dagruns_to_create_per_loop": str(max(10, dags)),
        "scheduler.max_dagruns_per_loop_to_schedule": str(max(20, dags)),
    }
    if triggerers > 1:  # a dead triggerer's triggers are taken over within seconds (see scenarios.py)
        config |= {"triggerer.job_heartbeat_sec": "2", "triggerer.triggerer_health_check_threshold": "12"}
    home = root / impl
    return AirflowDeployment.create(home, pg, database, tr_cluster_env(), config=config)


def tr_cluster_env() -> dict[str, str]:
    from tests.integration.deployment import _cluster_env

    return _cluster_env()


def deferred_counts(deployment: Any, prefix: str) -> dict[str, int]:
    rows = deployment.sql(
        "SELECT coalesce(state, 'none'), count(*) FROM task_instance WHERE dag_id LIKE %s GROUP BY 1",
        prefix + "%",
    )
    return {str(r[0]): int(r[1]) for r in rows}


def defer_all(deployment: Any, prefix: str, n: int, timeout: float) -> float:
    """Scheduler + DAG processor until all N task instances are deferred; then both are stopped."""
    started = time.monotonic()
    for name in ("dag-processor", "scheduler"):
        deployment.start_component(name)

    def all_deferred() -> bool:
        deployment.check_alive()
        counts = deferred_counts(deployment, prefix)
        wrong = {k: v for k, v in counts.items() if k not in ("deferred", "none", "scheduled")}
        if wrong:
            raise RuntimeError(f"task instances left the deferred path: {counts}")
        return counts.get("deferred", 0) >= n

    try:
        wait_until(f"{n} task instances deferred", all_deferred, timeout=timeout, interval=2)
    finally:
        for name in ("scheduler", "dag-processor"):
            deployment.components[name].stop()
    return time.monotonic() - started


def trigger_log_files(home: Path, prefix: str) -> list[Path]:
    return list((home / "logs").glob(f"dag_id={prefix}*/**/*.log.trigger.*.log"))


@dataclass
class TriggerTimes:
    started: float | None = None  # epoch of "trigger ... starting"
    fired: float | None = None  # epoch of "Trigger fired event"
    events: int = 0


def read_trigger_logs(files: Iterable[Path]) -> dict[tuple[str, str], TriggerTimes]:
    """(dag_id, task_id) -> when the triggerer started its trigger and when it logged the event."""
    out: dict[tuple[str, str], TriggerTimes] = {}
    for path in files:
        parts = dict(p.split("=", 1) for p in path.parts if "=" in p)
        times = out.setdefault((parts.get("dag_id", ""), parts.get("task_id", "")), TriggerTimes())
        for line in path.read_text(errors="replace").splitlines():
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            event, ts = str(entry.get("event", "")), entry.get("timestamp")
            if not ts:
                continue
            if STARTING.match(event) and times.started is None:
                times.started = parse_ts(str(ts))
            elif event == FIRED:
                times.events += 1
                times.fired = times.fired or parse_ts(str(ts))
    return out


_MAIN_LOG_LINE = re.compile(r"^(\S+Z) \[\w+\s*\] (Trigger fired event|trigger .* starting)\b.*?"
                            r"name='([^/']+)/[^/']+/([^/']+)/")  # fmt: skip


def read_main_log(text: str, into: dict[tuple[str, str], TriggerTimes]) -> int:
    """Add the trigger lines that reached the triggerer's own log instead of the task's trigger log.

    The runner logs "Trigger fired event" (with the runner's timestamp) and then finishes the trigger; when
    the supervisor has already dropped the trigger's log file by the time it reads that line, it writes
    it to its own log (seen for large payloads: the cncf event carries the whole Job). Returns how many."""
    found = 0
    for line in text.splitlines():
        if "Trigger fired event" not in line and " starting" not in line:
            continue
        if not (m := _MAIN_LOG_LINE.match(line)):
            continue
        times = into.setdefault((m.group(3), m.group(4)), TriggerTimes())
        found += 1
        if m.group(2) == FIRED:
            times.events += 1
            times.fired = min(times.fired or math.inf, parse_ts(m.group(1)))
        elif times.started is None:
            times.started = parse_ts(m.group(1))
    return found


def stored_events(deployment: Any, prefix: str) -> dict[tuple[str, str], dict[str, Any]]:
    """(dag_id, task_id) -> state, next_method and the event's status as the triggerer stored it."""
    rows = deployment.sql(
        "SELECT dag_id, task_id, state, next_method, next_kwargs FROM task_instance WHERE dag_id LIKE %s",
        prefix + "%",
    )
    return {(r[0], r[1]): {"state": r[2], "next_method": r[3], "status": event_status(r[4])} for r in rows}


def event_status(next_kwargs: Any) -> str | None:
    """The ``status`` of the stored trigger event (Airflow's own decoder, serde or BaseSerialization)."""
    if not next_kwargs:
        return None
    from airflow.models.trigger import _decode_next_kwargs

    try:
        event = _decode_next_kwargs(next_kwargs).get("event")
    except Exception as exc:
        return f"undecodable: {type(exc).__name__}"
    return str(event.get("status")) if isinstance(event, dict) else f"not a dict: {type(event).__name__}"


# --------------------------------------------------------------------------------------------------------
# One phase
# --------------------------------------------------------------------------------------------------------
@dataclass
class TaskRecord:
    job: str
    dag_id: str
    task_id: str
    released: float | None = None
    reference_complete: float | None = None
    trigger_started: float | None = None
    trigger_fired: float | None = None
    fired_events: int = 0
    state: str | None = None
    next_method: str | None = None
    status: str | None = None
    detection_ms: float | None = None


@dataclass
class PhaseResult:
    impl: str
    namespace: str
    tasks: int
    marks: dict[str, float] = field(default_factory=dict)  # epoch of each step
    windows: dict[str, dict[str, Any]] = field(default_factory=dict)  # boot, pickup, steady, release
    attributed: dict[str, int] = field(default_factory=dict)
    records: list[TaskRecord] = field(default_factory=list)
    samples: list[Sample] = field(default_factory=list)
    processes: dict[int, str] = field(default_factory=dict)
    blocked: list[str] = field(default_factory=list)
    stalls: list[dict[str, Any]] = field(default_factory=list)  # each blocked warning, when, and GC
    gc_pauses: list[dict[str, Any]] = field(default_factory=list)  # collections >= 50 ms (--gc-log)
    triggerer_warnings: dict[str, int] = field(default_factory=dict)
    reference_errors: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


class Phase:
    """Everything one implementation's run needs; ``run()`` returns its result, cleanup in ``close()``."""

    def __init__(self, impl: str, ctx: RunContext) -> None:
        self.impl, self.ctx, self.args = impl, ctx, ctx.args
        self.result = PhaseResult(impl, "", ctx.args.tasks)
        self.env: Any = None
        self.identity: tr.Identity | None = None
        self.ref: tr.ReferenceWatch | None = None
        self.deployment: Any = None
        self.sampler: TreeSampler | None = None
        self.jobs: dict[str, HeldJob] = {}
        self.before: tr.Scrape | None = None
        self.py_spy: subprocess.Popen[bytes] | None = None
        self.prefix = f"bench_{impl}_"

    def mark(self, name: str) -> float:
        now = time.time()
        self.result.marks[name] = now
        if others := foreign_load():
            self.result.notes.append(f"at {name}, other test runs on the machine: {others}")
        return now

    def say(self, msg: str) -> None:
        progress(f"[{self.impl}] {msg}")

    def run(self) -> PhaseResult:
        self.prepare_cluster()
        self.prepare_airflow()
        self.start_triggerer()
        self.wait_pickup()
        self.steady()
        self.release_and_wait()
        self.finish()
        return self.result

    # --- steps ---
    def prepare_cluster(self) -> None:
        from tests.integration.cluster import create_kueue_env

        n, a = self.args.tasks, self.args
        self.env = create_kueue_env(
            self.ctx.cluster, f"bench-tl-{self.impl}", cpu=f"{n * a.cpu_millis + 1000}m",
            memory=f"{n * 16 + 1024}Mi", node_labels={NODE_POOL_LABEL: self.ctx.run_id}, spot=False,
        )  # fmt: skip
        self.result.namespace = self.env.namespace
        self.identity = tr.setup_identity(self.ctx.cluster, self.env.namespace, self.ctx.tmp)
        tr.probe_identity(self.identity, self.env.namespace, self.ctx.metrics)
        self.ref = tr.ReferenceWatch(os.environ["KUBECONFIG"], self.env.namespace)
        self.ref.start()
        self.mark("jobs_create")
        self.jobs = create_held_jobs(self.env, n, self.ctx.run_id, a.cpu_millis, a.create_threads)
        self.say(
            f"{n} Jobs created in {time.time() - self.result.marks['jobs_create']:.0f}s; waiting for pods"
        )
        wait_pods_running(self.ctx.cluster, self.env.namespace, self.jobs, timeout=a.setup_timeout)
        self.say(f"{n} held pods Running after {time.time() - self.result.marks['jobs_create']:.0f}s")

    def prepare_airflow(self) -> None:
        a = self.args
        dags = math.ceil(a.tasks / a.tasks_per_dag)
        self.deployment = new_deployment(
            self.ctx.pg, self.ctx.tmp / "airflow", self.impl, a.tasks, dags, a.triggerers
        )
        namespace, queue = (self.env.namespace, self.env.local_queue) if self.env else ("", "")
        spec, where = dag_spec(self.impl, self.jobs, namespace, queue, a.poll_interval, a.tasks_per_dag)
        self.result.records = [TaskRecord(job, *where[job]) for job in sorted(where)]
        dag_folder = self.deployment.home / "dags"
        (dag_folder / f"{self.prefix}spec.json").write_text(json.dumps(spec))
        self.deployment.write_dag(
            f"{self.prefix}dags", DAG_TEMPLATE.format(spec_name=f"{self.prefix}spec.json")
        )
        self.mark("defer_start")
        took = defer_all(self.deployment, self.prefix, a.tasks, timeout=a.setup_timeout)
        self.say(f"{a.tasks} task instances deferred by the scheduler in {took:.0f}s (scheduler stopped)")

    def start_triggerer(self) -> None:
        env: dict[str, str] = {}
        if self.identity is not None:
            conn = {"conn_type": "kubernetes", "extra": {"kube_config_path": str(self.identity.kubeconfig)}}
            env["AIRFLOW_CONN_KUBERNETES_DEFAULT"] = json.dumps(conn)
        if self.args.asyncio_debug:  # names every loop step over 0.1 s; slows the loop: diagnosis only
            env["PYTHONASYNCIODEBUG"] = "1"
        if self.args.gc_log:
            env["PYTHONPATH"] = str(write_gc_logger(self.ctx.tmp))
        if self.args.gc_log_objects:  # counting them lengthens each logged pause: diagnosis only
            env["BENCH_GC_OBJECTS"] = "1"
        env.update(dict(kv.split("=", 1) for kv in self.args.triggerer_env))
        self.deployment.component_env["triggerer"] = env
        if self.identity is not None:
            self.before = self.ctx.metrics.scrape(self.identity.flow_schemas)
        self.mark("triggerer_start")
        for i in range(2, self.args.triggerers + 1):  # the others first; triggerer-1 is the measured one
            other = self.deployment.start_component(f"triggerer-{i}")
            set_autogroup_nice(other.pid, self.args.autogroup_nice)
        comp = self.deployment.start_component("triggerer-1")
        set_autogroup_nice(comp.pid, self.args.autogroup_nice)
        self.sampler = TreeSampler(comp.pid, self.args.sample_interval)
        self.sampler.start()
        if self.args.py_spy:
            self.py_spy = start_py_spy(
                comp.pid,
                self.args.results / f"{self.args.name}.{self.impl}.pyspy.json",
                self.args.py_spy == "native",
            )

    def wait_pickup(self) -> None:
        n: int = self.args.tasks
        home: Path = self.deployment.home

        def all_started() -> bool:
            self.deployment.check_alive()
            files = trigger_log_files(home, self.prefix)
            return len(files) >= n and sum(1 for t in read_trigger_logs(files).values() if t.started) >= n

        wait_until(f"{n} triggers started", all_started, timeout=self.args.setup_timeout, interval=2)
        times = read_trigger_logs(trigger_log_files(home, self.prefix)).values()
        first = min(t.started for t in times if t.started)
        last = max(t.started for t in times if t.started)
        self.result.marks.update(first_trigger_start=first, last_trigger_start=last)
        self.mark("all_started")
        since_start = last - self.result.marks["triggerer_start"]
        self.say(
            f"{n} triggers started in {last - first:.1f}s ({since_start:.0f}s after the triggerer's start)"
        )
        time.sleep(self.args.settle_seconds)

    def steady(self) -> None:
        self.mark("steady_start")
        self.say(f"steady window {self.args.steady_seconds:.0f}s")
        end = time.monotonic() + self.args.steady_seconds
        kill_at = None if self.args.kill_after is None else time.monotonic() + self.args.kill_after
        while time.monotonic() < end:
            if kill_at is not None and time.monotonic() >= kill_at:
                victim = f"triggerer-{self.args.triggerers}"  # never triggerer-1: the one measured
                self.deployment.kill(victim)
                self.mark("triggerer_killed")
                self.say(f"killed {victim}; triggerer-1 takes its triggers over")
                kill_at = None
            self.deployment.check_alive()
            time.sleep(min(5.0, max(0.0, end - time.monotonic())))
        self.mark("steady_end")

    def release_and_wait(self) -> None:
        a = self.args
        order = sorted(self.jobs.values(), key=lambda j: j.name)
        self.mark("release_start")
        self.say(f"releasing {len(order)} Jobs over {a.release_seconds:.0f}s")
        released = release_spread(self.ctx.cluster, self.env.namespace, order, a.release_seconds)
        self.mark("release_end")
        for rec in self.result.records:
            rec.released = released.get(rec.job)

        def none_deferred() -> bool:
            self.deployment.check_alive()
            return deferred_counts(self.deployment, self.prefix).get("deferred", 0) == 0

        try:
            wait_until("every trigger fired", none_deferred, timeout=a.fire_timeout, interval=2)
        except TimeoutError:
            left = deferred_counts(self.deployment, self.prefix).get("deferred", 0)
            self.result.notes.append(
                f"{left} task instances still deferred {a.fire_timeout:.0f}s after release"
            )
        self.mark("all_fired")
        time.sleep(3)

    def finish(self) -> None:
        assert self.sampler is not None
        for name in [n for n in self.deployment.components if n.startswith("triggerer-")]:
            self.deployment.components[name].stop(grace=30)
        self.mark("triggerer_stopped")
        self.sampler.stop()
        time.sleep(2)
        if self.identity is not None and self.before is not None:
            after = self.ctx.metrics.scrape(self.identity.flow_schemas)
            self.result.attributed = tr._delta(after.attributed, self.before.attributed)
        self.result.samples = self.sampler.samples
        self.result.processes = self.sampler.names
        self.result.reference_errors = list(self.ref.errors) if self.ref else []
        self.collect_records()
        self.collect_logs()
        self.result.windows = phase_windows(self.result)

    def collect_records(self) -> None:
        times = read_trigger_logs(trigger_log_files(self.deployment.home, self.prefix))
        for name in [n for n in self.deployment.components if n.startswith("triggerer-")]:
            if moved := read_main_log(self.deployment.components[name].log(), times):
                self.result.notes.append(f"{moved} trigger log lines were in {name}'s own log")
        stored = stored_events(self.deployment, self.prefix)
        for rec in self.result.records:
            t = times.get((rec.dag_id, rec.task_id), TriggerTimes())
            rec.trigger_started, rec.trigger_fired, rec.fired_events = t.started, t.fired, t.events
            row = stored.get((rec.dag_id, rec.task_id), {})
            rec.state, rec.next_method, rec.status = (
                row.get("state"),
                row.get("next_method"),
                row.get("status"),
            )
            seen = (self.ref.complete.get(rec.job) or self.ref.failed.get(rec.job)) if self.ref else None
            if seen:
                rec.reference_complete = seen[1]
                if rec.trigger_fired is not None:
                    rec.detection_ms = (rec.trigger_fired - seen[1]) * 1000.0

    def collect_logs(self) -> None:
        comp = self.deployment.components["triggerer-1"]
        text = comp.log()
        self.result.blocked = self.deployment.blocked_thread_lines()
        self.result.gc_pauses = gc_pauses(text, comp.pid)
        self.result.stalls = stalls(self.result.blocked, self.result.gc_pauses, self.result.marks)
        self.result.triggerer_warnings = triggerer_warnings(text)
        keep = self.args.results / f"{self.args.name}.{self.impl}.triggerer.log"
        shutil.copyfile(comp.log_path, keep)

    def close(self) -> None:
        """Stop what runs and delete what this phase made; each step on its own, so one failure does not
        leave the rest behind."""
        steps: list[tuple[str, Callable[[], None]]] = [
            ("sampler", lambda: self.sampler.stop() if self.sampler else None),
            ("py-spy", lambda: stop_py_spy(self.py_spy)),
            ("airflow", lambda: self.deployment.stop() if self.deployment else None),
            ("reference watch", lambda: self.ref.stop() if self.ref else None),
            ("identity", lambda: tr.teardown_identity(self.ctx.cluster, self.identity)),
            ("namespace", self._delete_env),
        ]
        for what, step in steps:
            try:
                step()
            except Exception as exc:  # cleanup goes on
                progress(f"[{self.impl}] cleanup of {what} failed: {exc}")

    def _delete_env(self) -> None:
        from tests.integration.cluster import delete_kueue_env

        if self.env is None:
            return
        delete_kueue_env(self.env)
        if not tr.wait_namespace_gone(self.ctx.cluster, self.env.namespace, timeout=900):
            progress(f"namespace {self.env.namespace} still terminating after 900 s")


GC_LOGGER = """import gc, os, sys, time

_started = [0.0]
_objects = os.environ.get("BENCH_GC_OBJECTS") == "1"


def _gc_log(phase, info):
    if phase == "start":
        _started[0] = time.perf_counter()
        return
    took = time.perf_counter() - _started[0]
    if took >= 0.05:
        sys.stderr.write(
            f"GCLOG pid {os.getpid()} generation {info['generation']} took {took * 1000:.0f} ms, "
            f"collected {info['collected']}, at {time.time():.3f}"
            + (f", tracked objects {len(gc.get_objects())}" if _objects else "")
            + "\\n"
        )
        sys.stderr.flush()


gc.callbacks.append(_gc_log)
"""


def write_gc_logger(tmp: Path) -> Path:
    """A ``sitecustomize`` for the triggerer's processes (through PYTHONPATH; the venv has none) that writes
    every garbage collection of 50 ms or more to stderr, which the triggerer logs: a diagnosis tool for the
    loop stalls Airflow reports, which land in whichever coroutine allocates when a collection starts."""
    folder = tmp / "gc-logger"
    folder.mkdir(exist_ok=True)
    (folder / "sitecustomize.py").write_text(GC_LOGGER)
    return folder


def set_autogroup_nice(pid: int | None, nice: int | None) -> bool:
    """Give a process's scheduler autogroup (its session: the bed starts each component in a session of its
    own) the niceness ``nice``.

    Why: with ``kernel.sched_autogroup_enabled`` (the default here) CPU is shared between autogroups first,
    and a process's own nice value only ranks it inside its autogroup. The bed's ``nice -n -10`` for the
    triggerer therefore does not lift it above the other sessions (the cluster, other test runs); this does,
    as the bed intends ("as if each triggerer had a node of its own")."""
    path = Path(f"/proc/{pid}/autogroup")
    if pid is None or nice is None or not path.exists():
        return False
    try:
        path.write_text(str(nice))
    except OSError as exc:
        progress(f"could not set the autogroup niceness of {pid}: {exc}")
        return False
    return True


def start_py_spy(pid: int, out: Path, native: bool, seconds: int = 60) -> subprocess.Popen[bytes]:
    """Stacks of every thread of the triggerer and its runner (``--subprocesses``, idle ones too) 100 times
    a second over its first ``seconds``, timestamped (chrometrace): what the event loop's thread did at the
    moment Airflow says it was blocked. ``native`` adds the C frames (a blocked ``write`` or a wait for the
    GIL tell apart there); py-spy then pauses the process for each sample."""
    argv = [str(Path(sys.executable).with_name("py-spy")), "record", "--pid", str(pid), "--subprocesses",
            "--threads", "--idle", "--rate", "100", "--duration", str(seconds), "--format", "chrometrace",
            "-o", str(out)] + (["--native"] if native else ["--nonblocking"])  # fmt: skip
    return subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def stop_py_spy(proc: subprocess.Popen[bytes] | None) -> None:
    if proc is None:
        return
    try:
        proc.wait(timeout=90)
    except subprocess.TimeoutExpired:
        proc.terminate()
        proc.wait(10)


class ControlPhase(Phase):
    """The same N start-from-trigger tasks with a trigger that only sleeps: no namespace, Jobs, identity or
    release; boot, pick-up and the steady window only, so the triggerer's own cost shows."""

    def run(self) -> PhaseResult:
        self.jobs = {f"ctl-{i:04d}": HeldJob(f"ctl-{i:04d}", "", 0.0) for i in range(self.args.tasks)}
        self.prepare_airflow()
        self.start_triggerer()
        self.wait_pickup()
        self.steady()
        self.mark("release_start")  # nothing to release: the windows after steady are empty
        self.mark("all_fired")
        self.finish()
        return self.result


_GC_LINE = re.compile(
    r"GCLOG pid (\d+) generation (\d) took (\d+) ms, collected (\d+), at ([\d.]+)(?:, tracked objects (\d+))?"
)
_BLOCKED_LINE = re.compile(r"^(\S+Z) .*blocked for ([\d.]+) seconds")


def gc_pauses(text: str, supervisor_pid: int | None) -> list[dict[str, Any]]:
    """The ``--gc-log`` lines of the triggerer's log: which process, generation, how long, when it ended."""
    out = []
    for m in _GC_LINE.finditer(text):
        pid = int(m.group(1))
        out.append({"process": "supervisor" if pid == supervisor_pid else "runner", "pid": pid,
                    "generation": int(m.group(2)), "ms": int(m.group(3)), "collected": int(m.group(4)),
                    "at": float(m.group(5)), "objects": int(m.group(6)) if m.group(6) else None})  # fmt: skip
    return out


def phase_of(at: float, marks: dict[str, float]) -> str:
    for name, start, end in (
        ("boot", "triggerer_start", "first_trigger_start"),
        ("pickup", "first_trigger_start", "steady_start"),
        ("steady", "steady_start", "steady_end"),
        ("release", "release_start", "triggerer_stopped"),
    ):
        if marks.get(start, math.inf) <= at < marks.get(end, -math.inf):
            return name
    return "other"


def stalls(blocked: list[str], pauses: list[dict[str, Any]], marks: dict[str, float]) -> list[dict[str, Any]]:
    """Each "async thread was blocked" warning: when it was logged, how long, in which part of the phase, and
    the trigger runner's garbage collection that explains it (``gc_explained``), if one does."""
    out = []
    for line in blocked:
        if m := _BLOCKED_LINE.match(line):
            end = parse_ts(m.group(1))
            out.append({"at": end, "seconds": float(m.group(2)), "phase": phase_of(end, marks)})
    for st, gc_ms in zip(out, gc_explained(out, pauses), strict=True):
        st["runner_gc_ms"] = gc_ms
    return out


def gc_explained(stalls: list[dict[str, Any]], pauses: list[dict[str, Any]]) -> list[int | None]:
    """For each stall, the trigger runner's collection (>= 50 ms) that ended inside it and lasted at least
    60 % of it, else None; a collection explains one stall at most (the first that ends after it)."""
    out: list[int | None] = [None] * len(stalls)
    for gc in (p for p in pauses if p["process"] == "runner"):
        for i, st in enumerate(stalls):
            inside = st["at"] - st["seconds"] - 0.1 <= gc["at"] <= st["at"] + 0.05
            if inside and out[i] is None and gc["ms"] >= 600 * st["seconds"]:
                out[i] = gc["ms"]
                break
    return out


def triggerer_warnings(text: str) -> dict[str, int]:
    """WARNING/ERROR lines of the triggerer's own log, numbers blanked, counted."""
    out: dict[str, int] = {}
    level = re.compile(r"\[(warning|error|critical)\s*\]\s*(.*)", re.IGNORECASE)
    for line in text.splitlines():
        if "GCLOG" in line:  # --gc-log's own lines (the runner's stderr is logged as errors)
            continue
        if m := level.search(line):
            msg = re.sub(r"\b\d+(\.\d+)?\b", "…", m.group(2))[:200]
            out[f"{m.group(1).upper()} {msg}"] = out.get(f"{m.group(1).upper()} {msg}", 0) + 1
    return dict(sorted(out.items(), key=lambda kv: -kv[1]))


def phase_windows(res: PhaseResult) -> dict[str, dict[str, Any]]:
    m, s = res.marks, res.samples
    first = m.get("first_trigger_start", m["triggerer_start"])
    return {
        "boot": window_stats(s, m["triggerer_start"], first),
        "pickup": window_stats(s, first - 1.0, m.get("last_trigger_start", first) + 10.0),
        "steady": window_stats(s, m["steady_start"], m["steady_end"]),
        "release": window_stats(s, m["release_start"], m["all_fired"]),
        "all": window_stats(s, m["triggerer_start"], m["triggerer_stopped"]),
    }


# --------------------------------------------------------------------------------------------------------
# The idle triggerer (no trigger at all): what Airflow's triggerer costs by itself on this machine
# --------------------------------------------------------------------------------------------------------
def idle_baseline(ctx: RunContext) -> dict[str, Any]:
    deployment = new_deployment(ctx.pg, ctx.tmp / "airflow", "idle", 0, 1)
    try:
        comp = deployment.start_component("triggerer-1")
        set_autogroup_nice(comp.pid, ctx.args.autogroup_nice)
        sampler = TreeSampler(comp.pid, ctx.args.sample_interval)
        sampler.start()
        wait_until("the idle triggerer's job row", lambda: deployment.triggerer_job_ids(running=True), 120)
        time.sleep(10)  # its first loops
        start = time.time()
        time.sleep(ctx.args.idle_seconds)
        stats = window_stats(sampler.samples, start, time.time())
        sampler.stop()
        stats["processes"] = sampler.names
        return stats
    finally:
        deployment.stop()


# --------------------------------------------------------------------------------------------------------
# The run: shared context, cleanup, report
# --------------------------------------------------------------------------------------------------------
@dataclass
class RunContext:
    args: argparse.Namespace
    run_id: str
    tmp: Path
    cluster: Any
    metrics: tr.Metrics
    pg: Any


@contextmanager
def run_context(args: argparse.Namespace) -> Iterator[RunContext]:
    """Cluster clients, fake nodes and one PostgreSQL server (a copy of the migrated template) for the run;
    nodes, server and temp files go at the end whatever happened."""
    from kubernetes import config

    from tests.integration.cluster import Cluster
    from tests.integration.deployment import Postgres, migrated_template, postgres_bin

    run_id = uuid.uuid4().hex[:6]
    cluster = Cluster(config.new_client_from_config(config_file=os.environ["KUBECONFIG"]))
    state = Path(os.environ.get("DEVCLUSTER_STATE", REPO / ".devcluster"))
    metrics = tr.Metrics(args.apiserver_metrics, None, state / "pki")
    bin_dir = postgres_bin()
    if bin_dir is None:
        raise SystemExit("PostgreSQL server binaries not found: apt-get install postgresql (or POSTGRES_BIN)")
    tmp = Path(tempfile.mkdtemp(prefix="bench-triggerer-load-"))
    pg = Postgres.new_base(bin_dir)
    try:
        pg.copy_data_from(migrated_template(bin_dir, {**os.environ, **tr_cluster_env()}))
        pg.start()
        nodes = create_nodes(cluster, run_id, args.tasks)
        progress(f"run {run_id}: {len(nodes)} benchmark nodes Ready; PostgreSQL on port {pg.port}")
        yield RunContext(args, run_id, tmp, cluster, metrics, pg)
    finally:
        steps: list[tuple[str, Callable[[], None]]] = [
            ("nodes", lambda: delete_nodes(cluster, run_id)),
            ("postgres", lambda: pg.stop()),
        ]
        for what, step in steps:
            try:
                step()
            except Exception as exc:
                progress(f"cleanup of {what} failed: {exc}")
        if args.keep_airflow_home:
            progress(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


def summarize(res: PhaseResult, poll_interval: float) -> dict[str, Any]:
    recs = res.records
    deferred_s = [r.trigger_fired - r.trigger_started for r in recs if r.trigger_fired and r.trigger_started]
    job_hours = sum(deferred_s) / 3600.0
    lat = [r.detection_ms for r in recs if r.detection_ms is not None]
    requests = tr._reads(res.attributed)
    missed = [r.job for r in recs if not (r.state == "scheduled" and r.next_method == "execute_complete"
                                         and r.status == "success")]  # fmt: skip
    control = res.impl == "control"  # its triggers never fire by design
    w = res.windows
    return {
        "impl": res.impl,
        "tasks": res.tasks,
        "cpu_steady_pct": w["steady"].get("cpu_mean_pct"),
        "cpu_steady_peak_pct": w["steady"].get("cpu_peak_pct"),
        "cpu_pickup_peak_pct": w["pickup"].get("cpu_peak_pct"),
        "cpu_pickup_mean_pct": w["pickup"].get("cpu_mean_pct"),
        "cpu_release_mean_pct": w["release"].get("cpu_mean_pct"),
        "rss_steady_mb": w["steady"].get("rss_mean_mb"),
        "rss_peak_mb": w["all"].get("rss_peak_mb"),
        "pss_steady_mb": w["steady"].get("pss_mean_mb"),
        "pss_peak_mb": w["all"].get("pss_peak_mb"),
        "pickup_s": res.marks.get("last_trigger_start", 0) - res.marks.get("first_trigger_start", 0),
        "requests": requests,
        "requests_other": res.attributed.get(tr.OTHER, 0),
        "job_hours": job_hours,
        "mean_deferred_s": (sum(deferred_s) / len(deferred_s)) if deferred_s else None,
        "per_job_hour": (requests / job_hours) if job_hours else None,
        "p50_ms": tr.pct(lat, 50),
        "p99_ms": tr.pct(lat, 99),
        "max_ms": max(lat) if lat else None,
        "min_ms": min(lat) if lat else None,
        "latencies": len(lat),
        "missed": None if control else len(missed),
        "missed_jobs": [] if control else missed[:20],
        "fired_twice": sum(1 for r in recs if r.fired_events > 1),
        "blocked": len(res.blocked),
        "blocked_max_s": max((blocked_seconds(x) for x in res.blocked), default=None),
        "poll_interval": poll_interval,
    }


def blocked_seconds(line: str) -> float:
    m = re.search(r"blocked for ([\d.]+) seconds", line)
    return float(m.group(1)) if m else 0.0


def _f(v: float | None, fmt: str = "{:.0f}") -> str:
    return "n/a" if v is None else fmt.format(v)


def _ratio(c: float | None, o: float | None) -> str:
    if c is None or o is None or o <= 0:
        return "n/a"
    return f"{c / o:.1f}x"


def render(raw: dict[str, Any]) -> str:
    args, rows, idle = raw["args"], raw["summary"], raw.get("idle")
    lines = [
        f"# Triggerer load benchmark, {raw['finished']}",
        "",
        f"N = {args['tasks']} deferred tasks per implementation in one real `airflow triggerer` "
        f"(supervisor + trigger-runner subprocess); steady window {args['steady_seconds']:.0f} s with all N "
        f"deferred; Jobs released over {args['release_seconds']:.0f} s; cncf `poll_interval` "
        f"{args['poll_interval']:g} s, "
        f"`get_logs=False`, `do_xcom_push=False`; benchmark wall time {raw['wall_s'] / 60:.1f} min.",
        "",
        "| implementation | tasks | CPU steady (% of a core) | CPU peak at pick-up | RSS steady | RSS peak "
        "| requests per job-hour | detection p50 | p99 | max | missed | blocked warnings |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for k, s in rows.items():
        missed = "n/a" if s["missed"] is None else f"{s['missed']}/{s['tasks']}"
        lines.append(
            f"| {LABELS.get(k, k)} | {s['tasks']} | {_f(s['cpu_steady_pct'], '{:.1f} %')} "
            f"| {_f(s['cpu_pickup_peak_pct'], '{:.0f} %')} | {_f(s['rss_steady_mb'], '{:.0f} MB')} "
            f"| {_f(s['rss_peak_mb'], '{:.0f} MB')} | {_f(s['per_job_hour'], '{:.2f}')} "
            f"| {_f(s['p50_ms'], '{:.0f} ms')} | {_f(s['p99_ms'], '{:.0f} ms')} "
            f"| {_f(s['max_ms'], '{:.0f} ms')} | {missed} | {s['blocked']} |"
        )
    lines += ratio_lines(rows) + target_lines(rows)
    lines += idle_lines(rows, idle) + detail_lines(raw) + method_lines(args)
    lines += ["", "## Versions and machine", ""] + [f"- {k}: {v}" for k, v in raw["versions"].items()]
    return "\n".join(lines) + "\n"


def idle_lines(rows: dict[str, Any], idle: dict[str, Any] | None) -> list[str]:
    """What the figures are made of: the triggerer without any trigger (idle), the same N tasks with a
    trigger that only sleeps (control), and what each implementation adds on top of the control. Airflow's
    own footprint is most of the RSS figure (the forked trigger runner's shared pages count twice in an
    RSS sum)."""
    lines: list[str] = []
    if idle and idle.get("rss_mean_mb") is not None:
        lines += [
            "",
            f"The same triggerer idle (no trigger, {idle.get('seconds', 0):.0f} s): CPU "
            f"{_f(idle.get('cpu_mean_pct'), '{:.1f}')} % of a core, RSS {_f(idle.get('rss_mean_mb'))} MB, "
            f"PSS {_f(idle.get('pss_mean_mb'))} MB.",
        ]
    base = rows.get("control")
    if base is None or len(rows) < 2:
        return lines
    lines += ["", "Steady, over the control (the trigger's own share):", ""]
    for k, s in rows.items():
        if k == "control":
            continue
        deltas = [
            f"{label} {_f(s[key] - base[key] if s[key] is not None and base[key] is not None else None, fmt)}"
            for label, key, fmt in (
                ("CPU", "cpu_steady_pct", "{:+.1f} points"),
                ("RSS", "rss_steady_mb", "{:+.0f} MB"),
                ("PSS", "pss_steady_mb", "{:+.0f} MB"),
            )
        ]
        lines.append(f"- {k}: {', '.join(deltas)}")
    return lines


def ratio_lines(rows: dict[str, Any]) -> list[str]:
    if not ("ours" in rows and "cncf" in rows):
        return []
    o, c = rows["ours"], rows["cncf"]
    keys = [("CPU steady", "cpu_steady_pct"), ("CPU peak at pick-up", "cpu_pickup_peak_pct"),
            ("RSS steady", "rss_steady_mb"), ("RSS peak", "rss_peak_mb"),
            ("requests per job-hour", "per_job_hour"), ("detection p50", "p50_ms"), ("p99", "p99_ms"),
            ("max", "max_ms")]  # fmt: skip
    return ["", "Ratios cncf / ours: " + ", ".join(f"{t} {_ratio(c[k], o[k])}" for t, k in keys) + "."]


def target_lines(rows: dict[str, Any]) -> list[str]:
    if "ours" not in rows:
        return []
    o = rows["ours"]
    checks = [
        (f"CPU < {TARGET_CPU_PCT:g} % of a core", _f(o["cpu_steady_pct"], "{:.1f} %"),
         o["cpu_steady_pct"] is not None and o["cpu_steady_pct"] < TARGET_CPU_PCT),
        (f"RSS < {TARGET_RSS_MB:.0f} MB (peak)", _f(o["rss_peak_mb"], "{:.0f} MB"),
         o["rss_peak_mb"] is not None and o["rss_peak_mb"] < TARGET_RSS_MB),
        ("0 missed", str(o["missed"]), o["missed"] == 0),
        (f"detection p99 < {TARGET_P99_MS:.0f} ms", _f(o["p99_ms"], "{:.0f} ms"),
         o["p99_ms"] is not None and o["p99_ms"] < TARGET_P99_MS),
        ("0 blocked warnings", str(o["blocked"]), o["blocked"] == 0),
    ]  # fmt: skip
    text = "; ".join(f"{what}: {got}, {'met' if ok else 'NOT met'}" for what, got, ok in checks)
    lines = ["", f"Targets for ours: {text}."]
    if c := rows.get("control"):
        lines.append(
            f"For scale, the control (same triggerer and N tasks, a trigger that only sleeps): RSS peak "
            f"{_f(c['rss_peak_mb'])} MB, {c['blocked']} blocked warnings, CPU steady "
            f"{_f(c['cpu_steady_pct'], '{:.1f}')} %."
        )
    return lines


def detail_lines(raw: dict[str, Any]) -> list[str]:
    lines = [
        "",
        "## Per phase",
        "",
        "| implementation | window | seconds | CPU mean | CPU peak (1 s) | CPU p95 | RSS mean / peak "
        "| PSS mean / peak | whole machine busy (of 200 %) |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for k, phase in raw["phases"].items():
        for name, w in phase["windows"].items():
            lines.append(
                f"| {k} | {name} | {w.get('seconds', 0):.0f} | {_f(w.get('cpu_mean_pct'), '{:.1f}')} % "
                f"| {_f(w.get('cpu_peak_pct'))} % | {_f(w.get('cpu_p95_pct'))} % "
                f"| {_f(w.get('rss_mean_mb'))} / {_f(w.get('rss_peak_mb'))} MB "
                f"| {_f(w.get('pss_mean_mb'))} / {_f(w.get('pss_peak_mb'))} MB "
                f"| {_f(w.get('machine_pct'))} % |"
            )
    lines += ["", "## Observations", ""]
    for k, phase in raw["phases"].items():
        s = raw["summary"][k]
        lines.append(
            f"- {k}: pick-up of {s['tasks']} triggers took {s['pickup_s']:.1f} s; {s['requests']} attributed "
            f"requests ({_kv(phase['attributed'])}) over {s['job_hours']:.2f} job-hours (mean deferred "
            f"{_f(s['mean_deferred_s'], '{:.0f}')} s); {s['latencies']} detection latencies, min "
            f"{_f(s['min_ms'])} ms; fired twice: {s['fired_twice']}."
        )
        cluster_ms = [
            (r["reference_complete"] - r["released"]) * 1000.0
            for r in phase["records"]
            if r["reference_complete"] and r["released"]
        ]
        if cluster_ms:
            lines.append(
                f"- {k}: release (pod patch) to Job `Complete=True` seen by the reference watch: p50 "
                f"{_f(tr.pct(cluster_ms, 50))} ms, p99 {_f(tr.pct(cluster_ms, 99))} ms (the cluster's part)."
            )
        if s["missed"]:
            lines.append(f"- {k}: missed or wrong: {', '.join(s['missed_jobs'])}")
        lines += stall_lines(k, phase)
        for msg, count in list(phase["triggerer_warnings"].items())[:6]:
            lines.append(f"- {k}: triggerer logged {count}x: {msg}")
        foreign = [n for n in phase["notes"] if n.startswith("at ") and "other test runs" in n]
        if foreign:
            marks = [n.split(",", 1)[0][3:] for n in foreign]
            lines.append(
                f"- {k}: OTHER TEST RUNS shared the machine and cluster at {len(foreign)} of "
                f"{len(phase['marks'])} steps ({', '.join(marks)}), e.g. {foreign[0].split(': ', 1)[1][:140]}"
            )
        others = [n for n in phase["notes"] if n not in foreign]
        for note in others + [f"reference watch: {e}" for e in phase["reference_errors"][:3]]:
            lines.append(f"- {k}: {note}")
        names = sorted({n for n in phase["processes"].values() if n})
        lines.append(f"- {k}: processes sampled: {'; '.join(names)}")
    lines += [f"- {x}" for x in raw.get("machine_notes", [])]
    return lines


def stall_lines(k: str, phase: dict[str, Any]) -> list[str]:
    """Blocked-thread warnings by part of the phase, how many coincide with a full garbage collection in
    the trigger runner, and the runner's long collections overall."""
    lines = []
    if phase["stalls"]:
        by_phase: dict[str, int] = {}
        for st in phase["stalls"]:
            by_phase[st["phase"]] = by_phase.get(st["phase"], 0) + 1
        explained = gc_explained(phase["stalls"], phase["gc_pauses"])
        with_gc = [ms for ms in explained if ms]
        lines.append(
            f"- {k}: {len(phase['stalls'])} blocked-thread warnings ({_kv(by_phase)}), longest "
            f"{max(st['seconds'] for st in phase['stalls']):.2f} s; {len(with_gc)} of them are mostly a "
            f"garbage collection in the trigger runner"
            + (f" ({', '.join(str(ms) for ms in with_gc[:8])} ms)" if with_gc else "")
            + "; the rest: "
            + (", ".join(f"{st['phase']} {st['seconds']:.2f} s" for st, ms in zip(phase["stalls"], explained,
                                                                              strict=True) if not ms)[:300]
               or "none")
        )  # fmt: skip
    runner = [p for p in phase["gc_pauses"] if p["process"] == "runner"]
    if runner:
        by_phase_ms: dict[str, int] = {}
        for p in runner:
            name = phase_of(p["at"], phase["marks"])
            by_phase_ms[name] = max(by_phase_ms.get(name, 0), p["ms"])
        lines.append(
            f"- {k}: the trigger runner's garbage collections >= 50 ms: {len(runner)}, longest by part: "
            f"{', '.join(f'{n} {v} ms' for n, v in by_phase_ms.items())}"
        )
    return lines


def _kv(d: dict[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in d.items()) or "none"


def method_lines(args: dict[str, Any]) -> list[str]:
    nice = args.get("autogroup_nice")
    return [
        "",
        "## Method",
        "",
        "- Each implementation gets a fresh namespace + Kueue queues, a fresh Airflow database (a copy of a "
        "migrated template) and its own ServiceAccount; its triggerer's `kubernetes_default` "
        "(`AIRFLOW_CONN_KUBERNETES_DEFAULT`) is a kubeconfig with that ServiceAccount's token, and APF "
        "FlowSchemas matching only it count its requests on the server "
        "(`apiserver_flowcontrol_dispatched_requests_total`), from just before the triggerer starts until "
        "after it stopped: GET/LIST/WATCH on jobs, jobs/status, workloads, workloads/status, "
        "pendingworkloads.",
        f"- N single-index Indexed Jobs ({args['cpu_millis']}m CPU, 16Mi) on fake KWOK nodes added for the "
        "run (tainted for the benchmark's pods only, deleted at the end), held Running "
        "(`kwok.airflow-kueue.io/hold`) until released.",
        f"- The tasks start from the trigger (`start_from_trigger`, `StartTriggerArgs`) in DAGs of "
        f"{args['tasks_per_dag']} tasks: the scheduler defers them itself, then the scheduler and DAG "
        "processor are stopped, so no worker runs; the triggerer is then started and picks all N up at once "
        "(Airflow's default `max_trigger_to_select_per_loop`, 50 per loop). For such tasks Airflow ships "
        "the serialized DAG with each trigger and builds a template context from it (not done for a "
        "`TaskDeferred` from a worker): a pick-up cost of the harness, the same for both; small DAGs keep it "
        "small.",
        "- The triggerer runs at `nice -10` (the deployment bed) and, since the kernel shares CPU between "
        "scheduler autogroups (sessions) before niceness counts, its autogroup and the harness's get "
        f"niceness {nice if nice is not None else 'unchanged'} (`/proc/<pid>/autogroup`).",
        f"- CPU and RSS: psutil every {args['sample_interval']:g} s over the triggerer's process tree "
        "(supervisor + trigger runner). Steady = mean CPU over the steady window (CPU-seconds / seconds), "
        f"which starts {args['settle_seconds']:.0f} s after the last trigger started; pick-up = from 1 s "
        "before the first trigger started to 10 s after the last, peak = highest 1-s sample. RSS sums the "
        "processes (the forked runner's shared pages count twice); PSS splits them.",
        "- Requests per job-hour = attributed requests / Σ per trigger of (event logged - trigger started), "
        "both from the triggerer's per-task trigger logs.",
        '- Detection = the triggerer\'s "Trigger fired event" log timestamp - the wall clock at which a '
        "separate reference watch (admin identity, own thread) first saw the Job `Complete=True`; same "
        "machine clock. Missed = a task instance not moved to `scheduled` with `next_method` "
        "`execute_complete` and a stored event of `status: success`.",
        "- Blocked warnings = lines \"Triggerer's async thread was blocked\" in the triggerer's log "
        "(threshold `[triggerer] blocked_main_thread_warning_threshold`, 0.2 s). "
        + (
            "A `sitecustomize` on the triggerer's PYTHONPATH logs every garbage collection of >= 50 ms with "
            "its process, so each warning can be matched with a collection in the trigger runner."
            if args.get("gc_log")
            else ""
        ),
    ]


def foreign_load() -> str:
    """Other pytest runs (other sessions share this machine and cluster), as ``pid command`` heads."""
    found = subprocess.run(["pgrep", "-af", "pytest"], capture_output=True, text=True, check=False)
    mine = str(os.getpid())
    heads = [x[:100] for x in found.stdout.splitlines() if x.split()[:1] != [mine]]
    return "; ".join(heads[:2]) + (f" (+{len(heads) - 2})" if len(heads) > 2 else "")


def machine_notes() -> list[str]:
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    busy = subprocess.run(
        ["pgrep", "-af", "slow_machine|pytest"], capture_output=True, text=True, check=False
    )
    others = [x for x in busy.stdout.splitlines() if str(os.getpid()) not in x.split()[:1]]
    notes = [f"load average at the end: {load}"]
    if others:
        notes.append(f"other load on the machine during the run: {len(others)} process(es) such as "
                     f"`{others[0][:120]}`")  # fmt: skip
    return notes


# --------------------------------------------------------------------------------------------------------
def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tasks", type=int, default=1000, help="deferred tasks (and Jobs) per implementation")
    p.add_argument("--steady-seconds", type=float, default=300.0, help="steady window, all N deferred")
    p.add_argument("--release-seconds", type=float, default=60.0, help="release the N Jobs over this")
    p.add_argument(
        "--impls",
        default="ours,cncf,control",
        help="comma list of: ours, cncf, control (a trigger that only sleeps: the triggerer's own cost)",
    )
    p.add_argument("--name", default="triggerer_load", help="base name of the result files")
    p.add_argument("--poll-interval", type=float, default=10.0, help="cncf trigger poll_interval")
    p.add_argument("--tasks-per-dag", type=int, default=10)
    p.add_argument("--triggerers", type=int, default=1, help="triggerers sharing them (measured: the 1st)")
    p.add_argument(
        "--kill-after",
        type=float,
        default=None,
        help="seconds into the steady window: SIGKILL the last triggerer (triggerer-1 takes over)",
    )
    p.add_argument("--settle-seconds", type=float, default=15.0, help="after the last pick-up, before steady")
    p.add_argument("--idle-seconds", type=float, default=30.0, help="idle triggerer baseline (0: skip)")
    p.add_argument("--sample-interval", type=float, default=1.0)
    p.add_argument("--cpu-millis", type=int, default=10, help="CPU request per Job, millicores")
    p.add_argument("--create-threads", type=int, default=8)
    p.add_argument(
        "--setup-timeout", type=float, default=1800.0, help="Jobs running, tasks deferred, pick-up"
    )
    p.add_argument("--fire-timeout", type=float, default=None, help="after release (default release + 180 s)")
    p.add_argument("--apiserver-metrics", default="https://127.0.0.1:26443/metrics")
    p.add_argument("--results", type=Path, default=HERE / "results")
    p.add_argument("--keep-airflow-home", action="store_true", help="keep the deployments' homes (logs)")
    p.add_argument(
        "--autogroup-nice",
        type=int,
        default=-10,
        help="niceness of the triggerer's and this harness's scheduler autogroups (root only; see "
        "set_autogroup_nice)",
    )
    p.add_argument("--asyncio-debug", action="store_true", help="PYTHONASYNCIODEBUG=1 in the triggerer")
    p.add_argument(
        "--gc-log",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="log the triggerer's garbage collections >= 50 ms (a sitecustomize through PYTHONPATH)",
    )
    p.add_argument("--gc-log-objects", action="store_true", help="--gc-log also counts tracked objects")
    p.add_argument(
        "--triggerer-env",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra environment for the triggerer (diagnosis), e.g. "
        "AIRFLOW__LOGGING__NAMESPACE_LEVELS=airflow_kueue_provider=WARNING",
    )
    p.add_argument(
        "--py-spy",
        nargs="?",
        const="python",
        choices=("python", "native"),
        help="py-spy record the triggerer tree over its first minute (native: with C frames)",
    )
    p.add_argument("--cleanup", action="store_true", help="only remove what interrupted runs left behind")
    p.add_argument("--render", type=Path, help="only rewrite the .md of this saved .json (no run)")
    args = p.parse_args(argv)
    args.impls = [x.strip() for x in args.impls.split(",") if x.strip()]
    if unknown := set(args.impls) - set(IMPLS):
        p.error(f"unknown implementations: {unknown}")
    if args.fire_timeout is None:
        args.fire_timeout = args.release_seconds + 3 * args.poll_interval + 180.0
    return args


def versions(cluster: Any) -> dict[str, str]:
    from tests.integration.deployment import postgres_bin

    out = tr.versions_info(cluster)
    bin_dir = postgres_bin()
    if bin_dir is not None:
        res = subprocess.run([str(bin_dir / "postgres"), "--version"], capture_output=True, text=True)
        out["postgresql"] = res.stdout.strip()
    out["machine"] += f", {os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') / 2**30:.0f} GiB RAM"
    return out


def run(args: argparse.Namespace) -> dict[str, Any]:
    started = time.time()
    phases: dict[str, PhaseResult] = {}
    idle: dict[str, Any] | None = None
    with run_context(args) as ctx:
        info = versions(ctx.cluster)
        if args.idle_seconds > 0:
            idle = idle_baseline(ctx)
            progress(f"idle triggerer: CPU {_f(idle.get('cpu_mean_pct'), '{:.1f}')} %, RSS "
                     f"{_f(idle.get('rss_mean_mb'))} MB")  # fmt: skip
        for impl in args.impls:
            phase = (ControlPhase if impl == "control" else Phase)(impl, ctx)
            try:
                phases[impl] = phase.run()
            finally:
                phase.close()
            s = summarize(phases[impl], args.poll_interval)
            progress(
                f"[{impl}] CPU steady {_f(s['cpu_steady_pct'], '{:.1f}')} %, "
                f"RSS {_f(s['rss_steady_mb'])} MB, p99 {_f(s['p99_ms'])} ms, missed {s['missed']}, "
                f"blocked {s['blocked']}"
            )
    return {
        "args": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        "finished": f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC",
        "wall_s": time.time() - started,
        "versions": info,
        "machine_notes": machine_notes(),
        "idle": idle,
        "summary": {k: summarize(p, args.poll_interval) for k, p in phases.items()},
        "phases": {k: asdict(p) for k, p in phases.items()},
    }


def cleanup_leftovers() -> None:
    """What an interrupted run (SIGKILL, a cluster stopped under it) may have left: its namespaces (with
    their Jobs, pods, ServiceAccount), ClusterQueues and ResourceFlavors, FlowSchemas and fake nodes."""
    from kubernetes import client, config
    from kubernetes.client.rest import ApiException

    from tests.integration.cluster import Cluster

    cluster = Cluster(config.new_client_from_config(config_file=os.environ["KUBECONFIG"]))
    namespaces = [
        ns.metadata.name
        for ns in cluster.core.list_namespace(label_selector="devcluster/test=true").items
        if ns.metadata.name.startswith("t-bench-tl-")
    ]
    for name in namespaces:
        sid = name.rsplit("-", 1)[-1]
        with suppress_404(ApiException):
            cluster.core.delete_namespace(name, propagation_policy="Background")
        cluster.kueue_delete("clusterqueues", f"cq-{sid}")
        cluster.kueue_delete("resourceflavors", f"rf-{sid}")
    flow = client.FlowcontrolApiserverV1Api(cluster.api)
    schemas = [
        f.metadata.name
        for f in flow.list_flow_schema().items
        if f.metadata.name.startswith("bench-t-bench-tl-")
    ]
    for name in schemas:
        with suppress_404(ApiException):
            flow.delete_flow_schema(name)
    for name in namespaces:
        if not tr.wait_namespace_gone(cluster, name, timeout=900):
            progress(f"namespace {name} still terminating after 900 s")
    delete_nodes(cluster, None)
    progress(f"removed {len(namespaces)} namespace(s) with their queues, {len(schemas)} FlowSchema(s), nodes")


@contextmanager
def suppress_404(exc_type: type[Exception]) -> Iterator[None]:
    try:
        yield
    except exc_type as exc:
        if getattr(exc, "status", None) != 404:
            raise


def _terminate(signum: int, frame: Any) -> None:
    """SIGTERM ends the run like Ctrl-C: every ``finally`` runs, so the cleanup does too."""
    raise SystemExit(128 + signum)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.render:
        args.render.with_suffix(".md").write_text(render(json.loads(args.render.read_text())))
        return 0
    signal.signal(signal.SIGTERM, _terminate)
    tr.load_devcluster_env()
    tr.ensure_cluster()
    if args.cleanup:
        cleanup_leftovers()
        return 0
    set_autogroup_nice(os.getpid(), args.autogroup_nice)  # the reference watch must not lag either
    args.results.mkdir(parents=True, exist_ok=True)
    raw = run(args)
    report = render(raw)
    (args.results / f"{args.name}.md").write_text(report)
    (args.results / f"{args.name}.json").write_text(json.dumps(raw, indent=1, default=str))
    print(report)
    progress(f"written: {args.results / (args.name + '.md')}, .json, .<impl>.triggerer.log")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
