"""`make demo-fair-share`: the Monte Carlo example's scenario B on a real Airflow deployment, then a summary.

``example_dags/monte_carlo_fair_share.py`` starts two tasks in parallel: a low-priority research batch that
borrows the risk team's idle quota, and the risk desk's VaR run, which takes its quota back by preemption.
``airflow dags test`` runs one task after the other, so nothing is ever preempted there; this demo runs the
DAG's own scheduled run on a deployment of its own (PostgreSQL, API server, scheduler with LocalExecutor,
DAG processor, triggerer: the processes ``make airflow-up`` starts), kept in ``.demo/fair-share/`` and on
a port of its own, so it never touches a deployment someone else started.

Steps: 1. start (or reuse) the local cluster; 2. the example's queues (monte-carlo-queues.yaml), renamed
``demo-...`` and scaled to 4 CPU per team, with ``risk-queue`` held (LocalQueue ``stopPolicy: Hold``), and
an earlier demo's Jobs deleted (the run id is the same, and a task adopts its own try's finished Job); 3. the
deployment, with the DAG and its settings (research: 4 shards of 2 CPU, needing 8 CPU; risk: 2 of
2 CPU, exactly its own quota); 4. its scheduled run: both tasks submit their Jobs at once, and while the
risk Job waits in the held queue, Kueue admits the research batch by borrowing the risk team's idle
4 CPU; once its shards run, the demo releases ``risk-queue`` (the risk run "arrives"), and Kueue preempts
the research batch (``InCohortReclamation``) to give risk its quota back; the research Job is requeued,
resumes when risk is done, and both tasks succeed; 5. a summary from the task instances, their results
(XCom) and Kueue's Workloads. Exit status 1 when that did not happen.

DEMO_RESEARCH_SECONDS (default 30) and DEMO_RISK_SECONDS (10) are the fake shards' run times,
DEMO_SOLO_SECONDS (5) how long the research shards run before risk-queue is released; DEMO_KEEP_AIRFLOW=1
keeps the deployment up after the summary, until Ctrl-C.
"""

from __future__ import annotations

import copy
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

DEMO = REPO / ".demo" / "fair-share"
DAG_ID = "monte_carlo_fair_share"
EXAMPLE_DAG = REPO / "example_dags" / f"{DAG_ID}.py"
EXAMPLE_QUEUES = REPO / "example_dags" / "manifests" / "monte-carlo-queues.yaml"
PREFIX = "demo-"
TEAM_CPU, TEAM_MEMORY = "4", "16Gi"  # per team; the example's 80 vCPU would not fit the bed's 4 Spot nodes
RESEARCH_NS, RISK_NS = f"{PREFIX}research", f"{PREFIX}risk"
RESEARCH_QUEUE, RISK_QUEUE = "research-queue", "risk-queue"
RESEARCH_CQ, RISK_CQ = f"{PREFIX}research-cq", f"{PREFIX}risk-cq"
RECLAIM_REASONS = ("InCohortReclamation", "InCohortReclaimWhileBorrowing")
KUEUE = ("kueue.x-k8s.io", "v1beta2")


def dag_settings() -> dict[str, str]:
    """The DAG's environment settings (MC_*: see the DAG's docstring) for the demo's queues."""
    return {
        "MC_RESEARCH_SHARDS": "4",  # 4 x 2 CPU = 8: its own 4 and the risk team's idle 4
        "MC_RESEARCH_PARALLELISM": "4",
        "MC_RISK_SHARDS": "2",  # 2 x 2 CPU = 4: exactly the risk team's own quota
        "MC_RISK_PARALLELISM": "2",
        "MC_SHARD_CPU": "2",
        "MC_SHARD_MEMORY": "1Gi",
        "MC_RESEARCH_RUN_DURATION": f"{int(os.environ.get('DEMO_RESEARCH_SECONDS', '30'))}s",
        "MC_RISK_RUN_DURATION": f"{int(os.environ.get('DEMO_RISK_SECONDS', '10'))}s",
        "MC_RESEARCH_NAMESPACE": RESEARCH_NS,
        "MC_RESEARCH_QUEUE": RESEARCH_QUEUE,
        "MC_RESEARCH_PRIORITY": f"{PREFIX}research-batch",
        "MC_RISK_NAMESPACE": RISK_NS,
        "MC_RISK_QUEUE": RISK_QUEUE,
        "MC_RISK_PRIORITY": f"{PREFIX}risk-critical",
    }


