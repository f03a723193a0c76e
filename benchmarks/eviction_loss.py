#!/usr/bin/env python
"""Work lost per eviction: running pricer shards on the process nodes, evicted at random points.

The issue's question: "if my Spot node goes away at 02:13, how much work do I lose?". Every shard runs the
Monte Carlo pricer (``example_dags/shard_programs/monte_carlo_pricer.py``) as a real process on the bed's
process nodes, checkpointing every ``--every`` items to Azurite and on SIGTERM. Two phases:

1. **Evictions.** One Indexed Job of ``--shards`` shards that never finish on their own. ``--graceful``
   times, a running pod picked at random is evicted through the Eviction API (a DisruptionTarget condition,
   then deletion with the pod's ``--grace`` seconds: SIGTERM, the SDK's flush, exit 143), and ``--hard``
   times with grace 0 (SIGKILL at once, as for a node that is gone), each at a random point of its shard's
   checkpoint interval. The Job's podFailurePolicy ignores disruptions, so the index restarts and resumes.
   Per eviction, from the witnesses: **items redone** = the last item the evicted pod logged + 1 - the
   first item its successor logged (lost work: the successor starts after an item nobody logged), over the
   items per checkpoint interval; and, with grace, **SIGTERM -> checkpoint written** (the SDK's own log
   line: signal received to flush upload done) and SIGTERM -> process exit (the node's journal).
2. **Kueue's early signal.** ``--preemptions`` times, a higher-priority Job preempts a running pricer Job:
   the time from the Workload's ``Evicted`` condition (seen by a watch, and its lastTransitionTime) to the
   first SIGTERM in the journal: how much earlier an SDK told of the eviction could start its flush.

    .venv/bin/python benchmarks/eviction_loss.py              # ~6 min: 30 graceful + 30 hard, 10 preemptions
    .venv/bin/python benchmarks/eviction_loss.py --graceful 4 --hard 4 --preemptions 2 --name try

Writes ``results/<name>.md`` and ``results/<name>.json``. Needs the bed with its process nodes
(``python -m devcluster up``); never run it while a serial test deletes a process node.
"""

from __future__ import annotations

import argparse
import collections
import functools
import os
import platform
import random
import re
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from azure.storage.blob import BlobServiceClient  # noqa: E402
from bed_env import load_devcluster_env, write_results  # noqa: E402
from kubernetes import config, watch  # noqa: E402

from tests.integration.cluster import Cluster, KueueEnv, delete_kueue_env, is_true, short_id, wait_for  # noqa: E402
from tests.integration.process_node import pod_log, process_queues  # noqa: E402
from tests.integration.worker.eviction_bed import (  # noqa: E402
    PRICER,
    command_job,
    pod_records,
    pod_spans,
    pricer_arguments,
    read_items_log,
)

FLUSHED = re.compile(r"SIGTERM, checkpoint \d+ \(progress (\d+)\) written in ([0-9.]+)s")
INDEX = "batch.kubernetes.io/job-completion-index"


@dataclass
class Eviction:
    mode: str  # graceful | hard
    pod: str
    shard: int
    at: float  # wall time of the request
    last_logged: int | None = None  # the evicted pod's last item
    resumed_at: int | None = None  # its successor's first item
    redone: int | None = None
    lost: int | None = None
    flush_seconds: float | None = None  # SIGTERM -> checkpoint written, as the SDK logs it
    exit_seconds: float | None = None  # first signal -> exit, from the node's journal
    signals: str = ""
    exit_code: int | None = None


