#!/usr/bin/env python
"""Quota held idle in a sharded Job's tail, and when a second team's waiting Job gets in.

Issue 16 asked for a "tail shrink" (lower an elastic Job's parallelism to its unfinished indexes so Kueue
releases the rest of its quota). Kueue already does this for every batch/v1 Job: with its ReclaimablePods
feature (beta, on by default since v0.15) the Job integration reports ``parallelism - unfinished`` pods as
``status.reclaimablePods`` once fewer indexes are left than pods may run, and Kueue's usage drops by that
many pods at once. This script measures it on the local cluster, against the anchor of the same run: the
quota a Kueue without reclaimable pods would hold (the Job's full parallelism until it finishes).

Team A's ClusterQueue of ``--parallelism`` CPUs and team B's, which owns none, in one cohort: B runs on
what A does not use. Team A's Job:
``--shards`` indexes of 1 CPU at parallelism ``--parallelism``, each index running its own duration from a
fixed distribution (``--min-seconds``..``--max-seconds``, seed ``--seed``;
``kwok.airflow-kueue.io/run-duration-N``).
Once it is admitted, team B submits a Job needing half the queue. Sampled every ``--interval`` s (admin
identity): A's active pods, finished indexes and reclaimable pods; whether B is admitted.

Reported:
- **reserved-but-idle CPU-seconds of A**: the integral of (quota A holds - A's running pods) x 1 CPU, with
  Kueue's reclaimable pods (measured) and without them (the anchor: parallelism held until A finishes);
- **when B was admitted**, against A's end (which is when B would be admitted without reclaimable pods);
- every shard exactly once (A's completed indexes, and one pod per index).

    .venv/bin/python benchmarks/tail_quota.py   # about 3 min: 200 shards of 1-20 s at parallelism 20
"""

from __future__ import annotations

import argparse
import itertools
import os
import platform
import random
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bed_env import key_value_table, load_devcluster_env, write_results  # noqa: E402
from kubernetes import config  # noqa: E402

from airflow_kueue_provider.kueue.index_set import IndexSet  # noqa: E402
from devcluster.manifests import KUEUE_FEATURE_GATES_ENV  # noqa: E402
from tests.integration.cluster import (  # noqa: E402
    Cluster,
    create_kueue_env,
    delete_kueue_env,
    indexed_job,
    is_true,
    wait_for,
)
from tests.integration.operators.tail_quota_queues import add_second_team  # noqa: E402


@dataclass
class Sample:
    at: float  # seconds since A was admitted
    active: int
    finished: int  # completed + failed indexes
    reclaimable: int
    b_admitted: bool


def durations(args: argparse.Namespace) -> list[int]:
    rng = random.Random(args.seed)
    return [rng.randint(args.min_seconds, args.max_seconds) for _ in range(args.shards)]


def restart_kueue(feature_gates: str | None) -> None:
    """``devcluster up`` with Kueue's feature gates set (or back to the defaults): it restarts Kueue."""
    env = {k: v for k, v in os.environ.items() if k != KUEUE_FEATURE_GATES_ENV}
    if feature_gates:
        env[KUEUE_FEATURE_GATES_ENV] = feature_gates
    subprocess.run([sys.executable, "-m", "devcluster", "up"], cwd=REPO, env=env, check=True)


def reclaimable_pods(workload: dict[str, Any] | None) -> int:
    return sum(
        int(p.get("count") or 0) for p in ((workload or {}).get("status") or {}).get("reclaimablePods") or []
    )


