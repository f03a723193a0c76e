"""Packs from shard history: the learned lengths balanced over the pod slots, longest first (pure).

With lengths known, one pod per slot is the shortest night when the lengths repeat: every pod pays the start
once, and longest-processing-time-first (LPT) into ``slots`` bins leaves them within about one short shard of
each other. Variance is what a tail of small packs absorbs, and each of its pods pays a start again, so the
tail is kept only when the expected imbalance of a bin (``NIGHT_NOISE`` of its work, at about two standard
deviations for the slowest of many bins) costs more than two tail pods (a start, and the Job controller's sync
before it): nights of short shards run one wave, nights of 10-minute shards keep a tail of small packs that
the slots that finish first take.

The packs go to the Job in index order, the biggest first; the Job controller starts the lowest pending index
in each free slot, so the tail's packs fill the gaps at the end (``docs/shard-packing.md``).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable

from ..index_set import IndexSet
from .learned_lengths import LearnedLengths
from .pack_order import order_text
from .shard_packing import ShardPacks

POD_START_SECONDS = 5.0
"""What one more pod costs (AKS: the sandbox and container start, the interpreter and the SDK's imports, the
first Blob round trip, with the image cached): a tail pack must save more than this."""
JOB_SYNC_SECONDS = 1.0
"""What a tail pod waits beside its start: the Job controller creates the next index's pod at its next sync,
which it batches for a second after a pod ends (``SyncJobBatchPeriod`` in kube-controller-manager)."""
NIGHT_NOISE = 0.1
"""How much a shard's length may vary from night to night (a tenth): the tail absorbs the bins' spread."""
SPREAD_OF_SLOWEST = 2.0
"""The slowest of a few dozen bins runs about this many standard deviations over the mean."""
CONSECUTIVE_SLACK = 0.005
"""Consecutive packs are kept (no order in the env) when their longest is within this share of the balanced
packs' longest: lengths that are alike need no reordering."""
MAX_ORDER_CHARS = 16 * 1024
"""The longest pack order a pod's env carries; above it (tens of thousands of shards in no learnable order)
the task packs as the DAG said, sized by the learned lengths' range (``PackingChoice``)."""


def packs_from_history(
    shards: IndexSet, learned: LearnedLengths, fallback: float | None, parallelism: int | None
) -> ShardPacks | None:
    """Ordered packs for ``shards`` from ``learned`` (a shard never seen takes ``fallback``, else the learned
    median); None when the order would not fit a pod's env."""
    if not shards:
        return ShardPacks(shards)
    length = {shard: learned.length_of(shard, fallback) for shard in shards}
    slots = max(1, min(parallelism or len(shards), len(shards)))
    by_length = sorted(shards, key=lambda shard: (-length[shard], shard))
    start = _tail_pod_cost(learned.pod_start_seconds)
    tail_seconds = _tail_seconds(length, slots, start)
    capacity = sum(length.values()) / slots - tail_seconds if tail_seconds else math.inf
    bins: list[tuple[float, int, list[int]]] = [(0.0, slot, []) for slot in range(slots)]
    tail: list[int] = []
    for shard in by_length:
        load, slot, members = bins[0]
        if members and load + length[shard] > capacity:
            tail.append(shard)
            continue
        members.append(shard)
        heapq.heapreplace(bins, (load + length[shard], slot, members))
    packs = [sorted(members) for _, _, members in sorted(bins, key=lambda b: (-b[0], b[1])) if members]
    if not tail and (runs := _consecutive_packs(shards, length, slots, max(map(_load(length), packs)))):
        packs = runs  # as balanced in id order (lengths alike): no order to carry
    packs.extend(sorted(pack) for pack in _tail_packs(tail, length, tail_seconds, start))
    order = tuple(shard for pack in packs for shard in pack)
    if len(order_text(order)) > MAX_ORDER_CHARS:
        return None
    return ShardPacks.ordered(shards, order, tuple((len(pack), 1) for pack in packs))


def _load(length: dict[int, float]) -> Callable[[list[int]], float]:
    return lambda pack: sum(length[shard] for shard in pack)


def _consecutive_packs(
    shards: IndexSet, length: dict[int, float], slots: int, balanced: float
) -> list[list[int]] | None:
    """``slots`` packs of consecutive ids, cut where the running work passes each slot's share; None unless
    the longest is within ``CONSECUTIVE_SLACK`` of the balanced packs' longest ``balanced``."""
    share = sum(length.values()) / slots
    packs: list[list[int]] = [[]]
    work = 0.0
    for shard in shards:
        if packs[-1] and work + length[shard] / 2 > share * len(packs) and len(packs) < slots:
            packs.append([])
        packs[-1].append(shard)
        work += length[shard]
    longest = max(map(_load(length), packs))
    return packs if longest <= balanced * (1 + CONSECUTIVE_SLACK) else None


def _tail_pod_cost(pod_start: float | None) -> float:
    """What one more pod in the tail costs: its start (as learned, else ``POD_START_SECONDS``) and the Job
    controller's sync before it is created (``JOB_SYNC_SECONDS``)."""
    return (POD_START_SECONDS if pod_start is None else pod_start) + JOB_SYNC_SECONDS


def _tail_seconds(length: dict[int, float], slots: int, pod_cost: float) -> float:
    """The work per slot kept for the tail: the slowest bin's expected overrun, when it is worth two tail
    pods (``_tail_pod_cost``); else none (one wave)."""
    per_slot = len(length) / slots
    mean_square = sum(seconds * seconds for seconds in length.values()) / len(length)
    overrun = SPREAD_OF_SLOWEST * NIGHT_NOISE * math.sqrt(per_slot * mean_square)
    return overrun if overrun > 2 * pod_cost else 0.0


def _tail_packs(
    tail: list[int], length: dict[int, float], tail_seconds: float, pod_cost: float
) -> list[list[int]]:
    """The shards left over, longest first, in packs of about half a slot's tail each, at least one tail
    pod's cost of work (and one shard): the slots that finish first take one or two. Sized by the same
    cost the tail was kept for: a fixed AKS figure made a bed's tail of 2 s shards packs of 5 s, a second
    wave longer than the variance it was there to absorb."""
    target = max(tail_seconds / 2, pod_cost)
    packs: list[list[int]] = []
    work = 0.0
    for shard in tail:  # already longest first
        if packs and work + length[shard] <= target:
            packs[-1].append(shard)
            work += length[shard]
        else:
            packs.append([shard])
            work = length[shard]
    return packs
