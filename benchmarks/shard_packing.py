#!/usr/bin/env python
"""Several shards per pod against one per pod, and both against the ideal, on the local cluster's fake nodes.

Each case runs twice in the same run, one after the other, in a ClusterQueue that admits it at once: the Job
as the operator builds it unpacked (one index per shard), then packed (index ``i`` runs the ``i``-th group of
``choose_per_pod(...)`` shards, the operator's own choice from the expected shard duration). A fake pod runs
for its index's shards' seconds in a row (``kwok.airflow-kueue.io/run-duration[-N]``), plus the worker SDK's
cost on its path, every form alike, as ``sdk_pack_cost.py`` measured it against Azurite with every answer
held 20 ms (a Blob round trip in one Azure region; ``results/sdk_pack_cost.md``, 2026-12-05 23:45 UTC). With
the SDK now (``--sdk read-ahead``: done markers read ahead and written behind, ``worker/done_lookahead.py``,
``worker/done_writes.py``) a pack of 20 costs 8.5 ms a shard, modelled as 6 ms a shard plus 54 ms a pod
(its first read and its last write's wait); before (``--sdk in-line``) 56.9 ms a shard (its read and its
write).

The anchor is the ideal, the shards' seconds / parallelism. Cases:

- **scenario A**: 1,000 shards x 3 s at parallelism 50 (60 s ideal);
- **many small**: ``--small-shards`` (default 10,000) x 1 s at parallelism 50;
- **skewed tail**: 200 shards of 1-20 s (uniform, seed 7; ``tail_quota.py``'s distribution) at parallelism 20,
  packed as the operator packs ``expected_shard_duration=(1, 20)``: decreasing sizes (``--even-skewed``: even
  packs for the mean, the shape before decreasing packs existed).

each without a start delay (the fake nodes' own start) and with ``--aks-start-delay`` (default 5 s: on an AKS
Spot node with the image already cached, the pod sandbox and container start take 2-3 s, the Python
interpreter and the SDK's imports about 1 s, the first Blob round trip 0.1 s; rounded up).

With ``--history`` each case also runs packed from one night of shard history (``history_packing``): the
learned lengths are the case's, and tonight every form runs them with ``--noise`` (default 5 %, uniform): the
lengths repeat night to night with small noise.

    .venv/bin/python benchmarks/shard_packing.py --cases scenario_a          # about 4 min
    .venv/bin/python benchmarks/shard_packing.py                             # every case: about 45 min
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import sys
import threading
import time
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bed_env import load_devcluster_env, write_results  # noqa: E402
from kubernetes import config, watch  # noqa: E402

from airflow_kueue_provider.kueue.checkpoints.learned_lengths import LearnedLengths  # noqa: E402
from airflow_kueue_provider.kueue.checkpoints.packing_choice import PackingChoice, ShardDuration  # noqa: E402
from airflow_kueue_provider.kueue.checkpoints.shard_packing import ShardPacks  # noqa: E402
from airflow_kueue_provider.kueue.index_set import IndexSet  # noqa: E402
from airflow_kueue_provider.kueue.spec.job_manifest import build_indexed_job  # noqa: E402
from airflow_kueue_provider.kueue.spec.job_spec import IndexedJobSpec  # noqa: E402
from tests.integration.cluster import Cluster, create_kueue_env, delete_kueue_env, is_true, wait_for  # noqa: E402

RUN = "kwok.airflow-kueue.io/run-duration"
START = "kwok.airflow-kueue.io/start-delay"


@dataclass(frozen=True)
class Case:
    name: str
    seconds: list[float]  # per shard, as learned (and as the DAG states its range)
    parallelism: int
    tonight: list[float] | None = None
    """With ``--history``: tonight's lengths, the learned ones with ``--noise`` (every form runs these)."""

    @property
    def actual(self) -> list[float]:
        return self.tonight if self.tonight is not None else self.seconds

    @property
    def ideal(self) -> float:
        return sum(self.actual) / self.parallelism

    @property
    def uniform(self) -> bool:
        return len(set(self.seconds)) == 1