def pct(values: list[float], p: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def summary(values: list[float]) -> dict[str, float | int | None]:
    mean = statistics.fmean(values) if values else None
    top = max(values) if values else None
    return {"n": len(values), "p50": pct(values, 50), "p90": pct(values, 90), "p99": pct(values, 99),
            "max": top, "mean": mean}  # fmt: skip


def checkpoint_env(conn_string: str, container: str, prefix: str, grace: int) -> dict[str, str]:
    """What a pod needs to checkpoint without the operator (the SDK's local-run flavour)."""
    return {
        "AIRFLOW_KUEUE_CHECKPOINT_URL": f"http://127.0.0.1:10000/devstoreaccount1/{container}",
        "AIRFLOW_KUEUE_CHECKPOINT_PREFIX": prefix,
        "AIRFLOW_KUEUE_GRACE_SECONDS": str(max(1, grace - 5)),
        "AZURE_STORAGE_CONNECTION_STRING": conn_string,
    }


def live_pods(cluster: Cluster, env: KueueEnv, job: str) -> dict[int, str]:
    """index -> name of the Running, not deleting, pod of each index ({} while the API server is away: the
    fault soak may restart it)."""
    found: dict[int, str] = {}
    try:
        pods = env.pods(job)
    except Exception:  # ApiException, urllib3's connection errors
        return found
    for pod in pods:
        if pod["status"].get("phase") == "Running" and not pod["metadata"].get("deletionTimestamp"):
            found[int(pod["metadata"]["annotations"][INDEX])] = pod["metadata"]["name"]
    return found


def evict(cluster: Cluster, namespace: str, pod: str, grace: int | None) -> None:
    body: dict[str, Any] = {"apiVersion": "policy/v1", "kind": "Eviction",
                            "metadata": {"name": pod, "namespace": namespace}}  # fmt: skip
    if grace is not None:
        body["deleteOptions"] = {"gracePeriodSeconds": grace}
    cluster.core.create_namespaced_pod_eviction(pod, namespace, body)


def eviction_phase(
    cluster: Cluster, args: argparse.Namespace, blob: tuple[str, str], work: Path
) -> list[Eviction]:
    rng = random.Random(args.seed)
    env = process_queues(cluster, "eviction-loss", cpu=str(args.shards * 0.25 + 0.5))
    log = work / "items-evictions"
    job = f"pricer-{short_id()}"
    try:
        command = ["python", "-m", PRICER, *pricer_arguments(log, items=10**7, every=args.every,
                                                             item_seconds=args.item_seconds)]  # fmt: skip
        extra = checkpoint_env(*blob, f"bench/{job}", args.grace)
        # a force-deleted pod may count as a failure (no DisruptionTarget in time): retries must not run out
        shards = command_job(job, "lq", command, pods=args.shards, cpu="250m", env=extra, grace=args.grace,
                             retries_per_index=10_000)  # fmt: skip
        env.create_job(shards)
        plan = ["graceful"] * args.graceful + ["hard"] * args.hard
        rng.shuffle(plan)
        done: list[Eviction] = []
        evicted: set[str] = set()
        per_index: collections.Counter[int] = collections.Counter()
        interval = args.every * args.item_seconds
        for mode in plan:

            def candidate() -> tuple[int, str] | None:  # a running pod that has logged an item, random point
                logged = {e.pod: e for e in read_items_log(log)}
                ready = [
                    (i, p)
                    for i, p in live_pods(cluster, env, job).items()
                    if p in logged and p not in evicted
                ]
                if not ready:
                    return None
                # The least evicted index first: the Job controller delays the next pod of an index by
                # 10 s x 2^(n-1) after its n-th eviction, ignored or not (docs/evictions.md).
                fewest = min(per_index[i] for i, _ in ready)
                return rng.choice([(i, p) for i, p in ready if per_index[i] == fewest])

            index, pod = wait_for("a running shard to evict", candidate, timeout=420, interval=0.1)
            per_index[index] += 1
            time.sleep(rng.uniform(0, interval))
            evicted.add(pod)
            done.append(Eviction(mode, pod, index, time.time()))
            try:
                evict(cluster, env.namespace, pod, None if mode == "graceful" else 0)
            except Exception as exc:  # gone meanwhile: not counted
                print(f"eviction of {pod} failed: {exc}")
                done.pop()
            print(f"{len(done):3d}/{len(plan)} {mode:8s} {pod}", flush=True)
        # the last evicted shards resume before the figures are read (an index evicted n times waits up to
        # 10 s x 2^(n-1), at most 6 min, for its next pod)
        wait_for("the last evicted shards resumed", lambda: all(
            any(e.shard == ev.shard and e.pod != ev.pod and e.t > ev.at for e in read_items_log(log))
            for ev in done[-args.shards:]), timeout=420, interval=2)  # fmt: skip
        measure(cluster, env, job, log, done, args.every)
        return done
    finally:
        delete_kueue_env(env)


def measure(cluster: Cluster, env: KueueEnv, job: str, log: Path, done: list[Eviction], every: int) -> None:
    logged = read_items_log(log)
    spans = pod_spans(logged)
    records = pod_records(cluster, job, env.namespace)
    first_t: dict[str, float] = {}
    for e in logged:
        first_t.setdefault(e.pod, e.t)
    for ev in done:
        rec = records.get(f"{env.namespace}/{ev.pod}")
        if rec is not None:
            ev.signals = ",".join(s for s, _ in rec.signals)
            ev.exit_code = rec.exit_code
            if rec.signals and rec.exited:
                ev.exit_seconds = rec.exited - rec.signals[0][1]
            if ev.mode == "graceful":
                found = FLUSHED.search(pod_log(rec.pod, "main", node=rec.node, uid=rec.uid))
                ev.flush_seconds = float(found[2]) if found else None
        ev.last_logged = spans[ev.pod][2]
        successors = sorted((first_t[p], span[1]) for p, span in spans.items()
                            if span[0] == ev.shard and first_t[p] > ev.at and p != ev.pod)  # fmt: skip
        if successors:
            ev.resumed_at = successors[0][1]
            ev.redone = max(0, ev.last_logged + 1 - ev.resumed_at)
            ev.lost = max(0, ev.resumed_at - ev.last_logged - 1)


@dataclass
class Preemption:
    evicted_seen: float  # wall time a watch saw Evicted=True
    evicted_transition: float  # its lastTransitionTime (whole seconds)
    first_sigterm: float | None


def preemption_phase(
    cluster: Cluster, args: argparse.Namespace, blob: tuple[str, str], work: Path
) -> list[Preemption]:
    env = process_queues(cluster, "eviction-early", cpu="0.5")
    low, high = env.priority_class("low", 10), env.priority_class("high", 1000)
    log, job = work / "items-preemptions", f"low-{short_id()}"
    seen: dict[str, list[tuple[float, float]]] = {}
    stop = threading.Event()

    def watch_workloads() -> None:
        w = watch.Watch()
        while not stop.is_set():
            for event in w.stream(cluster.custom.list_namespaced_custom_object, "kueue.x-k8s.io", "v1beta2",
                                  env.namespace, "workloads", timeout_seconds=5):  # fmt: skip
                obj, now = event["object"], time.time()
                for c in obj.get("status", {}).get("conditions") or []:
                    if c["type"] == "Evicted" and c["status"] == "True":
                        t = datetime.fromisoformat(c["lastTransitionTime"].replace("Z", "+00:00")).timestamp()
                        marks = seen.setdefault(obj["metadata"]["name"], [])
                        if not marks or marks[-1][1] != t:
                            marks.append((now, t))

    watcher = threading.Thread(target=watch_workloads, daemon=True)
    watcher.start()
    found: list[Preemption] = []
    try:
        command = ["python", "-m", PRICER, *pricer_arguments(log, items=10**7, every=args.every,
                                                             item_seconds=args.item_seconds)]  # fmt: skip
        extra = checkpoint_env(*blob, f"bench/{job}", args.grace)
        env.create_job(command_job(job, "lq", command, pods=2, cpu="250m", env=extra, grace=args.grace,
                                   priority=low))  # fmt: skip
        for n in range(args.preemptions):
            wait_for("the low Job running again", lambda: len(live_pods(cluster, env, job)) == 2 and all(
                p in {e.pod for e in read_items_log(log)} for p in live_pods(cluster, env, job).values()),
                timeout=180)  # fmt: skip
            time.sleep(random.Random(args.seed + n).uniform(0, args.every * args.item_seconds))
            started = time.time()
            urgent = f"urgent-{n}"
            env.create_job(command_job(urgent, "lq", ["sleep", "2"], pods=1, cpu="500m", priority=high))
            wait_for("the urgent Job done", functools.partial(complete, env, urgent), timeout=180)
            workload = next(iter(seen_for(env, job, seen)), None)
            sigterms = [t for r in pod_records(cluster, job, env.namespace).values() for s, t in r.signals
                        if s == "SIGTERM" and t > started]  # fmt: skip
            marks = [m for m in (workload or []) if m[0] > started]
            if marks:
                found.append(Preemption(marks[0][0], marks[0][1], min(sigterms) if sigterms else None))
            print(
                f"preemption {n + 1}/{args.preemptions}: {found[-1] if marks else 'no Evicted seen'}",
                flush=True,
            )
    finally:
        stop.set()
        delete_kueue_env(env)
    return found


def complete(env: KueueEnv, job: str) -> bool:
    return is_true(env.job(job), "Complete")


def seen_for(
    env: KueueEnv, job: str, seen: dict[str, list[tuple[float, float]]]
) -> list[list[tuple[float, float]]]:
    uid = (env.job(job) or {}).get("metadata", {}).get("uid")
    workload = env.cluster.workload_for_job(env.namespace, uid) if uid else None
    return [seen.get(workload["metadata"]["name"], [])] if workload else []


def report(
    args: argparse.Namespace, evictions: list[Eviction], preemptions: list[Preemption], took: float
) -> None:
    def of(mode: str, attr: str) -> list[float]:
        return [float(getattr(e, attr)) for e in evictions if e.mode == mode and getattr(e, attr) is not None]

    graceful = [e for e in evictions if e.mode == "graceful"]
    hard = [e for e in evictions if e.mode == "hard"]
    over_interval = [e for e in evictions if e.redone is not None and e.redone > args.every]
    hard_bound = [e for e in hard if e.redone is not None and e.last_logged is not None
                  and e.redone > (e.last_logged + 1) % args.every]  # fmt: skip
    expected_signals = {"graceful": "SIGTERM", "hard": "SIGKILL"}
    disturbed = [e.pod for e in evictions if e.signals != expected_signals[e.mode]]
    gaps = [p.first_sigterm - p.evicted_seen for p in preemptions if p.first_sigterm]
    gaps_ltt = [p.first_sigterm - p.evicted_transition for p in preemptions if p.first_sigterm]
    result: dict[str, Any] = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": f"{platform.node()} {platform.machine()}, {os.cpu_count()} cores, "
        f"Python {platform.python_version()}",
        "settings": {k: v for k, v in vars(args).items() if k != "name"},
        "seconds": round(took, 1),
        "graceful": {
            "evictions": len(graceful),
            "redone_items": summary(of("graceful", "redone")),
            "redone_per_interval": summary([x / args.every for x in of("graceful", "redone")]),
            "lost_items": sum(of("graceful", "lost")),
            "flush_seconds": summary(of("graceful", "flush_seconds")),
            "sigterm_to_exit_seconds": summary(of("graceful", "exit_seconds")),
            "exit_143": sum(e.exit_code == 143 for e in graceful),
        },
        "hard": {
            "evictions": len(hard),
            "redone_items": summary(of("hard", "redone")),
            "redone_per_interval": summary([x / args.every for x in of("hard", "redone")]),
            "lost_items": sum(of("hard", "lost")),
            "over_since_last_checkpoint": len(hard_bound),
            "sigkill_only": sum(e.signals == "SIGKILL" for e in hard),
        },
        "over_one_interval": len(over_interval),
        "disturbed": disturbed,
        "early_signal": {
            "preemptions": len(preemptions),
            "evicted_seen_to_sigterm_seconds": summary(gaps),
            "evicted_transition_to_sigterm_seconds": summary(gaps_ltt),
        },
        "evictions": [asdict(e) for e in evictions],
        "preemptions": [asdict(p) for p in preemptions],
    }
    write_results(args.name, result, table(result, args))


