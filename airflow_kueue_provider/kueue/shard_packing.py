"""Several shards per pod: which shard ids Job index ``i`` runs, and how many per pod to choose.

A pod costs seconds that are not shard work (the Job controller's refill, scheduling, the container start,
the SDK's first Blob round trip). Shards shorter than that are packed: index ``i`` of a Job runs the ``i``-th
group of ``per_pod`` consecutive shard ids of the shards the Job runs (the last group may be shorter), one
after the other in one process. Everything else stays per shard: checkpoints, ``done.json``, the ledger, a
retry that runs only the unfinished shards (packed again).

Static groups keep the Job controller's own balancing across packs: with several packs per pod slot, a pod
that finishes early takes the next pack, so a skewed tail costs at most one pack. ``choose_per_pod`` keeps at
least ``MIN_PACKS_PER_SLOT`` packs per slot for that reason, and sizes the packs so that they fill whole
waves of ``parallelism`` pods (167 packs on 50 slots would leave a fourth wave of 17 pods running alone).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .index_set import IndexSet
from .names import SHARDS_ENV, SHARDS_PER_POD_ENV

TARGET_POD_SECONDS = 60.0
"""``choose_per_pod`` packs shards until a pod runs about this long: a pod start on AKS (scheduling, image
pull from a warm node cache, container start, the first Blob round trip) is 5-15 s, so a minute of work per
pod keeps it under about a fifth."""
MIN_PACKS_PER_SLOT = 2
"""Packs per pod slot (``parallelism``) ``choose_per_pod`` keeps at least, so the Job controller can still
even out a skewed tail by handing the next pack to the pod that finished first."""


class InvalidPacking(ValueError):
    """A shards-per-pod setting that cannot work; the message names the parameter and the fix."""


@dataclass(frozen=True)
class ShardPacks:
    """How a Job's indexes map to shard ids: index ``i`` runs the ``i``-th group of ``per_pod`` of
    ``shards`` in ascending order. ``per_pod=1`` is one shard per index (the unpacked form)."""

    shards: IndexSet
    per_pod: int = 1

    def __post_init__(self) -> None:
        if isinstance(self.per_pod, bool) or not isinstance(self.per_pod, int) or self.per_pod < 1:
            raise InvalidPacking(f"shards per pod must be a whole number >= 1, got {self.per_pod!r}")

    @property
    def index_count(self) -> int:
        """The Job's completions: one index per pack."""
        return -(-len(self.shards) // self.per_pod)

    def ranks_of(self, indexes: IndexSet) -> IndexSet:
        """The positions in ``shards`` the Job ``indexes`` cover (O(intervals))."""
        count, k = len(self.shards), self.per_pod
        return IndexSet(
            (first * k, min((last + 1) * k, count) - 1)
            for first, last in indexes.intervals
            if first * k < count
        )

    def shards_of(self, indexes: IndexSet) -> IndexSet:
        """The shard ids Job ``indexes`` run."""
        return self.shards.select(self.ranks_of(indexes))

    def shards_of_index(self, index: int) -> IndexSet:
        if not 0 <= index < self.index_count:
            raise IndexError(f"index {index} is out of range for {self.index_count} packs")
        return self.shards_of(IndexSet.range(index, index + 1))

    def describe(self) -> str:
        """``"300 shards as 30 pods of 10"`` (for logs and the retry plan)."""
        if self.per_pod == 1:
            return f"{len(self.shards)} shards, one per pod"
        return f"{len(self.shards)} shards as {self.index_count} pods of up to {self.per_pod}"


def packs_of_job(job: Mapping[str, Any]) -> ShardPacks | None:
    """The shards a Job (batch/v1 dict) was created for and how many each index runs, from its pods'
    ``SHARDS_ENV`` and ``SHARDS_PER_POD_ENV``; None for a Job without them (shard id = index)."""
    pod = (job.get("spec") or {}).get("template") or {}
    values: dict[str, str] = {}
    for container in (pod.get("spec") or {}).get("containers") or []:
        for var in container.get("env") or []:
            if var.get("name") in (SHARDS_ENV, SHARDS_PER_POD_ENV) and "value" in var:
                values.setdefault(var["name"], str(var["value"]))
    if SHARDS_ENV not in values:
        return None
    per_pod = values.get(SHARDS_PER_POD_ENV, "1")
    return ShardPacks(IndexSet.parse(values[SHARDS_ENV]), int(per_pod) if per_pod.isdigit() else 1)


def choose_per_pod(
    shard_count: int,
    parallelism: int | None,
    expected_shard_seconds: float | None,
    explicit: int | None = None,
) -> int:
    """Shards per pod for a Job: ``explicit`` when given (checked), else from the expected shard duration.

    Without a duration nothing is packed (the program may be a single-shard one, and nothing says the shards
    are short). With one: each slot's work (shards x duration / slots) in whole waves of about
    ``TARGET_POD_SECONDS``, at least ``MIN_PACKS_PER_SLOT`` of them, and the shards spread evenly over
    slots x waves packs. E.g. 1,000 shards x 3 s at parallelism 50: 60 s per slot, 2 waves -> 10 per pod;
    10,000 x 1 s: 200 s per slot, 3 waves -> 67 per pod (150 pods, the last one of 17).
    """
    if shard_count < 1:
        raise InvalidPacking(f"shard count {shard_count} must be >= 1")
    if explicit is not None:
        if isinstance(explicit, bool) or not isinstance(explicit, int) or explicit < 1:
            raise InvalidPacking(
                f"shards_per_pod={explicit!r}: give a whole number >= 1 (1 = one shard per pod), or leave "
                "it unset and give expected_shard_duration to let the operator choose"
            )
        if explicit > shard_count:
            raise InvalidPacking(
                f"shards_per_pod={explicit} is more than the {shard_count} shards (completions): at most "
                f"{shard_count}, or fewer so that several pods share the work"
            )
        return explicit
    if expected_shard_seconds is None:
        return 1
    if not math.isfinite(expected_shard_seconds) or expected_shard_seconds <= 0:
        raise InvalidPacking(
            f"expected_shard_duration of {expected_shard_seconds} s: give a positive duration"
        )
    slots = min(parallelism or shard_count, shard_count)
    per_slot_seconds = shard_count * expected_shard_seconds / slots
    waves = max(MIN_PACKS_PER_SLOT, round(per_slot_seconds / TARGET_POD_SECONDS))
    return max(1, math.ceil(shard_count / (slots * waves)))


@dataclass(frozen=True)
class PackingChoice:
    """What the operator was told (``shards_per_pod``, ``expected_shard_duration``) and its parallelism:
    each Job of the task instance (a retry runs fewer shards) gets ``per_pod(its shard count)``."""

    explicit: int | None = None
    expected_shard_seconds: float | None = None
    parallelism: int | None = None

    @property
    def packs_any(self) -> bool:
        """Whether the task was told to pack (its Jobs may run several shards per index)."""
        return self.explicit not in (None, 1) or self.expected_shard_seconds is not None

    def per_pod(self, shard_count: int) -> int:
        explicit = min(self.explicit, shard_count) if self.explicit is not None else None
        return choose_per_pod(shard_count, self.parallelism, self.expected_shard_seconds, explicit)

    def packs(self, shards: IndexSet) -> ShardPacks:
        return ShardPacks(shards, self.per_pod(len(shards)) if shards else 1)
