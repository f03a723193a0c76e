"""A phase's records turned into the night's figures (pure: JSON in, numbers and tables out).

Definitions (the docs quote them):

- **makespan**: from the genomics run's trigger to the last task instance's end, both teams;
- **ideal**: ``Night.ideal()``, the larger of the quota bound and the critical path;
- **shards lost**: shards of a task that no Job of it completed (Job ``completedIndexes`` mapped to shard
  ids through the Job's own shard list); **completed twice**: shards completed by more than one Job of the
  same task (a retry that ran a finished shard again), plus indexes of one Job that two pods each ran to the
  end on their own (Succeeded, not evicted or deleted while running: two done records' worth of work);
- **finished by two pods** (a figure, not a violation): an index of one Job whose pod, evicted or deleted
  while running (a Spot eviction, Kueue preempting the Workload), still ended Succeeded beside its
  replacement; or whose pod Succeeded as Kueue suspended the Job (its Workload preempted) and the Job
  controller, not yet seeing the Succeeded, deleted it uncounted (``_uncounted_at_suspend``). The Job counts
  the index once (``completedIndexes`` is a set), and a real shard writes one done record (``if_none_match``;
  the second pod finds it or keeps it);
- **redone shard-seconds**: running time of pods that ended without succeeding (evicted, preempted, lost
  with their node), less the shards whose done records such a pod wrote before it stopped (``--done-records``:
  its replacement skips them), per Spot eviction; **shards handed off**: of those pods' unfinished shards,
  the ones a running pod of their Job took over (``--done-records``, unless ``--no-hand-off``);
- **where the time goes**, per task: scheduler (upstream end or run start -> the task's first start),
  submit (start -> its first Job created), Kueue queue (created -> quota reserved), admitted not running
  (reserved -> first pod Running), running (first pod Running -> Job complete), resume (Job complete -> the
  task's end), split into detection (Job complete -> the trigger's event, the resume guard included) and
  after the event (-> the task's end: the scheduler, a worker's start and ``execute_complete``).
"""

from __future__ import annotations

import itertools
import statistics
from collections import defaultdict
from datetime import datetime
from typing import Any

from airflow_kueue_provider.kueue.index_set import IndexSet

from .workload import Night

SPOT_PER_HOUR, ON_DEMAND_PER_HOUR, VM_CPU = 0.181, 0.904, 16  # kueue/figures/cost.py's VmPrice defaults


def _ts(value: str | None) -> float | None:
    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp() if value else None


def pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * len(ordered) + 0.5) - 1))]


def _step_of(task_id: str) -> str:
    return task_id.rsplit(".", 1)[-1]


STALE_VIEW_S = 5.0
"""How far the Job controller's view of a pod may trail the pod (a sync's informer lag on a loaded bed)."""


def _pod_text(pod: dict[str, Any]) -> str:
    told = ", disrupted" if pod.get("disrupted") else ""
    told += ", told to stop while running" if pod.get("stopping") else ""
    told += ", uncounted as its Job was suspended" if pod.get("uncounted_at_suspend") else ""
    seen = " > ".join(pod.get("history") or [])
    return f"{pod.get('name')} (node {pod.get('node')}{told}{', seen ' + seen if seen else ''})"


def _on_its_own(pod: dict[str, Any]) -> bool:
    """A Succeeded pod that ran to the end without being told to stop (evicted or deleted while running)."""
    return not pod.get("stopping") and not pod.get("uncounted_at_suspend")


def _uncounted_at_suspend(pod: dict[str, Any], suspended: list[float]) -> bool:
    """A pod that Succeeded as Kueue suspended its Job (its Workload preempted) and that the Job controller
    then deleted: ``manageJob`` deletes a suspended Job's active pods from its informer's view, and its
    ``deleteJobPods`` removes their completion finalizer first, so a pod whose Succeeded the view did not
    hold yet is never counted and its index runs again on readmission (kubernetes pkg/controller/job,
    v1.36). The Job's ``completedIndexes`` holds the index once; a real shard writes one done record and its
    second pod finds it. Kubernetes' race, not this provider's retry: a figure, never a violation."""
    ended, deleting = pod.get("ended"), pod.get("deleting")
    if pod.get("phase") != "Succeeded" or ended is None or deleting is None or deleting < ended:
        return False
    return any(at - STALE_VIEW_S <= ended and at <= deleting <= at + 6 * STALE_VIEW_S for at in suspended)