# --- the queues --------------------------------------------------------------------------------------------
def demo_queues(
    docs: Iterable[dict[str, Any]], prefix: str = PREFIX, cpu: str = TEAM_CPU, memory: str = TEAM_MEMORY
) -> list[dict[str, Any]]:
    """The example's Kueue objects with every cluster-scoped name (and namespace) prefixed, each team's quota
    and borrowing limit set to ``cpu`` / ``memory``, and the risk LocalQueue held (``stopPolicy: Hold``)."""
    out = []
    for original in docs:
        doc = copy.deepcopy(original)
        kind, meta, spec = doc["kind"], doc["metadata"], doc.get("spec") or {}
        if kind == "LocalQueue":
            meta["namespace"] = prefix + meta["namespace"]
            spec["clusterQueue"] = prefix + spec["clusterQueue"]
            if meta["name"] == RISK_QUEUE:
                spec["stopPolicy"] = "Hold"
        else:
            meta["name"] = prefix + meta["name"]
        if kind == "Cohort" and spec.get("parentName"):
            spec["parentName"] = prefix + spec["parentName"]
        if kind == "ClusterQueue":
            spec["cohortName"] = prefix + spec["cohortName"]
            labels = spec["namespaceSelector"]["matchLabels"]
            labels["kubernetes.io/metadata.name"] = prefix + labels["kubernetes.io/metadata.name"]
            for group in spec["resourceGroups"]:
                for flavor in group["flavors"]:
                    flavor["name"] = prefix + flavor["name"]
                    for resource in flavor["resources"]:
                        amount = cpu if resource["name"] == "cpu" else memory
                        resource["nominalQuota"] = amount
                        if "borrowingLimit" in resource:
                            resource["borrowingLimit"] = amount
        out.append(doc)
    return out


# --- what happened, and the summary ------------------------------------------------------------------------
@dataclass
class TaskOutcome:
    task_id: str
    state: str
    seconds: float | None = None  # the task instance's own start to end
    result: dict[str, Any] | None = None  # its XCom return_value


@dataclass
class DemoRun:
    run_id: str
    state: str
    seconds: float | None
    tasks: dict[str, TaskOutcome]
    timeline: list[tuple[float, str]] = field(default_factory=list)  # (seconds since the run's start, what)
    workload_evictions: list[dict[str, Any]] = field(default_factory=list)  # research schedulingStats
    research_log: list[str] = field(default_factory=list)  # its task's lines about the eviction
    home: Path | None = None


def problems(run: DemoRun) -> list[str]:
    """What the scenario promised and did not happen (empty: it did)."""
    found = []
    for task_id in ("research_batch", "risk_var_run", "report"):
        task = run.tasks.get(task_id)
        if task is None or task.state != "success":
            found.append(f"{task_id} ended {task.state if task else 'missing'}, not success")
    research = (run.tasks.get("research_batch") or TaskOutcome("", "")).result or {}
    risk = (run.tasks.get("risk_var_run") or TaskOutcome("", "")).result or {}
    if not research.get("evictions"):
        found.append("the research batch was never evicted: the risk run did not preempt it")
    elif not any(reason in str(research.get("eviction_causes")) for reason in RECLAIM_REASONS):
        found.append(
            f"the research batch's evictions were {research.get('eviction_causes')!r}, not a reclaim"
        )
    if risk.get("evictions"):
        found.append(f"the risk run was evicted {risk['evictions']} time(s)")
    if run.state != "success":
        found.append(f"the DAG run ended {run.state}")
    return found


def _seconds(value: float | None) -> str:
    return "?" if value is None else f"{value:.0f} s"


def _task_line(task: TaskOutcome) -> str:
    result = task.result or {}
    if not result:
        return f"{task.state}, {_seconds(task.seconds)}"
    return (
        f"{task.state}: {result.get('succeeded')}/{result.get('completions')} shards "
        f"({result.get('completed_indexes')}) in {result.get('cluster_queue')}; evictions "
        f"{result.get('evictions')} ({result.get('eviction_causes') or 'none'}); queued "
        f"{_seconds(result.get('queued_seconds'))}, running {_seconds(result.get('running_seconds'))}; "
        f"task {_seconds(task.seconds)}"
    )


