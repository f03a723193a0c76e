"""The night's workload, drawn from a seed (pure: no cluster, no Airflow).

A genomics team runs ``samples`` samples through three dependent steps (GATK germline best practices as
Broad's WARP runs them: 24 read groups aligned, variant calling scattered over 50 intervals, a gather of 19
shards), and a risk team runs one Monte Carlo task of ``risk_shards`` shards in a ClusterQueue of the same
cohort. Shard lengths are real seconds (nf-core/sarek sizes interval chunks to about 600 s) drawn from a
log-normal around each step's median, then divided by ``compression``: at 30x a 600 s shard runs 20 s.

The ideal a night is held against is the larger of two bounds: every shard-second packed into the cohort's
quota (the quota bound), and one sample's three steps back to back with every shard of a step at once
(the critical path).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field

from airflow_kueue_provider.kueue.checkpoints.packing_choice import (
    choose_per_pod,
)
from airflow_kueue_provider.kueue.checkpoints.shard_packing import ShardPacks

# Per step: shards per sample, median real seconds per shard (docs/benchmarks.md names the sources).
GENOMICS_STEPS: tuple[tuple[str, int, float], ...] = (
    ("align", 24, 600.0),
    ("call", 50, 600.0),
    ("gather", 19, 300.0),
)
RISK_MEDIAN_SECONDS = 240.0  # a Monte Carlo shard of "several minutes"
SIGMA = 0.25  # log-normal spread of shard lengths (about +-25 % at one sigma)
LOWEST, HIGHEST = 0.5, 2.0  # clipped to half and twice the median


@dataclass(frozen=True)
class Step:
    name: str
    shards: int
    median_seconds: float


@dataclass(frozen=True)
class NightShape:
    """What a night is: sizes, quotas, compression and fault rates (everything a run's report states)."""

    samples: int = 48
    risk_shards: int = 1000
    compression: float = 30.0
    genomics_cpu: int = 96  # the genomics ClusterQueue's nominal Spot quota (CPU; 1 CPU a shard)
    risk_cpu: int = 32  # the risk ClusterQueue's nominal on-demand quota, lent to genomics while idle
    risk_parallelism: int = 32
    # pods at once per genomics Job (0: every shard at once, parallelism = shards); 8 packs into both flavors'
    # quotas with room to spare (docs/benchmarks.md: 8 beat 16 and 32 on the bed and in night_queue_model)
    parallelism: int = 8
    # Kueue's partial admission (kueue.x-k8s.io/job-min-parallelism) at this share of a Job's parallelism:
    # a Job wider than the free quota of any one flavor starts with what is free (0: all or nothing)
    min_parallelism_share: float = 0.0
    # Kueue priorities of the steps (dags.STEP_ORDERS): "sample-first" (a started sample's later steps go
    # first) or "path-first" (every sample's first step goes first: the longest remaining path)
    step_order: str = "path-first"
    # ours only: each step states its median length (``expected_shard_duration``) and the operator packs
    # (``PackingChoice``: about a minute of shards a pod, in whole waves; the risk task an explicit
    # ``shards_per_pod`` from ``choose_per_pod``); the cncf path runs one shard a pod either way
    pack_shards: bool = False
    # ours only: Kubernetes' whole-Job backoffLimit instead of backoffLimitPerIndex=4. An index's replacement
    # pod then waits for the Job's next success, not 10 s doubling per failure of that index (the Job
    # controller counts a disruption its policy ignores in both); the cncf path always runs this way
    whole_job_backoff: bool = False
    risk_delay_fraction: float = 0.25  # the risk run starts this far into the genomics ideal
    spot_evictions_per_hour: float = 0.10  # share of the Spot pool's nodes evicted per (real) hour
    node_replacement_seconds: float = 180.0  # a new Spot VM joins this long after an eviction (real)
    deadline_factor: float = 1.5  # the gather steps' deadline: this times the ideal, from the run's start
    seed: int = 20261204
    steps: tuple[Step, ...] = field(
        default_factory=lambda: tuple(Step(n, s, m) for n, s, m in GENOMICS_STEPS)
    )

    def __post_init__(self) -> None:
        for name in ("samples", "risk_shards", "genomics_cpu", "risk_cpu", "risk_parallelism"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name}={getattr(self, name)}: give a whole number of at least 1")
        if self.step_order not in ("sample-first", "path-first"):
            raise ValueError(f"step_order={self.step_order!r}: give sample-first or path-first")
        if self.compression <= 0:
            raise ValueError(f"compression={self.compression}: give a factor above 0 (30 runs 600 s in 20 s)")
        if not 0.0 <= self.min_parallelism_share < 1.0:
            raise ValueError(
                f"min_parallelism_share={self.min_parallelism_share}: give a share from 0 to below 1"
            )
        if self.parallelism < 0:
            raise ValueError(
                f"parallelism={self.parallelism}: give 0 (every shard at once) or a whole number"
            )
        largest = max(self.parallelism_of(s) for s in self.steps)
        if largest > self.genomics_cpu:
            raise ValueError(
                f"genomics_cpu={self.genomics_cpu} cannot admit a {largest}-shard step at once: "
                f"give at least {largest}"
            )

    def parallelism_of(self, step: Step) -> int:
        return min(step.shards, self.parallelism) if self.parallelism else step.shards

    def stated_seconds_of(self, step: Step) -> float | None:
        """The ``expected_shard_duration`` ours' DAG states for ``step`` (its median, compressed): the
        operator packs from it (None without ``pack_shards``: one shard a pod)."""
        return step.median_seconds / self.compression if self.pack_shards else None

    def risk_shards_per_pod(self) -> int:
        if not self.pack_shards:
            return 1
        return choose_per_pod(self.risk_shards, self.risk_parallelism, RISK_MEDIAN_SECONDS / self.compression)

    def min_parallelism_of(self, step: Step) -> int | None:
        """The fewest pods Kueue may start a step's Job with (None: all of them, gang admission)."""
        if not self.min_parallelism_share:
            return None
        high = self.parallelism_of(step)
        low = max(1, math.ceil(high * self.min_parallelism_share))
        return low if low < high else None


def packed(lengths: list[float], packs: ShardPacks) -> list[float]:
    """What each index of a Job runs: its pack's shards after each other, packed as the operator packs them
    (``packs``: of shards 0 to ``len(lengths) - 1``)."""
    return [
        round(sum(lengths[shard] for shard in packs.shards_of_index(i)), 2) for i in range(packs.index_count)
    ]


def list_schedule(lengths: list[float], slots: int) -> float:
    """When the last of ``lengths`` ends, started in index order on ``slots`` pods (the Job controller
    starts the lowest pending index first)."""
    free = [0.0] * slots
    for length in lengths:
        free.sort()
        free[0] += length
    return max(free)


@dataclass(frozen=True)
class Night:
    """One drawn night: every shard's compressed length, per step and sample, and the risk shards."""

    shape: NightShape
    genomics: dict[str, list[list[float]]]  # step -> sample -> shard -> seconds (compressed)
    risk: list[float]

    @property
    def spot_nodes(self) -> int:
        return math.ceil(self.shape.genomics_cpu / NODE_CPU)

    @property
    def on_demand_nodes(self) -> int:
        return math.ceil(self.shape.risk_cpu / NODE_CPU)

    def genomics_shard_seconds(self) -> float:
        return sum(sum(shards) for per_sample in self.genomics.values() for shards in per_sample)

    def risk_shard_seconds(self) -> float:
        return sum(self.risk)

    def shards(self) -> int:
        return sum(len(s) for per_sample in self.genomics.values() for s in per_sample) + len(self.risk)

    def quota_bound(self) -> float:
        """Every shard-second of both teams in the cohort's quota, packed without a gap."""
        capacity = self.shape.genomics_cpu + self.shape.risk_cpu
        return (self.genomics_shard_seconds() + self.risk_shard_seconds()) / capacity

    def critical_path(self) -> float:
        """The longest sample's three steps back to back, each step its shards in index order on its
        parallelism (with parallelism = shards: its longest shard)."""
        shape = self.shape
        return max(
            sum(list_schedule(self.genomics[s.name][i], shape.parallelism_of(s)) for s in shape.steps)
            for i in range(shape.samples)
        )

    def ideal(self) -> float:
        return max(self.quota_bound(), self.critical_path())

    def deadline_seconds(self) -> int:
        return math.ceil(self.ideal() * self.shape.deadline_factor)

    def eviction_interval(self) -> float:
        """Compressed seconds between Spot evictions at the shape's rate (inf with the rate 0)."""
        per_real_hour = self.shape.spot_evictions_per_hour * self.spot_nodes
        if per_real_hour <= 0:
            return math.inf
        return 3600.0 / per_real_hour / self.shape.compression

    def replacement_seconds(self) -> float:
        return self.shape.node_replacement_seconds / self.shape.compression


NODE_CPU = 16  # Standard_D16ds_v5, as the bed's Spot pool


def draw(shape: NightShape) -> Night:
    """The night of ``shape.seed``: the same seed gives the same lengths, to the hundredth of a second."""
    rng = random.Random(shape.seed)

    def length(median: float) -> float:
        factor = min(HIGHEST, max(LOWEST, math.exp(rng.gauss(0.0, SIGMA))))
        return round(median * factor / shape.compression, 2)

    genomics = {
        step.name: [[length(step.median_seconds) for _ in range(step.shards)] for _ in range(shape.samples)]
        for step in shape.steps
    }
    # Monte Carlo shards of equal paths and steps run near-equal lengths: one length for all of them (and
    # one pod annotation, not 1,000)
    risk = [round(RISK_MEDIAN_SECONDS / shape.compression, 2)] * shape.risk_shards
    return Night(shape, genomics, risk)