@dataclass(frozen=True)
class Outcome:
    case: str
    start_delay: float
    form: str
    shards_per_pod: str
    """The pack shape (``ShardPacks.shape``): ``"5"``, or decreasing runs ``"5x24,...,1x19"``."""
    pods: int
    job_seconds: float
    ratio_to_ideal: float
    phases: dict[str, float] | None = None
    """Seconds after the create (``PodPhases``): the last pod created, the last one running, the last one
    succeeded, the Job's Complete condition seen; and the longest index's run as annotated."""


class PodPhases:
    """When the Job's pods reach each phase, seen by a watch of the namespace (this process's clock)."""

    def __init__(self, cluster: Cluster, namespace: str) -> None:
        self.first: dict[str, dict[str, float]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, args=(cluster, namespace), daemon=True)
        self._thread.start()

    def _watch(self, cluster: Cluster, namespace: str) -> None:
        stream = watch.Watch().stream(cluster.core.list_namespaced_pod, namespace, timeout_seconds=3600)
        for event in stream:
            pod, now = event["object"], time.monotonic()
            seen = self.first.setdefault(pod.metadata.name, {})
            seen.setdefault("created", now)
            if pod.status.phase in ("Running", "Succeeded"):
                seen.setdefault("running", now)
            if pod.status.phase == "Succeeded":
                seen.setdefault("succeeded", now)
            if self._stop.is_set():
                return

    def summary(self, created: float, complete: float, longest_run: float) -> dict[str, float]:
        self._stop.set()

        def last(phase: str) -> float:
            return round(
                max((p[phase] for p in self.first.values() if phase in p), default=created) - created, 2
            )

        return {
            "last_pod_created": last("created"),
            "last_pod_running": last("running"),
            "last_pod_succeeded": last("succeeded"),
            "complete_seen": round(complete - created, 2),
            "longest_index_run": round(longest_run, 2),
        }


def cases(args: argparse.Namespace) -> list[Case]:
    rng = random.Random(7)
    every = {
        "scenario_a": Case("scenario_a", [3.0] * 1000, 50),
        "many_small": Case("many_small", [1.0] * args.small_shards, 50),
        "skewed_tail": Case("skewed_tail", [float(rng.randint(1, 20)) for _ in range(200)], 20),
    }
    chosen = [every[n] for n in args.cases.split(",")]
    if not args.history:
        return chosen
    noise = random.Random(11)
    return [
        Case(
            c.name,
            c.seconds,
            c.parallelism,
            [s * (1 + noise.uniform(-args.noise, args.noise)) for s in c.seconds],
        )
        for c in chosen
    ]


def history_packs(case: Case) -> ShardPacks:
    """The operator's packs with one night of history: the learned lengths, no stated duration."""
    learned = LearnedLengths(len(case.seconds), dict(enumerate(case.seconds)), ("last-night",))
    return PackingChoice(None, None, case.parallelism, learned).packs(IndexSet.range(0, len(case.seconds)))


def packs_of(case: Case, even_skewed: bool) -> ShardPacks:
    """The operator's packs for the case's declared duration (one figure, or the range of a skewed case)."""
    duration = ShardDuration(min(case.seconds), max(case.seconds))
    if even_skewed:
        duration = ShardDuration(duration.mean, duration.mean)
    return PackingChoice(None, duration, case.parallelism).packs(IndexSet.range(0, len(case.seconds)))


SDK_COST = {"read-ahead": (0.006, 0.054), "in-line": (0.0569, 0.0)}
"""The SDK's cost in seconds, (per shard, per pod), as ``sdk_pack_cost.py`` measured it (module docstring)."""


def sdk_seconds(shards: int, sdk: str) -> float:
    """The SDK's cost on the path of an index of ``shards`` shards."""
    per_shard, per_pod = SDK_COST[sdk]
    return per_shard * shards + per_pod