def summary(run: DemoRun) -> str:
    found = problems(run)
    verdict = (
        "the risk run preempted the borrowing research batch (Kueue: "
        + ", ".join(sorted({r for r in RECLAIM_REASONS if r in _causes(run)}) or ["?"])
        + "); the research batch was requeued, resumed, and both succeeded"
        if not found
        else "NOT AS EXPECTED: " + "; ".join(found)
    )
    lines = [
        "",
        "============ Monte Carlo fair share (scenario B) on a real Airflow deployment: summary ============",
        f"DAG run           {DAG_ID} / {run.run_id}: {run.state} in {_seconds(run.seconds)}",
        f"queues            {RESEARCH_CQ} and {RISK_CQ}, {TEAM_CPU} CPU each, in team cohorts under "
        f"{PREFIX}quant-dept",
    ]
    for task_id in ("research_batch", "risk_var_run", "report"):
        task = run.tasks.get(task_id) or TaskOutcome(task_id, "missing")
        lines.append(f"{task_id:<17} {_task_line(task)}")
    if run.workload_evictions:
        stats = ", ".join(
            f"{e.get('reason')}{'/' + e['underlyingCause'] if e.get('underlyingCause') else ''} "
            f"x{e.get('count')}"
            for e in run.workload_evictions
        )
        lines.append(f"Kueue's record    research Workload schedulingStats.evictions: {stats}")
    for i, line in enumerate(run.research_log):
        lines.append(f"{'research log' if i == 0 else '':<17} {line}")
    lines.append("timeline          (seconds from the DAG run's start)")
    lines += [f"  {at:6.1f}  {what}" for at, what in run.timeline]
    lines.append(f"verdict           {verdict}")
    if run.home:
        lines.append(f"logs              {run.home / 'logs'} (scheduler, triggerer-1, tasks)")
    lines.append("=" * 99)
    return "\n".join(lines)


def _causes(run: DemoRun) -> str:
    return str(((run.tasks.get("research_batch") or TaskOutcome("", "")).result or {}).get("eviction_causes"))


# --- driving the deployment --------------------------------------------------------------------------------
def step(text: str) -> None:
    print(f"\n==> {text}", flush=True)


def cluster_env() -> dict[str, str]:
    from devcluster.layout import Layout

    return Layout.default().exported_env()


def _iso(value: str | None) -> float | None:
    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp() if value else None


def _condition(obj: dict[str, Any] | None, ctype: str) -> dict[str, Any] | None:
    for cond in (obj or {}).get("status", {}).get("conditions") or []:
        if cond.get("type") == ctype:
            return dict(cond)
    return None


def _true(obj: dict[str, Any] | None, ctype: str) -> bool:
    cond = _condition(obj, ctype)
    return bool(cond and cond.get("status") == "True")


class Bed:
    """The cluster as the demo reads it: Jobs, their Workloads, the ClusterQueues' usage."""

    def __init__(self, kubeconfig: str) -> None:
        from kubernetes import client, config

        self.api = config.new_client_from_config(config_file=kubeconfig)
        self.batch = client.BatchV1Api(self.api)
        self.core = client.CoreV1Api(self.api)
        self.custom = client.CustomObjectsApi(self.api)

    def jobs(self, namespace: str) -> dict[str, dict[str, Any]]:
        items = self.batch.list_namespaced_job(namespace).items
        return {j.metadata.name: self.api.sanitize_for_serialization(j) for j in items}

    def workload(self, namespace: str, job: dict[str, Any]) -> dict[str, Any] | None:
        items = self.custom.list_namespaced_custom_object(
            *KUEUE, namespace, "workloads", label_selector=f"kueue.x-k8s.io/job-uid={job['metadata']['uid']}"
        )["items"]
        return items[0] if items else None

    def borrowed_cpu(self, cq: str) -> str:
        status = self.custom.get_cluster_custom_object(*KUEUE, "clusterqueues", cq).get("status", {})
        for flavor in status.get("flavorsUsage") or []:
            for res in flavor.get("resources") or []:
                if res["name"] == "cpu":
                    return str(res.get("borrowed", "0"))
        return "0"

    def running_pods(self, namespace: str, job_name: str) -> int:
        pods = self.core.list_namespaced_pod(
            namespace, label_selector=f"batch.kubernetes.io/job-name={job_name}"
        )
        return sum(1 for p in pods.items if p.status.phase == "Running" and not p.metadata.deletion_timestamp)

    def set_stop_policy(self, namespace: str, queue: str, policy: str) -> None:
        self.custom.patch_namespaced_custom_object(
            *KUEUE, namespace, "localqueues", queue, {"spec": {"stopPolicy": policy}}
        )

    def delete_jobs(self, namespaces: Iterable[str]) -> int:
        """Every Job of the demo's namespaces: an earlier demo's run has the same run id (the DAG's last
        scheduled interval), and a task adopts a finished Job of its own try instead of running again."""
        deleted = 0
        for ns in namespaces:
            for name in self.jobs(ns):
                self.batch.delete_namespaced_job(name, ns, propagation_policy="Background")
                deleted += 1
        return deleted