def shard_accounting(night: Night, phase: dict[str, Any]) -> dict[str, Any]:
    """Shards lost and completed twice, over every task of both runs; each finding names its Jobs and pods
    in full (a test prints them whole: a message cut in its middle once read as two Jobs' pods in one)."""
    expected = {s.name: s.shards for s in night.shape.steps} | {"pfe": night.shape.risk_shards}
    job_name = {job["uid"]: job.get("name") or job["uid"][:8] for job in phase["jobs"]}
    jobs_by_task: dict[tuple[str, str, int], list[dict[str, Any]]] = defaultdict(list)
    for job in phase["jobs"]:
        jobs_by_task[(job["dag_id"], job["task_id"], job["map_index"])].append(job)
    suspended = {job["uid"]: job.get("suspended") or [] for job in phase["jobs"]}
    succeeded: dict[tuple[str, int], list[dict[str, Any]]] = defaultdict(list)
    for pod in phase["pods"]:
        if pod["phase"] == "Succeeded":
            race = _uncounted_at_suspend(pod, suspended.get(pod["job_uid"], []))
            succeeded[(pod["job_uid"], pod["index"])].append({**pod, "uncounted_at_suspend": race})
    lost = twice = 0
    lost_tasks: list[str] = []
    twice_in: list[str] = []
    for ti in phase["task_instances"]:
        key = (ti["dag_id"], ti["task_id"], ti["map_index"])
        want = expected.get(_step_of(ti["task_id"]), 0)
        done: dict[int, list[str]] = defaultdict(list)
        for job in jobs_by_task.get(key, []):
            runs = job.get("index_shards") or [[shard] for shard in job["shard_ids"]]
            for index in IndexSet.parse(job["completed_indexes"] or ""):
                for shard in runs[index] if index < len(runs) else []:
                    done[shard].append(job_name[job["uid"]])
        missing = want - len([s for s in done if s < want])
        if missing:
            lost += missing
            lost_tasks.append(f"{ti['task_id']}[{ti['map_index']}] ({ti['state']}): {missing}")
        again = {shard: jobs for shard, jobs in done.items() if len(jobs) > 1}
        twice += len(again)
        if again:
            names = sorted({name for jobs in again.values() for name in jobs})
            twice_in.append(f"{ti['task_id']}[{ti['map_index']}]: shards {sorted(again)[:5]} in Jobs {names}")
    two_pods = 0
    two_pods_in: list[str] = []
    for (job_uid, index), pods in succeeded.items():
        if len(pods) < 2:
            continue
        entry = f"Job {job_name.get(job_uid, job_uid[:8])} index {index}: " + ", ".join(map(_pod_text, pods))
        if len([p for p in pods if _on_its_own(p)]) > 1:
            twice += 1
            twice_in.append(entry)
        else:
            two_pods += 1
            two_pods_in.append(entry)
    return {
        "shards_lost": lost,
        "completed_twice": twice,
        "finished_by_two_pods": two_pods,
        "lost_in": lost_tasks[:20],
        "twice_in": twice_in[:20],
        "finished_by_two_pods_in": two_pods_in[:20],
    }


def redone(phase: dict[str, Any]) -> dict[str, Any]:
    """Running seconds of pods that ended without succeeding, per cause."""
    evicted_nodes = {e["node"]: e["at"] for e in phase["evictions"] if not e.get("pod")}
    evicted_pods = {e["pod"]: e["at"] for e in phase["evictions"] if e.get("pod")}
    kept = phase.get("kept_by_done_records") or {}
    spot = other = 0.0
    pods_spot = pods_other = 0
    for pod in phase["pods"]:
        if pod["phase"] == "Succeeded" or pod["running"] is None:
            continue
        ran = (pod["ended"] or phase["ended"]) - pod["running"]
        lost = max(0.0, ran - kept.get(pod.get("name", ""), 0.0))
        at = evicted_pods.get(pod.get("name", "")) or evicted_nodes.get(pod["node"])
        if at is not None and pod["running"] <= at + 1 and (pod["ended"] or at) >= at - 1:
            spot += lost
            pods_spot += 1
        else:
            other += lost
            pods_other += 1
    n = len(phase["evictions"])
    return {
        "spot_evictions": n,
        "redone_shard_seconds_spot": round(spot, 1),
        "redone_per_eviction": round(spot / n, 1) if n else 0.0,
        "pods_lost_to_spot": pods_spot,
        "redone_shard_seconds_other": round(other, 1),
        "pods_lost_other": pods_other,
        "shards_handed_off": phase.get("handed_off", 0),
        "grace_exits": phase.get("grace_exits", 0),
    }


