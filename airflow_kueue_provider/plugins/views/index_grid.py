"""Per-index states of an Indexed Job, for the UI's grid (pure).

Every index is in exactly one state: done (``completedIndexes``), failed (``failedIndexes``), running (a live
pod holds it) or waiting. ``runs`` gives contiguous stretches in index order and costs O(intervals), so a
100,000-completion Job renders as a few bands instead of 100,000 cells. A Job whose runs outnumber
``MAX_BANDS`` (a status fragmented by a wide parallelism) is drawn in ``MAX_BANDS`` equal bands, each
showing its most telling state and its counts: two pixels a band on a bar a thousand pixels wide.

A Job that runs shards of a checkpointed task (a retry runs only some shard ids; a packed Job several
shards per index) is drawn per shard (``shard_grid``): the grid's positions are the Job's shards in order,
each in the state of the index that runs it, and its cells are labelled with shard ids and that pod index.
"""

from __future__ import annotations

import enum
import functools
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from ...kueue.checkpoints.shard_packing import ShardPacks
from ...kueue.index_set import IndexSet

MAX_BANDS = 500


class IndexState(str, enum.Enum):
    DONE = "done"
    FAILED = "failed"
    RUNNING = "running"
    WAITING = "waiting"


_VALUES = {state: state.value for state in IndexState}  # Enum.value is a property: slow in a loop


class IndexRun(NamedTuple):
    """A tuple, not a dataclass: a fragmented 100,000-index Job makes thousands of them per grid."""

    first: int
    last: int
    state: IndexState

    @property
    def size(self) -> int:
        return self.last - self.first + 1


class IndexBand(NamedTuple):
    """A stretch of indexes drawn as one band: one run, or in a coarse grid a bucket of mixed states."""

    first: int
    last: int
    state: IndexState
    """The run's state; for a bucket: failed if any failed, else running if any runs, else the larger of
    done and waiting (a failure or a live pod is never hidden by its neighbours)."""
    counts: Mapping[IndexState, int]


@dataclass(frozen=True)
class IndexGrid:
    """States by position ``0 .. completions - 1``: the Job's indexes, or with ``packs`` its shards (position
    ``p`` is the ``p``-th shard id in the pack order, run by index ``packs.index_of_rank(p)``)."""

    completions: int
    done: IndexSet
    failed: IndexSet
    running: IndexSet
    packs: ShardPacks | None = None

    @property
    def job_indexes(self) -> int:
        """How many indexes the Job has (the positions' count for an index grid)."""
        return self.completions if self.packs is None else self.packs.index_count

    def cells(self, run: IndexRun) -> list[tuple[str, int]]:
        """Each position of ``run`` as (its label, the Job index that runs it): ``("index 3", 3)``, or for a
        shard grid ``("shard 37, pod index 3", 3)``."""
        if self.packs is None:
            return [(f"index {i}", i) for i in range(run.first, run.last + 1)]
        ids = self.packs.ids_in_order(IndexSet.range(run.first, run.last + 1))
        indexes = [self.packs.index_of_rank(p) for p in range(run.first, run.last + 1)]
        return [(f"shard {sid}, pod index {i}", i) for sid, i in zip(ids, indexes, strict=True)]

    def span(self, band: IndexBand) -> str:
        """A band's stretch: ``indexes 0-99``, or ``shards 700-799``."""
        if self.packs is None:
            return f"indexes {band.first}-{band.last}"
        ids = self.packs.ids_at(IndexSet.range(band.first, band.last + 1))
        return f"shards {ids}"

    @functools.cached_property
    def waiting(self) -> IndexSet:
        """Computed once: ``runs`` and ``counts`` both need it (a frozen dataclass keeps no other state)."""
        return IndexSet.range(0, self.completions) - self.done - self.failed - self.running

    def runs(self) -> list[IndexRun]:
        """Contiguous stretches of one state, in index order."""
        states = {
            IndexState.DONE: self.done,
            IndexState.FAILED: self.failed,
            IndexState.RUNNING: self.running,
            IndexState.WAITING: self.waiting,
        }
        runs = [IndexRun(a, b, state) for state, indexes in states.items() for a, b in indexes.intervals]
        runs.sort()  # by first index: the runs never overlap
        return runs

    def counts(self) -> dict[str, int]:
        return {
            IndexState.DONE.value: len(self.done),
            IndexState.FAILED.value: len(self.failed),
            IndexState.RUNNING.value: len(self.running),
            IndexState.WAITING.value: len(self.waiting),
        }

    def bands(self, limit: int = MAX_BANDS) -> list[IndexBand]:
        """The runs, or ``limit`` equal buckets when there are more runs than that; O(runs + limit)."""
        return _bands(self.runs(), self.completions, limit)

    def to_dict(self) -> dict[str, Any]:
        runs = self.runs()
        coarse = len(runs) > MAX_BANDS
        packed = (
            {}
            if self.packs is None
            else {"shards": str(self.packs.shards), "per_pod": self.packs.per_pod, "packs": self.packs.shape}
        )
        return {
            "completions": self.completions,
            "unit": "index" if self.packs is None else "shard",
            **packed,
            "counts": self.counts(),
            "coarse": coarse,
            "runs": [
                {"first": b.first, "last": b.last, "state": _VALUES[b.state]}
                | ({"counts": {_VALUES[state]: n for state, n in b.counts.items()}} if coarse else {})
                for b in _bands(runs, self.completions, MAX_BANDS)
            ],
        }