def wait(what: str, fn: Callable[[], Any], timeout: float, check: Callable[[], None] | None = None) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check:
            check()
        value = fn()
        if value:
            return value
        time.sleep(0.5)
    sys.exit(f"timed out after {timeout:.0f} s waiting for {what}")


def apply_queues(env: dict[str, str]) -> None:
    import yaml

    from devcluster.cluster import Kubectl, build_binaries
    from devcluster.layout import Layout

    docs = demo_queues(d for d in yaml.safe_load_all(EXAMPLE_QUEUES.read_text()) if d)
    Kubectl(build_binaries(), Layout.default())(
        "apply",
        "--server-side",
        "--force-conflicts",
        "--field-manager=demo-fair-share",
        "-f",
        "-",
        stdin=yaml.safe_dump_all(docs),
    )


def first_run(deployment: Any) -> dict[str, Any] | None:
    if deployment.rest.dag(DAG_ID) is None:
        return None
    runs = deployment.rest.request("GET", f"/api/v2/dags/{DAG_ID}/dagRuns")["dag_runs"]
    return dict(runs[0]) if runs else None


def new_job(bed: Bed, namespace: str, before: set[str]) -> dict[str, Any] | None:
    new = [job for name, job in bed.jobs(namespace).items() if name not in before]
    return new[0] if new else None


Timeline = list[tuple[float, str]]


