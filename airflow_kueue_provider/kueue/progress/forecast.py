"""When a Job will start and finish, forecast before it is submitted (pure).

The model, in three steps (docs/forecast.md):

- **The Job's own run**: each pack's work is the sum of its shards' learned lengths (``LearnedLengths``;
  a shard never seen, or no history: the stated ``expected_shard_duration``; neither: no forecast). The
  packs are list-scheduled in index order, lowest first (as the Job controller starts them), onto
  ``min(parallelism, quota / pod request)`` slots, each pod paying ``POD_START_SECONDS`` first: a heap
  simulation, exact for those inputs.
- **The room**: Kueue gives a Job's pods one flavor, the first of the ClusterQueue's flavors (in order)
  with room for it (its nominal quota plus what the cohort can lend, less what is admitted): now, or the
  first to free enough in the wait's simulation. A flavor that could never hold the whole Job (or its
  partial admission's ``min_parallelism``) is passed over, as Kueue passes it over.
- **The wait**: none when nothing is pending ahead and the Job fits now (``ADMISSION_SECONDS``). Otherwise
  the flavors are simulated in units of the Job's pods (``queue_wait``): each workload seen admitted in the
  task's namespace frees its quota a run after its admission (its own sealed forecast run, else as long as
  this Job runs); quota held by workloads not seen is Jobs like this one, half done on average; a workload
  seen waiting ahead (in the task's namespace) asks for its own pods, every other one is a Job like this.

The range: the wait from half to twice the rule's; the run ``LEARNED_SPREAD`` either side with learned
lengths, or from the stated shortest to the stated longest.

**What the queue does later** (Jobs created after the forecast at a higher priority, preemption) no read
at submit can see. When earlier nights finished later (or sooner) than this model said while the Job
waited, by a learned bias (``LearnedLengths.wait_bias_seconds``), a Job that must wait waits that much more
(or less, to no wait at all); one that fits now starts now, whatever the nights say.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from ..checkpoints.learned_lengths import LearnedLengths
from ..checkpoints.shard_packing import ShardPacks
from .eta import Estimate
from .queue_wait import (
    LIKE_THE_JOB,
    Ahead,
    Pool,
    held_releases,
    release_pattern,
    simulated_admission,
    unseen_holders,
)

POD_START_SECONDS = 5.0
"""What a pod costs before its first shard runs (scheduling, container start, the first Blob round trip)."""
ADMISSION_SECONDS = 2.0
"""From create to admitted when the Job fits the free quota and nothing waits ahead (Kueue's next cycle)."""
LEARNED_SPREAD = 0.1
"""Learned lengths vary from night to night by about this share: the run's range either side."""
WAIT_EARLY, WAIT_LATE = 0.5, 2.0
"""The wait's range, as factors of the "like this one" rule's wait."""
RESOURCES = ("cpu", "memory", "gpu", "pods")


@dataclass(frozen=True)
class Resources:
    """Amounts in plain units: CPU cores, memory bytes, GPUs, pods."""

    cpu: float = 0.0
    memory: float = 0.0
    gpu: float = 0.0
    pods: float = 0.0

    def amount(self, name: str) -> float:
        return float(getattr(self, name))

    def plus(self, other: Resources) -> Resources:
        return Resources(*(self.amount(r) + other.amount(r) for r in RESOURCES))

    def minus(self, other: Resources) -> Resources:
        return Resources(*(max(0.0, self.amount(r) - other.amount(r)) for r in RESOURCES))


UNCOUNTED_SLOTS = 1_000_000
"""The pods a flavor holds of a pod that asks for nothing it counts (no request, or none of its covered
resources): Kueue admits such pods without limit, so only the Job's parallelism bounds them."""


@dataclass(frozen=True)
class FlavorRoom:
    """One ResourceFlavor of the ClusterQueue: its nominal quota, what the cohort can lend now (the
    borrowing limit, capped by what the cohort has free), what is admitted. A resource the flavor does not
    cover has no quota (``covered`` lists those it does)."""

    name: str
    nominal: Resources
    borrowable: Resources
    used: Resources
    covered: frozenset[str] = frozenset(RESOURCES)

    @property
    def capacity(self) -> Resources:
        return self.nominal.plus(self.borrowable)

    def slots(self, request: Resources, free: bool) -> int:
        """Pods of ``request`` the flavor holds (``free``: on top of what is admitted now)."""
        room = self.capacity.minus(self.used) if free else self.capacity
        counts = [
            math.floor(room.amount(r) / request.amount(r) + 1e-9)
            for r in RESOURCES
            if request.amount(r) > 0 and r in self.covered
        ]
        return min(counts) if counts else UNCOUNTED_SLOTS


@dataclass(frozen=True)
class HeldQuota:
    """A workload of the ClusterQueue seen admitted (in the task's namespace): the quota it holds in
    ``flavor`` and for how many seconds it has held it."""

    flavor: str
    usage: Resources
    held_for: float
    runs_for: float | None = None
    """How long its own forecast said it runs once admitted (sealed, ``FORECAST_RUN_ANNOTATION``); None:
    not known, it is taken to run as long as this Job."""


@dataclass(frozen=True)
class OwnAdmission:
    """The Job's own Workload, already admitted when the forecast is made again once it is queued: the
    flavor it was given and how many seconds ago."""

    flavor: str
    held_for: float


@dataclass(frozen=True)
class WaitingQuota:
    """A workload seen waiting ahead of the Job (in the task's namespace): the quota it asks for, all its
    pods (None: not known, a Job like this one), and how long its sealed forecast says it runs once admitted
    (None: not known)."""

    usage: Resources | None
    runs_for: float | None = None


@dataclass(frozen=True)
class QueueRoom:
    """The ClusterQueue as the forecast reads it: its flavors in order, the workloads pending ahead, and
    those seen holding quota; ``admitted``: the Job's own Workload already has its quota (no wait).
    ``waiting``: the first of the ``ahead``, seen, in Kueue's order; the others are Jobs like this one."""

    flavors: tuple[FlavorRoom, ...]
    ahead: int = 0
    held: tuple[HeldQuota, ...] = ()
    admitted: OwnAdmission | None = None
    waiting: tuple[WaitingQuota, ...] = ()


@dataclass(frozen=True)
class JobWork:
    """The Job's packs as work: seconds per pack in index order, early and late; where they come from."""

    seconds: tuple[float, ...]
    early: tuple[float, ...]
    late: tuple[float, ...]
    parallelism: int
    request: Resources
    source: str
    nights: int = 0
    start_cost: float = POD_START_SECONDS
    least_pods: int | None = None
    """Kueue's partial admission (``min_parallelism``): the fewest pods it admits the Job with. None: it
    admits the Job whole or not at all."""
    wait_bias: float = 0.0
    """Seconds earlier nights waited beyond this model's wait (module docstring, "What the queue does
    later"): added to a wait the model says there is."""

    @property
    def least(self) -> int:
        """The pods a flavor must hold for Kueue to give it the Job: all of them (its parallelism, at most
        one per pack), or the partial admission's least."""
        whole = max(1, min(self.parallelism, len(self.seconds)))
        return min(whole, self.least_pods) if self.least_pods else whole


@dataclass(frozen=True)
class Forecast:
    """The start and the finish; ``finish.at + finish.margin`` is the late end (what the deadline verdict
    reads), ``finish_early`` the early one."""

    start: Estimate
    finish: Estimate
    finish_early: datetime
    basis: str
    nights: int = 0
    model_wait: float | None = None
    """The model's wait in seconds, before the learned bias; None: made once the Job was admitted."""
    wait_bias: float = 0.0
    """What the learned bias added to the wait (its share that applied)."""

    @property
    def finish_late(self) -> datetime:
        return self.finish.at + self.finish.margin

    def line(self) -> str:
        """``forecast: start ~01:02 UTC, finish 01:44 UTC (01:40-01:50), from ...`` for the task log."""
        fmt = "%H:%M:%S" if self.finish.margin < timedelta(minutes=2) else "%H:%M"
        start, finish = self.start.at.astimezone(UTC), self.finish.at.astimezone(UTC)
        early, late = self.finish_early.astimezone(UTC), self.finish_late.astimezone(UTC)
        return (
            f"forecast: start ~{start:{fmt}} UTC, finish {finish:{fmt}} UTC ({early:{fmt}}-{late:{fmt}}), "
            f"{self.basis}"
        )


def job_work(
    packs: ShardPacks,
    parallelism: int,
    request: Resources,
    learned: LearnedLengths | None,
    stated: tuple[float, float] | None,
) -> JobWork | None:
    """The packs' work from learned lengths (a shard not learned: the stated mean), else from the stated
    ``(shortest, longest)`` seconds; None when neither says how long a shard runs."""
    usable = learned if learned is not None and learned.seconds else None
    if usable is None and stated is None:
        return None
    sizes = [size for size, count in packs.runs for _ in range(count)]
    ids = list(getattr(packs, "order", ()) or packs.shards)  # packs from history take the shards in an order
    if usable is not None:
        fallback = sum(stated) / 2 if stated is not None else None
        lengths = [usable.length_of(i, fallback) for i in ids]
        seconds = _pack_sums(lengths, sizes)
        early = tuple(s * (1 - LEARNED_SPREAD) for s in seconds)
        late = tuple(s * (1 + LEARNED_SPREAD) for s in seconds)
        count = len(usable.nights)
        source = f"from {count} night{'s' if count != 1 else ''} of shard history"
        bias = usable.wait_bias_seconds or 0.0
        if (start := usable.pod_start_seconds) is None:
            return JobWork(seconds, early, late, parallelism, request, source, count, wait_bias=bias)
        source += f" (pods start in about {start:g} s)"
        return JobWork(seconds, early, late, parallelism, request, source, count, start, wait_bias=bias)
    assert stated is not None
    shortest, longest = stated
    seconds = tuple((shortest + longest) / 2 * size for size in sizes)
    early = tuple(shortest * size for size in sizes)
    late = tuple(longest * size for size in sizes)
    return JobWork(seconds, early, late, parallelism, request, "from the stated shard duration")


def _pack_sums(lengths: Sequence[float], sizes: Sequence[int]) -> tuple[float, ...]:
    sums, at = [], 0
    for size in sizes:
        sums.append(sum(lengths[at : at + size]))
        at += size
    return tuple(sums)


def makespan(packs: Sequence[float], slots: int, start_cost: float) -> float:
    """Seconds from the first pod's start to the last pack's end: packs in index order, each to the slot
    that frees first, each pod paying ``start_cost`` (O(packs log slots))."""
    return max(slot_ends(packs, slots, start_cost), default=0.0)


def slot_ends(packs: Sequence[float], slots: int, start_cost: float) -> list[float]:
    """When each slot's last pack ends, ascending (``makespan``'s schedule): when Kueue frees each of the
    Job's pods' quota (its finished indexes are reclaimable)."""
    if not packs:
        return []
    free = [0.0] * max(1, min(slots, len(packs)))
    for work in packs:
        heapq.heappush(free, heapq.heappop(free) + start_cost + work)
    return sorted(free)


def start_cost_of(packs: Sequence[float], slots: int, measured: float) -> float | None:
    """The per-pod cost that makes ``makespan(packs, slots, cost)`` the ``measured`` running time (the
    inverse, by bisection: the makespan grows with the cost); 0 when the packs alone take that long, None
    without packs or a positive measure."""
    if not packs or not measured > 0:
        return None
    low, high = 0.0, measured
    if makespan(packs, slots, low) >= measured:
        return 0.0
    for _ in range(40):
        middle = (low + high) / 2
        low, high = (middle, high) if makespan(packs, slots, middle) < measured else (low, middle)
    return round((low + high) / 2, 1)


def forecast(work: JobWork, room: QueueRoom, now: datetime) -> Forecast | None:
    """The forecast for ``work`` submitted at ``now`` into ``room``; None when no flavor can ever hold one
    of its pods (Kueue would not admit it: the queue check says why)."""
    holding = [f for f in room.flavors if f.slots(work.request, free=False) > 0]
    if not holding:
        return None
    if room.admitted is not None:  # a fact: the flavor Kueue gave it, whatever it holds
        return _admitted(work, holding, room.admitted, now)
    # Kueue gives a Job a flavor that holds it whole (or its partial admission's least): one that cannot
    # is passed over, whatever its order; when none can now, the cohort may lend more later.
    flavors = [f for f in holding if f.slots(work.request, free=False) >= work.least] or holding
    runs = [makespan(work.seconds, _slots(work, f), work.start_cost) for f in flavors]
    pools = [_pool(work, room, f, run) for f, run in zip(flavors, runs, strict=True)]
    modelled, index = simulated_admission(pools, _ahead_of(work, room, flavors[0]))
    flavor, run, slots = flavors[index], runs[index], pools[index].need
    run_early = makespan(work.early, slots, work.start_cost)
    run_late = makespan(work.late, slots, work.start_cost)
    queued = max(0.0, modelled + work.wait_bias) if modelled > 0 else 0.0
    wait = ADMISSION_SECONDS + queued
    early_wait = ADMISSION_SECONDS if wait <= ADMISSION_SECONDS else wait * WAIT_EARLY
    late_wait = wait if wait <= ADMISSION_SECONDS else wait * WAIT_LATE
    start = now + timedelta(seconds=wait)
    finish = start + timedelta(seconds=run)
    finish_late = now + timedelta(seconds=late_wait + run_late)
    return Forecast(
        start=Estimate(start, timedelta(seconds=late_wait - wait)),
        finish=Estimate(finish, max(finish_late - finish, timedelta(0))),
        finish_early=min(now + timedelta(seconds=early_wait + run_early), finish),
        basis=_basis(work, flavor, slots, _ahead(room.ahead, queued - modelled)),
        nights=work.nights,
        model_wait=ADMISSION_SECONDS + modelled,
        wait_bias=queued - modelled,
    )


def _ahead(ahead: int, bias: float) -> str:
    said = f"{ahead} workload{'s' if ahead != 1 else ''} ahead"
    return f"{said}, waits {bias:+.0f} s as learned" if round(bias) else said


def _admitted(work: JobWork, flavors: Sequence[FlavorRoom], own: OwnAdmission, now: datetime) -> Forecast:
    """The forecast of a Job whose Workload has its quota: it started ``own.held_for`` seconds ago, in the
    flavor it was given (unknown to the reader: the first that holds a pod), and runs there."""
    flavor = next((f for f in flavors if f.name == own.flavor), flavors[0])
    slots = _slots(work, flavor)
    start = now - timedelta(seconds=own.held_for)
    finish = start + timedelta(seconds=makespan(work.seconds, slots, work.start_cost))
    late = start + timedelta(seconds=makespan(work.late, slots, work.start_cost))
    early = start + timedelta(seconds=makespan(work.early, slots, work.start_cost))
    return Forecast(
        start=Estimate(start, timedelta(0)),
        finish=Estimate(finish, max(late - finish, timedelta(0))),
        finish_early=min(early, finish),
        basis=_basis(work, flavor, slots, "admitted"),
        nights=work.nights,
    )


def _slots(work: JobWork, flavor: FlavorRoom) -> int:
    """The Job's pods at once in ``flavor``: its parallelism, at most what the flavor's quota holds."""
    return max(1, min(work.parallelism, flavor.slots(work.request, free=False)))


def _pool(work: JobWork, room: QueueRoom, flavor: FlavorRoom, run: float) -> Pool:
    """``flavor`` for the wait's simulation (module docstring, "The wait"): free now, and the quota held by
    the workloads seen (freed a run after their admission) and not seen (half a run from now)."""
    need = _slots(work, flavor)
    seen = [(h, _pods(h.usage, work.request, flavor)) for h in room.held if h.flavor == flavor.name]
    held = sum(pods for _, pods in seen)
    unseen = max(0.0, _pods(flavor.used, work.request, flavor) - held)
    # The ClusterQueue's status trails the admissions by up to its update period; the ones seen are now.
    capacity = flavor.slots(work.request, free=False)
    free = min(float(flavor.slots(work.request, free=True)), max(0.0, capacity - held))
    releases = release_pattern(slot_ends(work.seconds, need, work.start_cost), need, run)
    pattern = Pool(free, need, run, (), releases)
    holders = [freed for h, pods in seen for freed in held_releases(pods, h.held_for, _runs(h, run), pattern)]
    return Pool(free, need, run, holders + unseen_holders(unseen, need, run), releases)


def _ahead_of(work: JobWork, room: QueueRoom, flavor: FlavorRoom) -> list[Ahead]:
    """The workloads ahead for the wait's simulation: those seen as they ask, the rest like this Job."""
    seen = [
        Ahead(None if w.usage is None else _pods(w.usage, work.request, flavor), w.runs_for)
        for w in room.waiting[: room.ahead]
    ]
    return seen + [LIKE_THE_JOB] * (room.ahead - len(seen))


def _runs(held: HeldQuota, run: float) -> float:
    return held.runs_for if held.runs_for is not None else run


def _pods(amounts: Resources, request: Resources, flavor: FlavorRoom) -> float:
    """``amounts`` of the flavor's quota as pods of ``request`` (the scarcest resource it counts)."""
    shares = [
        amounts.amount(r) / request.amount(r)
        for r in RESOURCES
        if request.amount(r) > 0 and r in flavor.covered
    ]
    return max(shares, default=0.0)


def _basis(work: JobWork, flavor: FlavorRoom, slots: int, queued: str) -> str:
    """What the forecast rests on; ``queued``: the workloads ahead, or that it is admitted."""
    quota = f"{_figure(flavor.capacity.cpu)} CPU quota" if flavor.capacity.cpu else f"flavor {flavor.name}"
    bound = "quota-bound" if slots < work.parallelism else "parallelism-bound"
    return f"{work.source}, {quota}, {slots} pods at once ({bound}), {queued}"


def _figure(value: float) -> str:
    return f"{value:g}"