def run(args: argparse.Namespace) -> dict[str, Any]:
    cluster = Cluster(config.new_client_from_config(config_file=os.environ["KUBECONFIG"]))
    env = create_kueue_env(cluster, "tail-quota", cpu=str(args.parallelism), memory="1Ti")
    team_b = "team-b"
    add_second_team(env, team_b)  # its own ClusterQueue, nominal 0, in a cohort with A's
    try:
        shard_seconds = durations(args)
        annotations = {
            f"kwok.airflow-kueue.io/run-duration-{i}": f"{d}s" for i, d in enumerate(shard_seconds)
        }
        a = env.create_job(
            indexed_job(
                "team-a",
                env.local_queue,
                completions=args.shards,
                parallelism=args.parallelism,
                cpu="1",
                annotations=annotations,
                backoffLimitPerIndex=1,
            )
        )
        wait_for("A admitted", lambda: is_true(env.workload(a), "Admitted"), timeout=60)
        t0 = time.monotonic()
        b = env.create_job(
            indexed_job("team-b", team_b, completions=args.parallelism // 2, cpu="1", run_duration="1s")
        )
        samples: list[Sample] = []
        b_admitted_at: float | None = None
        a_end: float | None = None
        while True:
            now = time.monotonic() - t0
            job = env.job("team-a") or {}
            status = job.get("status") or {}
            finished = len(IndexSet.parse(status.get("completedIndexes"))) + len(
                IndexSet.parse(status.get("failedIndexes"))
            )
            b_in = is_true(env.workload(b), "Admitted") or is_true(env.job("team-b"), "Complete")
            if b_in and b_admitted_at is None:
                b_admitted_at = now
            samples.append(
                Sample(now, int(status.get("active") or 0), finished, reclaimable_pods(env.workload(a)), b_in)
            )
            if a_end is None and (is_true(job, "Complete") or is_true(job, "Failed")):
                a_end = now
            if a_end is not None and b_admitted_at is not None:
                break
            if now > args.timeout:
                raise TimeoutError(f"A or B did not finish within {args.timeout} s")
            time.sleep(args.interval)
        job = env.job("team-a") or {}
        pods = env.pods("team-a")
        per_index: dict[str, int] = {}
        for pod in pods:
            idx = pod["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"]
            per_index[idx] = per_index.get(idx, 0) + 1
        return summarise(args, shard_seconds, samples, a_end or 0.0, b_admitted_at, job, per_index)
    finally:
        delete_kueue_env(env)


def summarise(
    args: argparse.Namespace,
    shard_seconds: list[int],
    samples: list[Sample],
    a_end: float,
    b_admitted_at: float | None,
    job: dict[str, Any],
    per_index: dict[str, int],
) -> dict[str, Any]:
    idle_with = idle_without = 0.0
    tail_start: float | None = None
    for before, after in itertools.pairwise(samples):
        if before.at >= a_end:
            break
        dt = min(after.at, a_end) - before.at
        held = args.parallelism - before.reclaimable
        idle_with += max(held - before.active, 0) * dt
        idle_without += max(args.parallelism - before.active, 0) * dt
        if tail_start is None and args.shards - before.finished < args.parallelism:
            tail_start = before.at
    ideal = sum(shard_seconds) / args.parallelism
    status = job.get("status") or {}
    return {
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores",
        "shards": args.shards,
        "parallelism": args.parallelism,
        "shard_seconds": {"min": min(shard_seconds), "max": max(shard_seconds), "sum": sum(shard_seconds)},
        "ideal_seconds": round(ideal, 1),
        "a_seconds": round(a_end, 1),
        "tail_starts_at": round(tail_start or 0.0, 1),
        "b_admitted_at": round(b_admitted_at or 0.0, 1),
        "b_admitted_before_a_ended_by": round(a_end - (b_admitted_at or a_end), 1),
        "idle_cpu_seconds_with_reclaimable_pods": round(idle_with, 1),
        "idle_cpu_seconds_without (anchor)": round(idle_without, 1),
        "idle_ratio": round(idle_with / idle_without, 3) if idle_without else None,
        "completed_indexes": status.get("completedIndexes"),
        "failed_indexes": status.get("failedIndexes") or "",
        "pods_per_index_max": max(per_index.values(), default=0),
        "indexes_with_pods": len(per_index),
        "samples": len(samples),
        "max_reclaimable": max((s.reclaimable for s in samples), default=0),
        "trace": [asdict(s) for s in samples[:: max(len(samples) // 200, 1)]],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shards", type=int, default=200)
    parser.add_argument("--parallelism", type=int, default=20)
    parser.add_argument("--min-seconds", type=int, default=1)
    parser.add_argument("--max-seconds", type=int, default=20)
    parser.add_argument("--seed", type=int, default=16)
    parser.add_argument("--interval", type=float, default=0.25)
    parser.add_argument("--timeout", type=float, default=900)
    parser.add_argument("--name", default=None, help="default: tail_quota[_without_reclaimable_pods]")
    parser.add_argument(
        "--without-reclaimable-pods",
        action="store_true",
        help="the anchor, run for real: Kueue restarted with ReclaimablePods=false, and restored after",
    )
    args = parser.parse_args()
    load_devcluster_env()
    name = args.name or (
        "tail_quota_without_reclaimable_pods" if args.without_reclaimable_pods else "tail_quota"
    )
    if not args.without_reclaimable_pods:
        result = run(args)
    else:
        restart_kueue("ReclaimablePods=false")
        try:
            result = run(args)
        finally:
            restart_kueue(None)
    result["kueue_feature_gates"] = "ReclaimablePods=false" if args.without_reclaimable_pods else "defaults"
    write_results(name, result, key_value_table(result, leave_out=("trace",)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
