#!/usr/bin/env python
"""Where a sharded Job's time goes beyond the ideal: the seed's scenario A (1,000 shards x 3 s at
parallelism 50: 60 s ideal) on the local cluster, taken apart per step.

One Kueue-queued Indexed Job as the operator builds it (``build_indexed_job``: suspended, per-index retries),
in a ClusterQueue that admits it at once. A watch on the namespace's pods and on the Job (admin identity, its
own thread) stamps, with this process's monotonic clock, when each pod is first seen (created by the Job
controller), bound to a node (the scheduler), Running and Succeeded (KWOK), and when the Job is unsuspended
and Complete. The Workload's admission comes from its condition.

Steps reported (the anchor is the ideal, completions x run / parallelism):

- **admission**: Job created -> Workload admitted (Kueue) -> first pod created (the Job controller, once
  Kueue unsuspends the Job);
- per pod: **scheduling** (created -> bound), **start** (bound -> Running, KWOK), **run** (Running ->
  Succeeded: the 3 s plus KWOK's stage tick);
- **refill**: a pod Succeeded -> the Job controller's next pod created (the k-th success after the first
  wave against the (parallelism + k)-th creation);
- **finish**: last pod Succeeded -> Job Complete.

    .venv/bin/python benchmarks/scenario_a_overhead.py      # about 2 min
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bed_env import key_value_table, load_devcluster_env, write_results  # noqa: E402
from kubernetes import config, watch  # noqa: E402

from airflow_kueue_provider.kueue.spec.job_manifest import build_indexed_job  # noqa: E402
from airflow_kueue_provider.kueue.spec.job_spec import IndexedJobSpec  # noqa: E402
from tests.integration.cluster import (  # noqa: E402
    Cluster,
    create_kueue_env,
    delete_kueue_env,
    wait_for,
)

INDEX = "batch.kubernetes.io/job-completion-index"


class Stamps:
    """First time (monotonic) each pod reached each step, and the Job's own steps."""

    def __init__(self) -> None:
        self.pods: dict[str, dict[str, float]] = {}
        self.job: dict[str, float] = {}
        self.stop = threading.Event()
        self.lock = threading.Lock()

    def pod(self, name: str, step: str) -> None:
        with self.lock:
            self.pods.setdefault(name, {}).setdefault(step, time.monotonic())


def watch_pods(cluster: Cluster, namespace: str, stamps: Stamps) -> None:
    w = watch.Watch()
    while not stamps.stop.is_set():
        for event in w.stream(cluster.core.list_namespaced_pod, namespace, timeout_seconds=5):
            pod = event["object"]
            name = pod.metadata.name
            stamps.pod(name, "created")
            if pod.spec.node_name:
                stamps.pod(name, "bound")
            if pod.status.phase == "Running":
                stamps.pod(name, "running")
            if pod.status.phase in ("Succeeded", "Failed"):
                stamps.pod(name, "done")
            if stamps.stop.is_set():
                w.stop()


def watch_job(cluster: Cluster, namespace: str, name: str, stamps: Stamps) -> None:
    w = watch.Watch()
    while not stamps.stop.is_set():
        for event in w.stream(
            cluster.batch.list_namespaced_job,
            namespace,
            field_selector=f"metadata.name={name}",
            timeout_seconds=5,
        ):
            job = event["object"]
            if job.spec.suspend is False:
                stamps.job.setdefault("unsuspended", time.monotonic())
            for cond in job.status.conditions or []:
                if cond.type == "Complete" and cond.status == "True":
                    stamps.job.setdefault("complete", time.monotonic())
            if stamps.stop.is_set():
                w.stop()