def follow(deployment: Any, bed: Bed, started: float, solo_seconds: float) -> tuple[dict[str, Any], Timeline]:
    """Drive and watch the scheduled run until it ends; returns the DAG run and the timeline."""
    timeline: Timeline = []

    def note(text: str) -> None:
        at = time.time() - started
        timeline.append((at, text))
        print(f"    {at:6.1f} s  {text}", flush=True)

    check = deployment.check_alive
    before = {ns: set(bed.jobs(ns)) for ns in (RESEARCH_NS, RISK_NS)}
    research = wait("the research Job", lambda: new_job(bed, RESEARCH_NS, before[RESEARCH_NS]), 300, check)
    research_wl = wait(
        "the research batch's admission",
        lambda: (wl := bed.workload(RESEARCH_NS, research)) and _true(wl, "Admitted") and wl,
        300,
        check,
    )
    usage = research_wl["status"]["admission"]["podSetAssignments"][0].get("resourceUsage", {})
    borrowed = wait(  # the ClusterQueue's status follows the admission within a second or two
        "research-cq's borrowing",
        lambda: (cpu := bed.borrowed_cpu(RESEARCH_CQ)) not in ("0", "") and cpu,
        30,
        check,
    )
    note(
        f"research batch admitted to {research_wl['status']['admission']['clusterQueue']} with "
        f"{usage.get('cpu')} CPU: its own {TEAM_CPU} and {borrowed} borrowed from the risk team's idle quota"
    )
    risk = wait("the risk Job", lambda: new_job(bed, RISK_NS, before[RISK_NS]), 300, check)
    note(f"risk run's Job {risk['metadata']['name']} waits in {RISK_QUEUE} (held)")
    wait(
        "research shards running",
        lambda: bed.running_pods(RESEARCH_NS, research["metadata"]["name"]),
        120,
        check,
    )
    note(f"research shards running; the demo lets them run alone for {solo_seconds:.0f} s")
    time.sleep(solo_seconds)
    bed.set_stop_policy(RISK_NS, RISK_QUEUE, "None")
    note(f"{RISK_QUEUE} released: the risk run asks for its own {TEAM_CPU} CPU")

    seen: set[str] = set()

    def look() -> dict[str, Any] | None:
        check()
        rwl, kwl = bed.workload(RESEARCH_NS, research), bed.workload(RISK_NS, risk)
        if "evicted" not in seen and _true(rwl, "Evicted"):
            seen.add("evicted")
            evicted, preempted = _condition(rwl, "Evicted") or {}, _condition(rwl, "Preempted") or {}
            note(
                f"research batch evicted: {evicted.get('reason')}, {preempted.get('reason')} "
                f"({_short(preempted.get('message', '').strip())})"
            )
        if kwl is not None and "risk admitted" not in seen and _true(kwl, "Admitted"):
            seen.add("risk admitted")
            note(
                f"risk run admitted to {kwl['status']['admission']['clusterQueue']} (borrowed cpu in "
                f"{RISK_CQ}: {bed.borrowed_cpu(RISK_CQ)})"
            )
        if "evicted" in seen and "requeued" not in seen and not _true(rwl, "QuotaReserved"):
            seen.add("requeued")
            note(f"research batch requeued: waits in {RESEARCH_QUEUE} for the quota")
        if "requeued" in seen and "readmitted" not in seen and _true(rwl, "Admitted"):
            seen.add("readmitted")
            note(f"research batch admitted again to {RESEARCH_CQ}: its shards run from the start")
        for name, wl in (("risk run", kwl), ("research batch", rwl)):
            if f"{name} finished" not in seen and _true(wl, "Finished"):
                seen.add(f"{name} finished")
                note(f"{name}'s Job finished ({(_condition(wl, 'Finished') or {}).get('reason')})")
        run = first_run(deployment)
        if run and run["state"] in ("success", "failed"):
            return run
        return None

    return wait("the DAG run to end", look, 900), timeline


def outcome(deployment: Any, bed: Bed, run: dict[str, Any], timeline: Timeline) -> DemoRun:
    run_id = str(run["dag_run_id"])
    tasks = {}
    for ti in deployment.rest.task_instances(DAG_ID, run_id):
        start, end = _iso(ti.get("start_date")), _iso(ti.get("end_date"))
        result = None
        if ti["task_id"] != "report" and ti["state"] == "success":
            result = deployment.rest.xcom(DAG_ID, run_id, ti["task_id"])
        tasks[ti["task_id"]] = TaskOutcome(
            ti["task_id"], str(ti["state"]), end - start if start and end else None, result
        )
    start, end = _iso(run.get("start_date")), _iso(run.get("end_date"))
    evictions: list[dict[str, Any]] = []
    research = (tasks.get("research_batch") or TaskOutcome("", "")).result
    if research:
        job = bed.jobs(RESEARCH_NS).get(research["job_name"])
        wl = bed.workload(RESEARCH_NS, job) if job else None
        evictions = list(((wl or {}).get("status", {}).get("schedulingStats") or {}).get("evictions") or [])
    logs = deployment.home / "logs" / f"dag_id={DAG_ID}" / f"run_id={run_id}" / "task_id=research_batch"
    return DemoRun(
        run_id,
        str(run["state"]),
        end - start if start and end else None,
        tasks,
        timeline,
        evictions,
        eviction_log_lines(sorted(logs.glob("*.log*"))),
        deployment.home,
    )


def eviction_log_lines(paths: Iterable[Path]) -> list[str]:
    """The task's first "evicted" and first "requeued" lines (from its trigger), without the Job name."""
    found: dict[str, str] = {}
    for path in paths:
        for raw in path.read_text(errors="replace").splitlines():
            try:
                event = str(json.loads(raw).get("event", ""))
            except (ValueError, AttributeError):
                continue
            for kind in (": evicted (", ": requeued in "):
                if kind in event and kind not in found:
                    found[kind] = _short(event.split(": ", 1)[1])
    return [found[k] for k in (": evicted (", ": requeued in ") if k in found]


