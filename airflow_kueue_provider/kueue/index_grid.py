"""Per-index states of an Indexed Job, for the UI's grid (pure).

Every index is in exactly one state: done (``completedIndexes``), failed (``failedIndexes``), running (a live
pod holds it) or waiting. ``runs`` gives contiguous stretches in index order and costs O(intervals), so a
100,000-completion Job renders as a few bands instead of 100,000 cells.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .index_set import IndexSet


class IndexState(str, enum.Enum):
    DONE = "done"
    FAILED = "failed"
    RUNNING = "running"
    WAITING = "waiting"


@dataclass(frozen=True)
class IndexRun:
    first: int
    last: int
    state: IndexState

    @property
    def size(self) -> int:
        return self.last - self.first + 1


@dataclass(frozen=True)
class IndexGrid:
    completions: int
    done: IndexSet
    failed: IndexSet
    running: IndexSet

    @property
    def waiting(self) -> IndexSet:
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
        return sorted(runs, key=lambda run: run.first)

    def counts(self) -> dict[str, int]:
        return {
            IndexState.DONE.value: len(self.done),
            IndexState.FAILED.value: len(self.failed),
            IndexState.RUNNING.value: len(self.running),
            IndexState.WAITING.value: len(self.waiting),
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            "completions": self.completions,
            "counts": self.counts(),
            "runs": [{"first": r.first, "last": r.last, "state": r.state.value} for r in self.runs()],
        }


def index_grid(job: Mapping[str, Any], running: IndexSet) -> IndexGrid:
    """The grid of ``job`` (a batch/v1 Job dict), given the indexes that live pods hold."""
    spec = job.get("spec") or {}
    status = job.get("status") or {}
    completions = int(spec.get("completions") or 0)
    universe = IndexSet.range(0, completions)
    done = IndexSet.parse(status.get("completedIndexes")) & universe
    failed = (IndexSet.parse(status.get("failedIndexes")) & universe) - done
    return IndexGrid(completions, done, failed, (running & universe) - done - failed)