def run(args: argparse.Namespace) -> dict[str, Any]:
    cluster = Cluster(config.new_client_from_config(config_file=os.environ["KUBECONFIG"]))
    cpu_per_pod = 0.25
    env = create_kueue_env(cluster, "scenario-a", cpu=str(args.parallelism * cpu_per_pod + 1), memory="1Ti")
    stamps = Stamps()
    threads = [
        threading.Thread(target=watch_pods, args=(cluster, env.namespace, stamps), daemon=True),
        threading.Thread(target=watch_job, args=(cluster, env.namespace, "scenario-a", stamps), daemon=True),
    ]
    for t in threads:
        t.start()
    time.sleep(1)
    try:
        manifest = build_indexed_job(
            IndexedJobSpec(
                name="scenario-a",
                namespace=env.namespace,
                queue_name=env.local_queue,
                image="example.invalid/shard:1",
                completions=args.shards,
                parallelism=args.parallelism,
                resources={"requests": {"cpu": f"{int(cpu_per_pod * 1000)}m", "memory": "64Mi"}},
                backoff_limit_per_index=1,
                spot=True,
                annotations={"kwok.airflow-kueue.io/run-duration": f"{args.run_seconds}s"},
            )
        )
        created = time.monotonic()
        job = env.create_job(manifest)
        wait_for("Job Complete", lambda: "complete" in stamps.job, timeout=args.timeout, interval=0.2)
        workload = env.workload(job) or {}
        admitted_condition = next(
            c for c in workload["status"]["conditions"] if c["type"] == "Admitted" and c["status"] == "True"
        )
        return summarise(args, created, stamps, admitted_condition, workload)
    finally:
        stamps.stop.set()
        delete_kueue_env(env)


def _stats(values: list[float]) -> dict[str, float]:
    values = sorted(values)
    if not values:
        return {}
    return {
        "p50": round(statistics.median(values), 3),
        "p90": round(values[int(0.9 * (len(values) - 1))], 3),
        "max": round(values[-1], 3),
        "mean": round(statistics.fmean(values), 3),
    }


def summarise(
    args: argparse.Namespace,
    created: float,
    stamps: Stamps,
    admitted_condition: dict[str, Any],
    workload: dict[str, Any],
) -> dict[str, Any]:
    pods = [p for p in stamps.pods.values() if {"created", "bound", "running", "done"} <= set(p)]
    creations = sorted(p["created"] for p in pods)
    dones = sorted(p["done"] for p in pods)
    refill = [creations[args.parallelism + k] - dones[k] for k in range(len(creations) - args.parallelism)]
    complete = stamps.job["complete"]
    total = complete - created
    ideal = args.shards * args.run_seconds / args.parallelism
    waves = args.shards / args.parallelism
    first_pod = creations[0] - created
    cycle = [p["done"] - p["created"] for p in pods]
    per_wave = statistics.fmean(cycle) + statistics.fmean(refill) - args.run_seconds if refill else 0.0
    return {
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores",
        "shards": args.shards,
        "parallelism": args.parallelism,
        "run_seconds": args.run_seconds,
        "ideal_seconds (anchor)": round(ideal, 1),
        "job_seconds": round(total, 1),
        "ratio_to_ideal": round(total / ideal, 3),
        "pods_seen": len(pods),
        "admission: created -> first pod (s)": round(first_pod, 2),
        "admission: unsuspended after (s)": round(stamps.job.get("unsuspended", created) - created, 2),
        "admitted_condition_at": admitted_condition.get("lastTransitionTime"),
        "scheduling: created -> bound (s)": _stats([p["bound"] - p["created"] for p in pods]),
        "start: bound -> Running (s)": _stats([p["running"] - p["bound"] for p in pods]),
        "run: Running -> Succeeded (s)": _stats([p["done"] - p["running"] for p in pods]),
        "refill: Succeeded -> next pod created (s)": _stats(refill),
        "finish: last pod -> Job Complete (s)": round(complete - dones[-1], 2),
        "overhead per wave (s)": round(per_wave, 3),
        "waves": waves,
        "overhead explained (s)": round(first_pod + per_wave * waves + (complete - dones[-1]), 1),
        "overhead measured (s)": round(total - ideal, 1),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shards", type=int, default=1000)
    parser.add_argument("--parallelism", type=int, default=50)
    parser.add_argument("--run-seconds", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=900)
    parser.add_argument("--name", default="scenario_a_overhead")
    args = parser.parse_args()
    load_devcluster_env()
    result = run(args)
    write_results(args.name, result, key_value_table(result, leave_out=("trace",)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