def _short(text: str) -> str:
    """Kueue's preemption message without the preemptor's UIDs."""
    return re.sub(r" \(UID: [^)]*\)", "", text)


def main() -> None:
    from tests.integration.deployment import (
        TEMPLATE_DB,
        AirflowDeployment,
        Postgres,
        migrated_template,
        postgres_bin,
    )

    step("1. local cluster (etcd, kube-apiserver, controller-manager, scheduler, KWOK, Kueue)")
    subprocess.run([sys.executable, "-m", "devcluster", "up"], cwd=REPO, check=True)
    env = cluster_env()
    bed = Bed(env["KUBECONFIG"])
    step(
        f"2. the example's queues, scaled down: {RESEARCH_CQ} and {RISK_CQ} ({TEAM_CPU} CPU each) in team "
        f"cohorts under {PREFIX}quant-dept; {RISK_NS}/{RISK_QUEUE} held until the research batch runs"
    )
    apply_queues(env)
    bed.set_stop_policy(RISK_NS, RISK_QUEUE, "Hold")  # also when an earlier demo left it released
    if deleted := bed.delete_jobs([RESEARCH_NS, RISK_NS]):
        print(f"    deleted {deleted} Job(s) of an earlier demo")
    wait(
        "the demo's namespaces without Jobs, and its ClusterQueues free",
        lambda: (
            not any(bed.jobs(ns) for ns in (RESEARCH_NS, RISK_NS))
            and all(bed.borrowed_cpu(cq) in ("0", "") for cq in (RESEARCH_CQ, RISK_CQ))
        ),
        120,
    )

    step(
        f"3. an Airflow deployment of its own in {DEMO.relative_to(REPO)}: PostgreSQL, api-server, "
        "scheduler (LocalExecutor), dag-processor, triggerer"
    )
    pg_bin = postgres_bin()
    if pg_bin is None:
        sys.exit("PostgreSQL server binaries not found: apt-get install postgresql (or set POSTGRES_BIN)")
    template = migrated_template(pg_bin, {**os.environ, **env})
    pg = Postgres.new_base(pg_bin)
    pg.copy_data_from(template)
    pg.start()  # before the deployment's settings: they name its port
    home = DEMO / "airflow"
    shutil.rmtree(home, ignore_errors=True)
    deployment = AirflowDeployment.create(home, pg, TEMPLATE_DB, env)
    deployment.env.update(dag_settings())
    deployment.write_env_file()
    shutil.copy(EXAMPLE_DAG, home / "dags" / EXAMPLE_DAG.name)
    try:
        deployment.start(triggerers=1)
        print(f"    Airflow {deployment.url}; logs in {home / 'logs'}")
        step(
            "4. the DAG's scheduled run (catchup off: the last interval's run starts once the DAG is "
            "parsed); both tasks submit their Jobs at once"
        )
        run = wait("the scheduled run", lambda: first_run(deployment), 300, deployment.check_alive)
        started = _iso(run.get("start_date")) or time.time()
        final, timeline = follow(deployment, bed, started, float(os.environ.get("DEMO_SOLO_SECONDS", "5")))
        step("5. summary")
        demo = outcome(deployment, bed, final, timeline)
        print(summary(demo), flush=True)
        (DEMO / "summary.json").write_text(
            json.dumps(
                {
                    "run_id": demo.run_id,
                    "state": demo.state,
                    "timeline": demo.timeline,
                    "tasks": {t.task_id: t.__dict__ for t in demo.tasks.values()},
                    "problems": problems(demo),
                },
                indent=1,
                default=str,
            )
        )
        if os.environ.get("DEMO_KEEP_AIRFLOW") == "1":
            user, password = next(iter(json.loads(deployment.rest.passwords_file.read_text()).items()))
            print(
                f"\nAirflow stays up at {deployment.url} (user {user}, password {password}); Ctrl-C ends it"
            )
            try:
                while True:
                    time.sleep(3600)
            except KeyboardInterrupt:
                pass
    except BaseException:
        print(deployment.log_tails(40), file=sys.stderr)
        raise
    finally:
        deployment.stop()
        pg.stop()
    sys.exit(1 if problems(demo) else 0)


if __name__ == "__main__":
    main()
