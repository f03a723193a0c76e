#!/usr/bin/env python
"""One whole night on the bed's real Airflow deployment, this provider and the cncf provider's Kueue path in
the same run: ``make night`` (after ``make cluster-up``).

The workload, time compression and public anchors: ``tests/integration/night/workload.py`` and
docs/benchmarks.md ("One night"). Each system runs the same night in turn on a fresh Airflow deployment
(PostgreSQL, API server, scheduler, DAG processor, two triggerers) and fresh queues over the same two node
pools: 48 samples x (align 24, call 50, gather 19 shards) for the genomics team, 1,000 risk shards for a
second team sharing the cohort, Spot nodes evicted at 10 % of the pool per hour, one triggerer killed
mid-night, the Kueue pages read through the peak.

    .venv/bin/python benchmarks/night.py                         # the full night, both systems (~30 min)
    .venv/bin/python benchmarks/night.py --samples 8 --compression 300 --genomics-cpu 24 --risk-shards 0
    .venv/bin/python benchmarks/night.py --render results/night.json.gz   # the table and picture again
    .venv/bin/python benchmarks/night.py --systems ours --warm-up-nights 1 ...   # forecasts from history

Writes ``results/<name>.json.gz`` (every record), ``.md`` (the tables) and ``.svg`` (the picture), and prints
the table and the picture's path.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import platform
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bed_env import RESULTS, load_devcluster_env  # noqa: E402
from night_forecast import section as forecast_section  # noqa: E402

from tests.integration.night.report import summarize  # noqa: E402
from tests.integration.night.tables import render_markdown  # noqa: E402
from tests.integration.night.timeline_svg import render as render_svg  # noqa: E402
from tests.integration.night.workload import NightShape, draw  # noqa: E402


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    d = NightShape()
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--systems", default="ours,cncf", help="comma-separated: ours, cncf")
    p.add_argument("--samples", type=int, default=d.samples)
    p.add_argument("--risk-shards", type=int, default=d.risk_shards, help="0: no risk run")
    p.add_argument("--compression", type=float, default=d.compression, help="30: a 600 s shard runs 20 s")
    p.add_argument("--genomics-cpu", type=int, default=d.genomics_cpu)
    p.add_argument("--risk-cpu", type=int, default=d.risk_cpu)
    p.add_argument("--parallelism", type=int, default=d.parallelism, help="per genomics Job; 0: its shards")
    p.add_argument(
        "--min-parallelism-share",
        type=float,
        default=d.min_parallelism_share,
        help="Kueue's partial admission for both systems at this share of a Job's pods (0: gang admission)",
    )
    p.add_argument(
        "--step-order",
        choices=("sample-first", "path-first"),
        default=d.step_order,
        help="Kueue priorities of the steps: a started sample's later steps first, or every first step first",
    )
    p.add_argument(
        "--evictions-per-hour",
        type=float,
        default=d.spot_evictions_per_hour,
        help="share of the Spot pool's nodes evicted per real hour (0: none)",
    )
    p.add_argument(
        "--pack-shards",
        action="store_true",
        help="ours: each step states its median length as expected_shard_duration and the operator packs "
        "(about a minute of shards a pod, in whole waves); the cncf path runs one shard a pod",
    )
    p.add_argument(
        "--whole-job-backoff",
        action="store_true",
        help="ours: Kubernetes' whole-Job backoffLimit instead of backoffLimitPerIndex=4 (an evicted index's "
        "next pod waits for the Job's next success, not 10 s doubling per eviction); the cncf path runs so",
    )
    p.add_argument(
        "--done-records",
        action="store_true",
        help="ours: the bed writes the worker SDK's done records (run_seconds) of each fake pod that "
        "succeeds, as an SDK program would: the shard history then packs a later night (--warm-up-nights)",
    )
    p.add_argument(
        "--no-hand-off",
        action="store_true",
        help="with --done-records: a stopped pod's unfinished shards wait for its index's next pod, not "
        "taken over by the running pods of its Job (the worker SDK's hand-off, on by default)",
    )
    p.add_argument("--no-triggerer-kill", action="store_true")
    p.add_argument(
        "--pod-evictions-every",
        type=float,
        default=0.0,
        help="seconds: evict one running genomics pod this often (Eviction API) instead of whole Spot nodes",
    )
    p.add_argument("--discover-pods-retry-number", type=int, default=500)
    p.add_argument(
        "--warm-up-nights",
        type=int,
        default=0,
        help="nights each system runs first, unmeasured: ours learns shard lengths from them (issue 41's "
        "forecast is measured on the night after)",
    )
    p.add_argument("--seed", type=int, default=d.seed)
    p.add_argument("--name", default="night")
    p.add_argument("--render", type=Path, help="rewrite the .md and .svg of a saved run's JSON")
    return p.parse_args(argv)


def shape_of(args: argparse.Namespace) -> NightShape:
    risk = max(args.risk_shards, 1)
    return replace(
        NightShape(),
        samples=args.samples,
        risk_shards=risk,
        compression=args.compression,
        genomics_cpu=args.genomics_cpu,
        risk_cpu=args.risk_cpu,
        parallelism=args.parallelism,
        min_parallelism_share=args.min_parallelism_share,
        step_order=args.step_order,
        pack_shards=args.pack_shards,
        whole_job_backoff=args.whole_job_backoff,
        risk_parallelism=min(args.risk_cpu, risk),
        spot_evictions_per_hour=args.evictions_per_hour,
        seed=args.seed,
    )


def write(name: str, raw: dict[str, Any]) -> None:
    shape = NightShape(**{k: v for k, v in raw["shape"].items() if k != "steps"})
    night = draw(shape)
    rows = [summarize(night, phase) for phase in raw["phases"]]
    raw["summary"] = rows
    svg = render_svg(raw["phases"], night.ideal(), night.deadline_seconds(), f"{name}: running shards")
    RESULTS.mkdir(exist_ok=True)
    with gzip.open(RESULTS / f"{name}.json.gz", "wt") as out:  # every record: a few MB as text
        out.write(json.dumps(raw, separators=(",", ":")) + "\n")
    (RESULTS / f"{name}.svg").write_text(svg)
    table = render_markdown(night, rows, raw["meta"])
    if warm_ups := raw.get("warm_up_phases"):
        count = len(warm_ups)
        table += (
            f"\nMeasured on the night after {count} warm-up night{'s' if count != 1 else ''} of the same "
            "workload (unmeasured, raw data kept under `warm_up_phases`): the shard history they taught is "
            "what the measured night packed and forecast from.\n"
        )
    table += forecast_section(raw["phases"])
    (RESULTS / f"{name}.md").write_text(table)
    print(table)
    print(f"picture: {RESULTS / (name + '.svg')}")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.render:
        opener = gzip.open if args.render.suffix == ".gz" else open
        with opener(args.render, "rt") as saved:
            raw = json.loads(saved.read())
        write(args.render.name.split(".")[0], raw)
        return 0
    # SIGTERM ends the run through its finally blocks: the deployment, the night's nodes and queues go
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    state = load_devcluster_env()
    if subprocess.run(
        [sys.executable, "-m", "devcluster", "status"], cwd=REPO, capture_output=True
    ).returncode:
        sys.exit("the local cluster is not running: make cluster-up first")
    from kubernetes import config

    from tests.integration.cluster import Cluster, short_id
    from tests.integration.deployment import _cluster_env, started_postgres
    from tests.integration.night.bed import NightBed
    from tests.integration.night.runner import PhaseOptions, run_phase

    night = draw(shape_of(args))
    if args.risk_shards == 0:
        print("--risk-shards 0: the risk run is one shard")
    cluster = Cluster(config.new_client_from_config(config_file=os.environ["KUBECONFIG"]))
    cluster_env = _cluster_env()
    bed = NightBed(cluster, short_id())
    home = Path(tempfile.mkdtemp(prefix="airflow-kueue-night-"))
    postgres = started_postgres(cluster_env)
    began = time.time()
    phases: list[dict[str, Any]] = []
    warm_ups: list[dict[str, Any]] = []
    try:
        bed.create_nodes(night)
        for system in args.systems.split(","):
            for number in range(1, args.warm_up_nights + 2):  # the warm-ups, then the measured night
                options = PhaseOptions(
                    system=system,
                    evictions=args.evictions_per_hour > 0,
                    kill_triggerer=not args.no_triggerer_kill,
                    discover_pods_retry_number=args.discover_pods_retry_number,
                    pod_evictions_every=args.pod_evictions_every,
                    night=number,
                    done_records=args.done_records,
                    hand_off=not args.no_hand_off,
                )
                record = run_phase(
                    night,
                    options,
                    cluster=cluster,
                    bed=bed,
                    postgres=postgres,
                    cluster_env=cluster_env,
                    home=home,
                    metrics=("https://127.0.0.1:26443/metrics", state / "pki"),
                )
                (phases if number > args.warm_up_nights else warm_ups).append(record.to_json())
    finally:
        bed.teardown()
        postgres.stop()
    meta = {
        "when": datetime.fromtimestamp(began, UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "wall_minutes": round((time.time() - began) / 60, 1),
        "machine": f"{os.cpu_count()} cores, {platform.python_version()}",
        "commit": subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True
        ).stdout.strip(),
        "args": {k: str(v) for k, v in vars(args).items()},
        "home": str(home),
    }
    raw = {"meta": meta, "shape": asdict(night.shape), "phases": phases}
    if warm_ups:  # kept whole in the raw data; the tables are the measured nights'
        raw["warm_up_phases"] = warm_ups
    write(args.name, raw)
    return 0


if __name__ == "__main__":
    sys.exit(main())