def _bands(runs: list[IndexRun], completions: int, limit: int) -> list[IndexBand]:
    if len(runs) <= limit:
        return [IndexBand(r.first, r.last, r.state, {r.state: r.size}) for r in runs]
    width = math.ceil(completions / limit)
    bands: list[IndexBand] = []
    counts: dict[IndexState, int] = {}
    bucket = 0
    for run in runs:
        first = run.first
        while first <= run.last:
            while first >= (bucket + 1) * width:  # close the buckets this run has passed
                bands.append(_bucket(bucket, width, completions, counts))
                bucket, counts = bucket + 1, {}
            last = min(run.last, (bucket + 1) * width - 1)
            counts[run.state] = counts.get(run.state, 0) + last - first + 1
            first = last + 1
    if counts:
        bands.append(_bucket(bucket, width, completions, counts))
    return bands


def _bucket(bucket: int, width: int, completions: int, counts: dict[IndexState, int]) -> IndexBand:
    if counts.get(IndexState.FAILED):
        state = IndexState.FAILED
    elif counts.get(IndexState.RUNNING):
        state = IndexState.RUNNING
    else:
        done, waiting = counts.get(IndexState.DONE, 0), counts.get(IndexState.WAITING, 0)
        state = IndexState.DONE if done >= waiting else IndexState.WAITING
    first = bucket * width
    return IndexBand(first, min(first + width, completions) - 1, state, counts)


def likely_running(job: Mapping[str, Any]) -> IndexSet:
    """The indexes the Job's live pods most likely hold, from its status alone: the lowest ``status.active``
    unfinished indexes (the Job controller starts an Indexed Job's missing indexes lowest first, and a retried
    index keeps its number). Exact while no index is retried out of order; it costs no read of the pods, so a
    page of a 100,000-index Job reads one object, not 100,000."""
    spec = job.get("spec") or {}
    status = job.get("status") or {}
    completions = int(spec.get("completions") or 0)
    active = int(status.get("active") or 0)
    if not active or not completions:
        return IndexSet()
    unfinished = (
        IndexSet.range(0, completions)
        - IndexSet.parse(status.get("completedIndexes"))
        - IndexSet.parse(status.get("failedIndexes"))
    )
    return unfinished.select(IndexSet.range(0, min(active, len(unfinished))))


def index_grid(job: Mapping[str, Any], running: IndexSet) -> IndexGrid:
    """The grid of ``job`` (a batch/v1 Job dict), given the indexes that live pods hold."""
    spec = job.get("spec") or {}
    status = job.get("status") or {}
    completions = int(spec.get("completions") or 0)
    universe = IndexSet.range(0, completions)
    done = IndexSet.parse(status.get("completedIndexes")) & universe
    failed = (IndexSet.parse(status.get("failedIndexes")) & universe) - done
    return IndexGrid(completions, done, failed, (running & universe) - done - failed)


def shard_grid(grid: IndexGrid, packs: ShardPacks) -> IndexGrid:
    """``grid`` (by Job index) per shard: each of the Job's shards in the state of the index that runs it.
    A failed index's shards are all drawn failed, though some of them may have finished before the failure:
    the retry runs only the unfinished ones (their done records decide, not the grid)."""
    return IndexGrid(
        len(packs.shards),
        packs.ranks_of(grid.done),
        packs.ranks_of(grid.failed),
        packs.ranks_of(grid.running),
        packs,
    )