def replacement_waits(phase: dict[str, Any]) -> dict[str, Any]:
    """From a disrupted pod's end to its index's next pod, per such pod: the Job controller's pod failure
    backoff (10 s for an index's first failure, ignored ones included; docs/evictions.md), which the time
    compression does not shrink."""
    by_index: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for pod in phase["pods"]:
        by_index.setdefault((pod["job_uid"], pod["index"]), []).append(pod)
    gaps = []
    for pods in by_index.values():
        pods.sort(key=lambda p: p["created"])
        for ended, after in itertools.pairwise(pods):
            if ended.get("disrupted") and ended["phase"] != "Succeeded" and ended["ended"] is not None:
                gaps.append(max(0.0, after["created"] - ended["ended"]))
    median = pct(gaps, 50)
    return {
        "replacement_wait_median": round(median, 1) if median is not None else None,
        "replacement_wait_sum": round(sum(gaps), 1),
        "replacements": len(gaps),
    }


def timings(phase: dict[str, Any]) -> dict[str, Any]:
    """Where the time goes: per task, then summed and medians over the night (seconds)."""
    started = phase["started"]
    tis = {(t["dag_id"], t["task_id"], t["map_index"]): t for t in phase["task_instances"]}
    jobs_by_task: dict[tuple[str, str, int], list[dict[str, Any]]] = defaultdict(list)
    for job in phase["jobs"]:
        jobs_by_task[(job["dag_id"], job["task_id"], job["map_index"])].append(job)
    admitted = {w["job_uid"]: w["admitted"] for w in phase["workloads"]}
    first_running: dict[str, float] = {}
    for pod in phase["pods"]:
        if pod["running"] is not None:
            first_running[pod["job_uid"]] = min(first_running.get(pod["job_uid"], 1e18), pod["running"])
    order = ["align", "call", "gather"]
    parts: dict[str, list[float]] = defaultdict(list)
    per_task = []
    for key, ti in tis.items():
        dag, task, mi = key
        step = _step_of(task)
        start, end = _ts(ti["start_date"]), _ts(ti["end_date"])
        jobs = sorted(jobs_by_task.get(key, []), key=lambda j: j["created"])
        if start is None or end is None or not jobs:
            continue
        if step in order and order.index(step) > 0:
            up = tis.get((dag, task.replace(step, order[order.index(step) - 1]), mi))
            upstream_end = _ts(up["end_date"]) if up else None
        else:
            upstream_end = phase["risk_started"] if dag.endswith("risk") else started
        first, last = jobs[0], jobs[-1]
        reserved = (admitted.get(first["uid"]) or [None])[0]
        running = first_running.get(first["uid"])
        complete = last["complete"] or last["failed"]
        fired = (phase.get("trigger_fired") or {}).get(f"{dag}|{task}|{mi}|{ti['try_number']}")
        row = {
            "task": f"{task}[{mi}]",
            "scheduler": (start - upstream_end) if upstream_end else None,
            "submit": first["created"] - start,
            "kueue_queue": (reserved - first["created"]) if reserved else None,
            "admitted_not_running": (running - reserved) if running and reserved else None,
            "running": (complete - running) if complete and running else None,
            "resume": (end - complete) if complete else None,
            "detection": (fired - complete) if fired and complete else None,
            "after_event": (end - fired) if fired else None,
            "jobs": len(jobs),
        }
        per_task.append(row)
        for k, v in row.items():
            if k not in ("task", "jobs") and isinstance(v, float | int):
                parts[k].append(float(v))
    summary = {
        k: {
            "sum": round(sum(v), 1),
            "median": round(statistics.median(v), 2),
            "p90": round(pct(v, 90) or 0, 2),
        }
        for k, v in parts.items()
    }
    return {"per_task": per_task, "summary": summary}


def process_figures(phase: dict[str, Any]) -> dict[str, Any]:
    samples = phase["processes"]
    if len(samples) < 2:
        return {}
    first, last = samples[0], samples[-1]
    seconds = last["at"] - first["at"]
    out: dict[str, Any] = {}
    names = sorted({n for s in samples for n in s["cpu_seconds"]})
    for name in names:
        cpu = last["cpu_seconds"].get(name, 0.0) - first["cpu_seconds"].get(name, 0.0)
        rss = [s["rss_mb"].get(name, 0.0) for s in samples]
        out[name] = {
            "cpu_seconds": round(cpu, 1),
            "cpu_pct_of_core": round(100 * cpu / seconds, 1),
            "rss_peak_mb": round(max(rss)),
            "rss_mean_mb": round(statistics.mean(rss)),
        }
    return out


