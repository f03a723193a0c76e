"""How long a new Job waits for its quota, and in which flavor (pure): the ClusterQueue's flavors simulated
in units of the Job's pods, the workloads holding quota freeing it as they end, those ahead admitted first in
order, each into the first flavor (in the ClusterQueue's order) with room for it, as Kueue tries them.

What is known of the others is little (docs/forecast.md, "The wait"): a workload admitted in the task's own
namespace is seen with its quota and how long it has held it; it is taken to run as long as this Job will
(its own length is not known), so it ends that long after its admission. Quota held by workloads not seen
(other namespaces of the ClusterQueue) is taken as Jobs like this one, half done on average. A workload
waiting ahead in the task's namespace is seen with what it asks for (and its sealed forecast run, if any);
every other workload ahead is a Job like this one. With nothing seen this is the older "like this one" rule
exactly.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence
from dataclasses import dataclass

MAX_HOLDERS = 10_000
"""Holders simulated at most (a bound on the work per forecast; more are left out)."""
MAX_RELEASES = 16
"""Points of a Job's release pattern at most (``release_pattern``): the work per holder is bounded."""


@dataclass(frozen=True)
class Holder:
    """Quota held now: as many of the Job's pods as it would hold (``pods``), free in ``ends_in`` seconds."""

    pods: float
    ends_in: float


@dataclass(frozen=True)
class Pool:
    """One flavor as the simulation sees it, in the Job's pods: free now, what the Job needs there (its
    parallelism, at most the flavor's quota), how long it runs there, and the quota held."""

    free: float
    need: int
    run: float
    holders: Sequence[Holder] = ()
    releases: Sequence[float] = ()
    """When each of the Job's ``need`` pods frees its quota, in seconds after the admission (Kueue reclaims
    a finished index's quota while the Job runs on); empty: all of them at ``run``."""


@dataclass(frozen=True)
class Ahead:
    """A workload ahead of the Job: as many of the Job's pods as it asks for and how long it holds them once
    admitted (None: like the Job, its need and its run in each pool)."""

    pods: float | None = None
    run: float | None = None


LIKE_THE_JOB = Ahead()


def simulated_admission(pools: Sequence[Pool], ahead: int | Sequence[Ahead]) -> tuple[float, int]:
    """(seconds until the Job gets its quota, the index of the pool it gets), with the workloads ``ahead``
    (a count: Jobs like it) admitted first, in order, each into the first pool with room for it (one asking
    more than a pool ever holds counts as all of it). A queue whose pools never free enough waits as long as
    the last holder, then takes the first pool."""
    ends: list[tuple[float, int, float]] = []
    for index, pool in enumerate(pools):
        ends += [(max(0.0, h.ends_in), index, h.pods) for h in pool.holders[:MAX_HOLDERS] if h.pods > 0]
    ceiling = [pool.free for pool in pools]  # all a pool ever has free: now, and each holder's pods
    for _, index, pods in ends:
        ceiling[index] += pods
    heapq.heapify(ends)
    queue = [LIKE_THE_JOB] * ahead if isinstance(ahead, int) else list(ahead)
    free, now, at = [pool.free for pool in pools], 0.0, 0
    while True:
        head = queue[at] if at < len(queue) else None
        size = [_size(head, pool, ceiling[i]) for i, pool in enumerate(pools)]
        fit = next((i for i in range(len(pools)) if free[i] + 1e-9 >= size[i]), None)
        if fit is not None:
            if head is None:
                return now, fit
            at += 1
            free[fit] -= size[fit]
            run = pools[fit].run if head.run is None else head.run
            for freed in held_releases(size[fit], 0.0, run, pools[fit]):
                heapq.heappush(ends, (now + freed.ends_in, fit, freed.pods))
            continue
        if not ends:
            return now, 0  # nothing left to free: Kueue admits it once the rest ends (or borrows)
        now, index, pods = heapq.heappop(ends)
        free[index] += pods


def held_releases(pods: float, held_for: float, run: float, pool: Pool) -> list[Holder]:
    """Quota ``pods`` that a workload running ``run`` seconds has held for ``held_for``, as it frees it: in
    the Job's own pattern (``pool.releases``) stretched to that run, the part still to come. Past the end it
    frees now; with no pattern, all of it at the end."""
    if not pool.releases or pool.run <= 0 or run <= held_for:
        return [Holder(pods, run - held_for)]
    stretch = run / pool.run
    left = [after * stretch - held_for for after in pool.releases if after * stretch > held_for + 1e-9]
    if not left:
        return [Holder(pods, run - held_for)]
    return [Holder(pods / len(left), after) for after in left]


def release_pattern(slot_ends: Sequence[float], need: int, run: float) -> tuple[float, ...]:
    """``Pool.releases`` from the Job's list schedule: each of its ``need`` pods frees its quota when its
    slot's last pack ends (a slot with no pack at ``run``), as at most ``MAX_RELEASES`` equal shares."""
    ends = sorted(slot_ends)[:need] + [run] * max(0, need - len(slot_ends))
    if len(ends) <= MAX_RELEASES:
        return tuple(ends)
    return tuple(ends[int((i + 0.5) * len(ends) / MAX_RELEASES)] for i in range(MAX_RELEASES))


def _size(head: Ahead | None, pool: Pool, ceiling: float) -> float:
    """The pods ``head`` takes in ``pool`` (None: the Job itself, its need)."""
    if head is None or head.pods is None:
        return float(pool.need)
    return min(head.pods, max(ceiling, float(pool.need)))


def unseen_holders(pods: float, need: int, run: float) -> list[Holder]:
    """Quota held by workloads not seen, as Jobs of ``need`` pods half done (``run / 2`` left each)."""
    if pods <= 0 or need <= 0:
        return []
    whole = math.floor(pods / need + 1e-9)
    rest = pods - whole * need
    held = [Holder(float(need), run / 2)] * min(whole, MAX_HOLDERS)
    return held + ([Holder(rest, run / 2)] if rest > 1e-9 else [])