def pod_annotations(
    case: Case, packs: ShardPacks, start_delay: float, sdk: str = "read-ahead"
) -> dict[str, str]:
    """Each index runs its shards' seconds in a row, plus the SDK's cost on its path."""
    per_pod = packs.per_pod
    annotations = {START: f"{start_delay}s"}
    if case.uniform and case.tonight is None and not packs.sizes and not packs.order:
        full = per_pod * case.seconds[0] + sdk_seconds(per_pod, sdk)
        annotations[RUN] = f"{full:.3f}s"
        last = len(packs.shards_of_index(packs.index_count - 1))
        if last != per_pod:
            tail = last * case.seconds[0] + sdk_seconds(last, sdk)
            annotations[f"{RUN}-{packs.index_count - 1}"] = f"{tail:.3f}s"
        return annotations
    for i in range(packs.index_count):
        shards = packs.shards_of_index(i)
        run = sum(case.actual[s] for s in shards) + sdk_seconds(len(shards), sdk)
        annotations[f"{RUN}-{i}"] = f"{run:.3f}s"
    return annotations


def run_once(
    cluster: Cluster, case: Case, packs: ShardPacks, args: argparse.Namespace, delay: float
) -> tuple[float, dict[str, float]]:
    """Seconds from the Job's creation to its Complete condition, and where they went (``PodPhases``)."""
    cpu_per_pod = 0.25
    env = create_kueue_env(
        cluster, f"pack-{case.name}", cpu=str(case.parallelism * cpu_per_pod + 1), memory="1Ti"
    )
    try:
        pods = packs.index_count
        annotations = pod_annotations(case, packs, delay, args.sdk)
        runs = [float(v[:-1]) for k, v in annotations.items() if k.startswith(RUN)]
        phases = PodPhases(cluster, env.namespace)
        manifest = build_indexed_job(
            IndexedJobSpec(
                name="packing",
                namespace=env.namespace,
                queue_name=env.local_queue,
                image="example.invalid/shard:1",
                completions=pods,
                parallelism=min(case.parallelism, pods),
                resources={"requests": {"cpu": f"{int(cpu_per_pod * 1000)}m", "memory": "64Mi"}},
                backoff_limit_per_index=1,
                spot=True,
                annotations=annotations,
            )
        )
        created = time.monotonic()
        env.create_job(manifest)
        wait_for(
            f"{case.name} x{packs.shape} Complete",
            lambda: is_true(env.job("packing"), "Complete"),
            timeout=args.timeout,
            interval=0.2,
        )
        complete = time.monotonic()
        return complete - created, phases.summary(created, complete, max(runs, default=0.0))
    finally:
        delete_kueue_env(env)


def run(args: argparse.Namespace) -> dict[str, Any]:
    cluster = Cluster(config.new_client_from_config(config_file=os.environ["KUBECONFIG"]))
    outcomes: list[Outcome] = []
    for case in cases(args):
        every = IndexSet.range(0, len(case.seconds))
        packed = packs_of(case, args.even_skewed)
        for delay in [
            d for d in (0.0, args.aks_start_delay) if args.delays in ("both", "none" if d == 0 else "aks")
        ]:
            forms = [("unpacked", ShardPacks(every)), ("packed", packed)]
            if args.history:
                forms.append(("history", history_packs(case)))
            for form, packs in [f for f in forms if f[0] in args.forms.split(",")]:
                seconds, phases = run_once(cluster, case, packs, args, delay)
                outcomes.append(
                    Outcome(
                        case.name,
                        delay,
                        form,
                        packs.shape,
                        packs.index_count,
                        round(seconds, 1),
                        round(seconds / case.ideal, 3),
                        phases,
                    )
                )
                print(outcomes[-1], flush=True)
    return {
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores",
        "sdk": args.sdk,
        "sdk_cost_seconds": {"per_shard": SDK_COST[args.sdk][0], "per_pod": SDK_COST[args.sdk][1]},
        "aks_start_delay_seconds": args.aks_start_delay,
        "night_to_night_noise": args.noise if args.history else None,
        "ideal_seconds": {c.name: round(c.ideal, 1) for c in cases(args)},
        "outcomes": [asdict(o) for o in outcomes],
    }