def quota_figures(phase: dict[str, Any], until: float) -> dict[str, Any]:
    out: dict[str, Any] = {}
    samples = [s for s in phase["quota"] if phase["started"] <= s["at"] <= until]
    for cq in phase["cluster_queues"]:
        shares = [
            s["used"][cq] / s["nominal"][cq] for s in samples if cq in s["used"] and s["nominal"].get(cq)
        ]
        out[cq] = round(100 * statistics.mean(shares), 1) if shares else None
    used = [sum(s["used"].values()) for s in samples if s["used"]]
    nominal = max((sum(s["nominal"].values()) for s in samples if s["nominal"]), default=0)
    out["cohort"] = round(100 * statistics.mean(used) / nominal, 1) if used and nominal else None
    return out


def ui_figures(phase: dict[str, Any]) -> dict[str, Any]:
    reads = phase["ui"]
    seconds = [r["seconds"] for r in reads]
    by_route: dict[str, list[float]] = defaultdict(list)
    for r in reads:
        by_route[r["route"]].append(r["seconds"])
    return {
        "reads": len(reads),
        "errors": sum(1 for r in reads if r["status"] != 200),
        "statuses": sorted({r["status"] for r in reads}),
        "p50_ms": round(1000 * (pct(seconds, 50) or 0)),
        "p99_ms": round(1000 * (pct(seconds, 99) or 0)),
        "max_ms": round(1000 * max(seconds, default=0)),
        "p99_ms_by_route": {k: round(1000 * (pct(v, 99) or 0)) for k, v in sorted(by_route.items())},
    }


def cost_figures(night: Night, phase: dict[str, Any]) -> dict[str, Any]:
    """The provider's cost model applied to every pod's running time (compressed seconds x compression):
    a 1-CPU, 1-GiB pod is 1/16 of a Standard_D16ds_v5, at Spot or on-demand list price by its node's pool."""
    job_dag = {j["uid"]: j["dag_id"] for j in phase["jobs"]}
    spot = on_demand = 0.0
    for pod in phase["pods"]:
        if pod["running"] is None or job_dag.get(pod["job_uid"], "").endswith("risk"):
            continue
        hours = ((pod["ended"] or phase["ended"]) - pod["running"]) * night.shape.compression / 3600
        share = hours / VM_CPU
        if "nightspot" in pod["node"]:
            spot += share * SPOT_PER_HOUR
        else:
            on_demand += share * ON_DEMAND_PER_HOUR
    samples = night.shape.samples
    all_on_demand = (spot / SPOT_PER_HOUR) * ON_DEMAND_PER_HOUR + on_demand
    return {
        "per_sample_usd": round((spot + on_demand) / samples, 3),
        "per_sample_all_on_demand_usd": round(all_on_demand / samples, 3),
    }


def blob_figures(night: Night, phase: dict[str, Any]) -> dict[str, Any]:
    """Airflow's Blob requests (measured through the counting proxy), the busiest second, and the shards'
    own (a model: the fake pods write nothing; the SDK reads and writes each shard's done record and its
    checkpoints, about ``SHARD_BLOB_REQUESTS`` requests a shard)."""
    stamps = phase.get("blob_requests") or []
    per_second: dict[int, int] = defaultdict(int)
    for at in stamps:
        per_second[int(at)] += 1
    done_per_second: dict[int, int] = defaultdict(int)
    for pod in phase["pods"]:
        if pod["phase"] == "Succeeded" and pod["ended"]:
            done_per_second[int(pod["ended"])] += 1
    return {
        "airflow_requests": len(stamps),
        "airflow_peak_per_second": max(per_second.values(), default=0),
        "shards_peak_per_second_model": SHARD_BLOB_REQUESTS * max(done_per_second.values(), default=0),
    }


SHARD_BLOB_REQUESTS = 6
"""Per pod: done record read + write, one checkpoint write, one read on resume (worst case), and the
hand-off's two (its index's release record read at the start, the release records listed at the end)."""


