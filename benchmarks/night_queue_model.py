#!/usr/bin/env python
"""A model of the night's genomics queue (no cluster): which parallelism and step order fill the quota.

docs/benchmarks.md ("Smaller Jobs, the longest path first") quotes it. It replays the drawn night
(``tests/integration/night/workload.py``, the same seed and lengths) through Kueue's admission as the bed's
ClusterQueues have it: a Job is admitted only when the quota of all its pods is free in one flavor (Spot
first, then the on-demand flavor it borrows), pending Jobs in priority order then creation order
(BestEffortFIFO: a Job that does not fit lets a smaller one behind it go first). A Job's indexes run in order
on its pods; a pod's slot holds its quota until no index is left for it (Kueue's reclaimable pods), and the
next index starts ``--pod-gap`` seconds after a pod ends (the Job controller's replacement). A sample's next
step is created ``--step-gap`` seconds after its Job completes (Airflow's resume, scheduling, start). The risk
run takes the on-demand flavor from a quarter of the ideal for its shards' length (not modelled: its own pod
gaps, preemption of Jobs borrowing it, Spot evictions, the night's start-up on 2 cores).

    .venv/bin/python benchmarks/night_queue_model.py                 # parallelism x step order, both gaps
    .venv/bin/python benchmarks/night_queue_model.py --parallelism 8 --pod-gap 1.4
"""

from __future__ import annotations

import argparse
import heapq
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from tests.integration.night.dags import STEP_ORDERS  # noqa: E402
from tests.integration.night.workload import Night, NightShape, draw  # noqa: E402

SPOT, ON_DEMAND = "spot", "on-demand"


@dataclass
class ModelJob:
    sample: int
    step: int
    lengths: list[float]  # what is left to start, in index order
    pods: int
    created: float
    flavor: str = ""
    running: int = 0


@dataclass
class Queue:
    """The flavors' free quota and the pending Jobs (the risk run holds on-demand while it runs)."""

    free: dict[str, int]
    pending: list[ModelJob] = field(default_factory=list)
    risk_running: bool = False


def run(
    night: Night, parallelism: int, order: str, pod_gap: float, step_gap: float, start_gap: float = 0.3
) -> float:
    """The model's makespan (seconds) of ``night`` with Jobs of ``parallelism`` pods (0: every shard)."""
    shape = night.shape
    steps = [s.name for s in shape.steps]
    priority = STEP_ORDERS[order]
    queue = Queue({SPOT: shape.genomics_cpu, ON_DEMAND: shape.risk_cpu})
    events: list[tuple[float, int, str, object]] = []
    counter = 0

    def push(at: float, kind: str, what: object) -> None:
        nonlocal counter
        counter += 1
        heapq.heappush(events, (at, counter, kind, what))

    for sample in range(shape.samples):  # the mapped first steps start a little apart
        push(2.0 + sample * start_gap, "create", (sample, 0))
    push(night.ideal() * shape.risk_delay_fraction, "risk", None)
    end = 0.0

    def admit(now: float) -> None:
        queue.pending.sort(key=lambda j: (-priority[steps[j.step]], j.created))
        waiting = []
        for job in queue.pending:
            pods = min(job.pods, len(job.lengths))
            usable = [SPOT] + ([] if queue.risk_running else [ON_DEMAND])
            flavor = next((f for f in usable if queue.free[f] >= pods), None)
            if flavor is None:
                waiting.append(job)
                continue
            queue.free[flavor] -= pods
            job.flavor = flavor
            for _ in range(pods):
                start_next(job, now + 0.5)
        queue.pending = waiting

    def start_next(job: ModelJob, at: float) -> None:
        if not job.lengths:  # nothing left for this slot: its quota goes back
            queue.free[job.flavor] += 1
            return
        job.running += 1
        push(at + job.lengths.pop(0), "pod end", job)

    while events:
        now, _, kind, what = heapq.heappop(events)
        if kind == "create":
            sample, step = what  # type: ignore[misc]
            pods = parallelism or shape.steps[step].shards  # 0: every shard at once, whatever the shape says
            lengths = list(night.genomics[steps[step]][sample])
            queue.pending.append(ModelJob(sample, step, lengths, min(pods, len(lengths)), now))
        elif kind == "pod end":
            assert isinstance(what, ModelJob)
            what.running -= 1
            start_next(what, now + pod_gap)
            if not what.lengths and not what.running:
                if what.step + 1 < len(steps):
                    push(now + step_gap, "create", (what.sample, what.step + 1))
                end = max(end, now)
        elif kind == "risk":
            queue.risk_running = True
            waves = -(-len(night.risk) // shape.risk_parallelism)
            push(now + waves * night.risk[0], "risk end", None)
        elif kind == "risk end":
            queue.risk_running = False
            end = max(end, now)
        admit(now)
    return end


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--parallelism", type=int, action="append", help="pods a Job (0: its shards); repeat")
    p.add_argument("--pod-gap", type=float, action="append", help="s from a pod's end to the next; repeat")
    p.add_argument("--step-gap", type=float, default=7.0, help="s from a Job's end to the next step's Job")
    p.add_argument("--compression", type=float, default=NightShape().compression)
    args = p.parse_args(argv)
    night = draw(replace(NightShape(), compression=args.compression))
    ideal = night.ideal()
    print(f"ideal {ideal:.0f} s; makespan / ideal by parallelism, step order and pod gap")
    for parallelism in args.parallelism or [0, 32, 24, 16, 12, 8]:
        cells = []
        for order in STEP_ORDERS:
            for gap in args.pod_gap or [0.7, 1.4]:
                makespan = run(night, parallelism, order, gap, args.step_gap)
                cells.append(f"{order} gap {gap}: {makespan / ideal:.2f}x")
        print(f"parallelism {parallelism or '= shards'}: " + ", ".join(cells))
    return 0


if __name__ == "__main__":
    sys.exit(main())