def table(result: dict[str, Any]) -> str:
    columns = "case, start delay, form, shards per pod, pods, Job (s), ideal (s), x ideal, form / unpacked"
    rows = ["| " + " | ".join(columns.split(", ")) + " |", "|---" * 9 + "|"]
    unpacked: dict[tuple[str, float], float] = {}
    for o in result["outcomes"]:
        key = (o["case"], o["start_delay"])
        if o["form"] == "unpacked":
            unpacked[key] = o["job_seconds"]
        versus = (
            f"{o['job_seconds'] / unpacked[key]:.3f}" if o["form"] != "unpacked" and key in unpacked else ""
        )
        shape = o["shards_per_pod"]  # an ordered shape's ids stay in the JSON
        shape = f"{shape.partition('/')[0]} (ordered)" if "/" in shape else shape
        rows.append(
            f"| {o['case']} | {o['start_delay']:g} s | {o['form']} | {shape} | {o['pods']} | "
            f"{o['job_seconds']} | {result['ideal_seconds'][o['case']]} | {o['ratio_to_ideal']} | {versus} |"
        )
    cost = result["sdk_cost_seconds"]
    head = (
        f"{result['when']}, {result['machine']}; SDK {result['sdk']} (cost {cost['per_shard']} s a shard, "
        f"{cost['per_pod']} s a pod); AKS start delay {result['aks_start_delay_seconds']} s"
        + (
            f"; tonight's lengths = learned x (1 +/- {result['night_to_night_noise']})"
            if result.get("night_to_night_noise")
            else ""
        )
        + ".\n\n"
    )
    return head + "\n".join(rows) + "\n" + phase_table(result)


def phase_table(result: dict[str, Any]) -> str:
    """Where each run's seconds went, after the create (runs made before the phases were recorded: none)."""
    timed = [o for o in result["outcomes"] if o.get("phases")]
    if not timed:
        return ""
    rows = [
        "| case | start delay | form | last pod created | last pod running | longest index run (annotated) "
        "| last pod succeeded | Complete seen |",
        "|---" * 8 + "|",
    ]
    for o in timed:
        p = o["phases"]
        rows.append(
            f"| {o['case']} | {o['start_delay']:g} s | {o['form']} | {p['last_pod_created']} | "
            f"{p['last_pod_running']} | {p['longest_index_run']} | {p['last_pod_succeeded']} | "
            f"{p['complete_seen']} |"
        )
    return "\nSeconds after the Job's create, seen by a watch of the pods:\n\n" + "\n".join(rows) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default="scenario_a,many_small,skewed_tail")
    parser.add_argument("--small-shards", type=int, default=10_000)
    parser.add_argument(
        "--sdk",
        choices=("read-ahead", "in-line"),
        default="read-ahead",
        help="the SDK's done markers: read ahead and written behind (now) or in line (before)",
    )
    parser.add_argument("--aks-start-delay", type=float, default=5.0)
    parser.add_argument(
        "--delays",
        choices=("both", "none", "aks"),
        default="both",
        help="run without a start delay, with it, or both",
    )
    parser.add_argument(
        "--even-skewed", action="store_true", help="pack the skewed case evenly for its mean (the old shape)"
    )
    parser.add_argument(
        "--history",
        action="store_true",
        help="add the form packed from one night of shard history; every form runs tonight's lengths",
    )
    parser.add_argument(
        "--noise", type=float, default=0.05, help="tonight's lengths: learned x (1 +/- this), uniform"
    )
    parser.add_argument(
        "--forms", default="unpacked,packed,history", help="which forms to run (comma-separated)"
    )
    parser.add_argument("--timeout", type=float, default=3600)
    parser.add_argument("--name", default="shard_packing")
    args = parser.parse_args()
    load_devcluster_env()
    result = run(args)
    write_results(args.name, result, table(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
