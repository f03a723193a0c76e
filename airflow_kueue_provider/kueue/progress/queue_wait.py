"""How long a new Job waits for its quota (pure): the ClusterQueue's flavor simulated in units of the Job's
pods, the workloads holding quota freeing it as they end, those ahead admitted first in order.

What is known of the others is little (docs/forecast.md, "The wait"): a workload admitted in the task's own
namespace is seen with its quota and how long it has held it; it is taken to run as long as this Job will
(its own length is not known), so it ends that long after its admission. Quota held by workloads not seen
(other namespaces of the ClusterQueue) is taken as Jobs like this one, half done on average. Each workload
ahead is a Job like this one. With nothing seen this is the older "like this one" rule exactly.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence
from dataclasses import dataclass

MAX_HOLDERS = 10_000
"""Holders simulated at most (a bound on the work per forecast; more are merged into the last)."""


@dataclass(frozen=True)
class Holder:
    """Quota held now: as many of the Job's pods as it would hold (``pods``), free in ``ends_in`` seconds."""

    pods: float
    ends_in: float


def simulated_wait(free_pods: float, need: int, holders: Sequence[Holder], ahead: int, run: float) -> float:
    """Seconds until a Job of ``need`` pods that runs ``run`` seconds gets its quota: ``free_pods`` free now,
    ``holders`` freeing theirs as they end, ``ahead`` Jobs like it admitted first, in order. A queue that
    never frees enough (held quota below the need) waits as long as the last holder, then is admitted."""
    ends = [(max(0.0, h.ends_in), h.pods) for h in holders[:MAX_HOLDERS] if h.pods > 0]
    heapq.heapify(ends)
    free, now, queue = free_pods, 0.0, ahead
    while True:
        if free + 1e-9 >= need:
            if queue == 0:
                return now
            queue -= 1
            free -= need
            heapq.heappush(ends, (now + run, float(need)))
            continue
        if not ends:
            return now  # nothing left to free: Kueue admits it once the rest ends (or borrows)
        now, pods = heapq.heappop(ends)
        free += pods


def unseen_holders(pods: float, need: int, run: float) -> list[Holder]:
    """Quota held by workloads not seen, as Jobs of ``need`` pods half done (``run / 2`` left each)."""
    if pods <= 0 or need <= 0:
        return []
    whole = math.floor(pods / need + 1e-9)
    rest = pods - whole * need
    held = [Holder(float(need), run / 2)] * min(whole, MAX_HOLDERS)
    return held + ([Holder(rest, run / 2)] if rest > 1e-9 else [])