def fmt(s: dict[str, Any], key: str, unit: str = "") -> str:
    v = s.get(key)
    return "-" if v is None else f"{v:.2f}{unit}" if isinstance(v, float) else f"{v}{unit}"


def table(r: dict[str, Any], args: argparse.Namespace) -> str:
    g, h, e = r["graceful"], r["hard"], r["early_signal"]
    rows = [
        ("with grace: items redone per eviction", g["redone_items"], ""),
        ("with grace: redone / checkpoint interval", g["redone_per_interval"], ""),
        ("with grace: SIGTERM -> checkpoint written (SDK)", g["flush_seconds"], " s"),
        ("with grace: SIGTERM -> process exit (journal)", g["sigterm_to_exit_seconds"], " s"),
        ("no grace: items redone per eviction", h["redone_items"], ""),
        ("no grace: redone / checkpoint interval", h["redone_per_interval"], ""),
        ("Evicted seen by a watch -> first SIGTERM", e["evicted_seen_to_sigterm_seconds"], " s"),
        (
            "Evicted lastTransitionTime (whole s) -> first SIGTERM",
            e["evicted_transition_to_sigterm_seconds"],
            " s",
        ),
    ]
    lines = [
        "# Work lost per eviction (`benchmarks/eviction_loss.py`)",
        "",
        f"{r['date']}, {r['machine']}; {r['seconds']} s. Settings: {args.shards} pricer shards on the "
        f"process nodes, a checkpoint every {args.every} items of {args.item_seconds} s, pod grace "
        f"{args.grace} s (the SDK gets {max(1, args.grace - 5)} s), seed {args.seed}.",
        "",
        "| figure | n | p50 | p90 | p99 | max | mean |",
        "|---|---|---|---|---|---|---|",
    ]
    for label, s, unit in rows:
        lines.append(
            f"| {label} | {s['n']} | "
            + " | ".join(fmt(s, k, unit) for k in ("p50", "p90", "p99", "max", "mean"))
            + " |"
        )
    lines += [
        "",
        f"- With grace: {g['evictions']} evictions, {g['exit_143']} exited 143 after the flush, items lost: "
        f"{g['lost_items']:.0f}.",
        f"- Without grace: {h['evictions']} evictions, {h['sigkill_only']} ended by SIGKILL alone, items "
        f"lost: {h['lost_items']:.0f}, redone beyond the items since the last periodic checkpoint: "
        f"{h['over_since_last_checkpoint']}.",
        f"- Evictions that redid more than one checkpoint interval ({args.every} items): "
        f"{r['over_one_interval']}.",
        f"- Kueue preemptions measured for the early signal: {e['preemptions']}.",
        f"- Evictions whose pod got other signals than its mode sends (another fault on the bed, e.g. a "
        f"node lost meanwhile): {len(r['disturbed'])} {r['disturbed'] or ''}.",
        "",
        "Rerun: `.venv/bin/python benchmarks/eviction_loss.py` (flags: `--graceful --hard --preemptions "
        "--shards --every --item-seconds --grace --seed --name`); every eviction's record is in "
        f"`results/{args.name}.json`.",
        "",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--graceful", type=int, default=30, help="evictions with the pod's grace period")
    parser.add_argument("--hard", type=int, default=30, help="evictions with grace 0 (SIGKILL)")
    parser.add_argument(
        "--preemptions", type=int, default=10, help="Kueue preemptions for the early-signal gap"
    )
    parser.add_argument("--shards", type=int, default=12)
    parser.add_argument("--every", type=int, default=5, help="checkpoint every K items")
    parser.add_argument("--item-seconds", type=float, default=0.2)
    parser.add_argument("--grace", type=int, default=15, help="the pods' terminationGracePeriodSeconds")
    parser.add_argument("--seed", type=int, default=27)
    parser.add_argument("--name", default="eviction_loss")
    args = parser.parse_args()
    for name in ("graceful", "hard", "preemptions", "shards", "every", "grace"):
        if getattr(args, name) < (1 if name in ("shards", "every", "grace") else 0):
            parser.error(f"--{name.replace('_', '-')}={getattr(args, name)} is too small")
    load_devcluster_env()
    cluster = Cluster(config.new_client_from_config(config_file=os.environ["KUBECONFIG"]))
    conn_string = os.environ["AZURE_STORAGE_CONNECTION_STRING"]
    container = f"bench-evict-{short_id()}"
    service = BlobServiceClient.from_connection_string(conn_string)
    service.create_container(container)
    started = time.monotonic()
    try:
        with tempfile.TemporaryDirectory(prefix="eviction-loss-") as work:
            evictions = eviction_phase(cluster, args, (conn_string, container), Path(work))
            preemptions = (
                preemption_phase(cluster, args, (conn_string, container), Path(work))
                if args.preemptions
                else []
            )
    finally:
        service.delete_container(container)
    report(args, evictions, preemptions, time.monotonic() - started)


if __name__ == "__main__":
    main()