def summarize(night: Night, phase: dict[str, Any]) -> dict[str, Any]:
    ends = [_ts(t["end_date"]) for t in phase["task_instances"] if t["end_date"]]
    last_end = max((e for e in ends if e), default=phase["ended"])
    makespan = last_end - phase["started"]
    ideal = night.ideal()
    deadline_at = phase["started"] + night.deadline_seconds()
    gathers = [t for t in phase["task_instances"] if _step_of(t["task_id"]) == night.shape.steps[-1].name]
    missed = [t for t in gathers if t["state"] != "success" or (_ts(t["end_date"]) or 1e18) > deadline_at]
    shards = night.shards()
    procs = process_figures(phase)
    triggerers = {k: v for k, v in procs.items() if k.startswith("triggerer")}
    states: dict[str, int] = defaultdict(int)
    for per_dag in phase["states"].values():
        for state, n in per_dag.items():
            states[state] += n
    return {
        "system": phase["system"],
        "makespan_s": round(makespan, 1),
        "ideal_s": round(ideal, 1),
        "quota_bound_s": round(night.quota_bound(), 1),
        "critical_path_s": round(night.critical_path(), 1),
        "ratio_to_ideal": round(makespan / ideal, 3),
        "deadline_s": night.deadline_seconds(),
        "deadline_met": not missed,
        "gather_tasks_late_or_failed": len(missed),
        "task_states": dict(states),
        **shard_accounting(night, phase),
        **redone(phase),
        **replacement_waits(phase),
        "quota_utilisation_pct": quota_figures(phase, last_end),
        "apiserver_requests_total": phase["apiserver"]["total"],
        "apiserver_requests_airflow": phase["apiserver"]["airflow"],
        "airflow_requests_per_shard": round(phase["apiserver"]["airflow"] / shards, 2),
        # by resource and verb (``bed.BREAKDOWN``; None: a run from before the breakdown)
        "apiserver_requests_airflow_by": phase["apiserver"].get("airflow_by"),
        # the UI probe's reads, on an identity of their own (None: a run from before it had one)
        "apiserver_requests_ui": phase["apiserver"].get("ui"),
        "postgres_commits": phase["postgres"].get("commits"),
        "blob": blob_figures(night, phase),
        "triggerer": triggerers,
        "triggerer_cpu_pct_mean": round(statistics.mean(v["cpu_pct_of_core"] for v in triggerers.values()), 2)
        if triggerers
        else None,
        "scheduler": procs.get("scheduler"),
        "api_server": procs.get("api-server"),
        "ui": ui_figures(phase),
        "cost": cost_figures(night, phase),
        "time": timings(phase)["summary"],
        "jobs": len(phase["jobs"]),
        "pods": len(phase["pods"]),
        "triggerer_kill": phase.get("triggerer_kill"),
    }


def violations(night: Night, phase: dict[str, Any]) -> list[str]:
    """What must never happen on any night, each with its evidence: a task not succeeded, a shard lost or
    completed twice, a pod created before its Job's Workload held quota, more pods running than the
    cohort's quota holds."""
    found: list[str] = []
    for dag, states in phase["states"].items():
        if set(states) - {"success"}:
            found.append(f"{dag}: task states {states}")
    shards = shard_accounting(night, phase)
    if shards["shards_lost"]:
        found.append(f"{shards['shards_lost']} shards lost: " + "; ".join(shards["lost_in"]))
    if shards["completed_twice"]:
        found.append(f"{shards['completed_twice']} shards completed twice: " + "; ".join(shards["twice_in"]))
    # The apiserver's own times (whole seconds: a pod created after its admission is never in an earlier
    # second); the watches' times for records without them. Two watch streams can deliver seconds apart.
    reserved = {w["job_uid"]: w.get("api_reserved") or [] for w in phase["workloads"]}
    admitted = {w["job_uid"]: w["admitted"] for w in phase["workloads"]}

    def before_quota(pod: dict[str, Any]) -> bool:
        if pod.get("api_created") and reserved.get(pod["job_uid"]):
            return bool(pod["api_created"] < min(reserved[pod["job_uid"]]))
        seen = admitted.get(pod["job_uid"])
        return not seen or pod["created"] < seen[0] - 1.0

    early = [p["name"] for p in phase["pods"] if before_quota(p)]
    if early:
        found.append(f"{len(early)} pods created before their Workload held quota: {early[:5]}")
    cap = night.shape.genomics_cpu + night.shape.risk_cpu
    over = [s for s in phase["timeline"] if sum(s["running"].values()) > cap]
    if over:
        found.append(f"{len(over)} samples with more than {cap} pods running (the cohort's quota)")
    return found
