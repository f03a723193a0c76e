"""Several shards per pod: which shard ids Job index ``i`` runs, and how many per pod to choose.

A pod costs seconds that are not shard work (the Job controller's refill, scheduling, the container start,
the SDK's first Blob round trip). Shards shorter than that are packed: index ``i`` of a Job runs the ``i``-th
group of consecutive shard ids of the shards the Job runs, one after the other in one process. Everything
else stays per shard: checkpoints, ``done.json``, the ledger, a retry that runs only the unfinished shards
(packed again).

Two pack shapes, one mapping (``ShardPacks.runs``):

- **even**: every pack holds ``per_pod`` shards (the last may hold fewer). For shards of about one length:
  the fewest pods. ``choose_per_pod`` keeps at least ``MIN_PACKS_PER_SLOT`` packs per slot and sizes them to
  fill whole waves of ``parallelism`` pods (167 packs on 50 slots would leave a fourth wave of 17 alone).
- **decreasing** (guided self-scheduling): index ``i`` takes ``1/parallelism`` of the shards the indexes
  before it left, at most ``per_pod``, at least one. For shards of uneven length: the Job controller starts
  the lowest pending index first, so the last pods run single shards and fill the gaps of a skewed tail
  instead of one long pack running alone at the end (measured: ``docs/shard-packing.md``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from ..errors import KueueProviderError
from ..index_set import IndexSet
from ..names import SHARDS_ENV, SHARDS_PER_POD_ENV

TARGET_POD_SECONDS = 60.0
"""``choose_per_pod`` packs shards until a pod runs about this long: a pod start on AKS (scheduling, image
pull from a warm node cache, container start, the first Blob round trip) is 5-15 s, so a minute of work per
pod keeps it under about a fifth."""
MIN_PACKS_PER_SLOT = 2
"""Packs per pod slot (``parallelism``) ``choose_per_pod`` keeps at least, so the Job controller can still
even out a skewed tail by handing the next pack to the pod that finished first."""
SKEW_RATIO = 2.0
"""A shard duration range whose longest is at least this many times its shortest packs in decreasing sizes."""

ShardDurationParam = timedelta | float | tuple[timedelta | float, timedelta | float] | None
"""``expected_shard_duration`` as a DAG gives it: one duration, or ``(shortest, longest)``."""
PackRuns = tuple[tuple[int, int], ...]
"""Pack sizes in index order as ``(size, count)`` runs: ``((5, 26), (4, 3), (1, 20))``."""


class InvalidPacking(ValueError, KueueProviderError):
    """A shards-per-pod setting that cannot work; the message names the parameter and the fix."""


@dataclass(frozen=True)
class ShardPacks:
    """How a Job's indexes map to shard ids: index ``i`` runs the ``i``-th pack of ``shards`` in ascending
    order. Even packs of ``per_pod`` by default (``per_pod=1`` is the unpacked form); with ``sizes``, the
    packs those runs give (``per_pod`` is then the largest)."""

    shards: IndexSet
    per_pod: int = 1
    sizes: PackRuns = ()
    """Decreasing pack sizes (``decreasing``); empty for even packs."""

    def __post_init__(self) -> None:
        if isinstance(self.per_pod, bool) or not isinstance(self.per_pod, int) or self.per_pod < 1:
            raise InvalidPacking(f"shards per pod must be a whole number >= 1, got {self.per_pod!r}")
        if not self.sizes:
            return
        sizes = [size for size, _ in self.sizes]
        if any(size < 1 or count < 1 for size, count in self.sizes) or sizes != sorted(sizes, reverse=True):
            raise InvalidPacking(
                f"pack sizes {self.shape}: give decreasing sizes >= 1, each run once or more"
            )
        if sizes[0] != self.per_pod:
            raise InvalidPacking(f"pack sizes {self.shape} start at {sizes[0]}, not per_pod={self.per_pod}")
        if (total := sum(size * count for size, count in self.sizes)) != len(self.shards):
            raise InvalidPacking(
                f"pack sizes {self.shape} hold {total} shards, not the Job's {len(self.shards)}"
            )

    @classmethod
    def decreasing(cls, shards: IndexSet, sizes: PackRuns) -> ShardPacks:
        """Packs of ``sizes``, written in the even form when they are even (so the shape stays ``"5"``)."""
        merged: list[tuple[int, int]] = []
        for size, count in sizes:
            if merged and merged[-1][0] == size:
                merged[-1] = (size, merged[-1][1] + count)
            elif count:
                merged.append((size, count))
        if not merged:
            return cls(shards)
        even = cls(shards, merged[0][0])
        return even if even.runs == tuple(merged) else cls(shards, merged[0][0], tuple(merged))

    @classmethod
    def parse(cls, shards: IndexSet, shape: str) -> ShardPacks:
        """The inverse of ``shape``: ``"5"`` (even) or ``"5x26,4x3,1x20"`` (decreasing)."""
        text = shape.strip()
        if text.isdigit() and text.isascii():
            return cls(shards, int(text))
        runs: list[tuple[int, int]] = []
        for part in text.split(","):
            size, sep, count = part.strip().partition("x")
            if not (sep and size.isdigit() and count.isdigit() and size.isascii() and count.isascii()):
                raise InvalidPacking(
                    f"pack shape {shape!r}: give a whole number of shards per pod, or decreasing runs "
                    "such as '5x26,4x3,1x20' (size x count)"
                )
            runs.append((int(size), int(count)))
        return cls(shards, runs[0][0], tuple(runs))

    @property
    def shape(self) -> str:
        """The text form (``SHARDS_PER_POD_ENV``, the ledger): ``"5"``, or ``"5x26,4x3,1x20"``."""
        return ",".join(f"{size}x{count}" for size, count in self.sizes) or str(self.per_pod)

    @property
    def runs(self) -> PackRuns:
        """The pack sizes in index order as ``(size, count)`` runs, whatever the shape."""
        if self.sizes:
            return self.sizes
        full, rest = divmod(len(self.shards), self.per_pod)
        return tuple(run for run in ((self.per_pod, full), (rest, 1)) if run[0] and run[1])

    @property
    def index_count(self) -> int:
        """The Job's completions: one index per pack."""
        return sum(count for _, count in self.runs)

    def _first_rank(self, index: int) -> int:
        """The position in ``shards`` of index ``index``'s first shard (``len(shards)`` past the last)."""
        rank = 0
        for size, count in self.runs:
            if index < count:
                return rank + index * size
            rank, index = rank + size * count, index - count
        return rank

    def index_of_rank(self, rank: int) -> int:
        """The Job index that runs the shard at position ``rank`` of ``shards``."""
        index = 0
        for size, count in self.runs:
            if rank < size * count:
                return index + rank // size
            rank, index = rank - size * count, index + count
        raise IndexError(f"position {rank} is past the {len(self.shards)} shards")

    def ranks_of(self, indexes: IndexSet) -> IndexSet:
        """The positions in ``shards`` the Job ``indexes`` cover (O(intervals x runs))."""
        count = self.index_count
        return IndexSet(
            (self._first_rank(first), self._first_rank(min(last, count - 1) + 1) - 1)
            for first, last in indexes.intervals
            if first < count
        )

    def shards_of(self, indexes: IndexSet) -> IndexSet:
        """The shard ids Job ``indexes`` run."""
        return self.shards.select(self.ranks_of(indexes))

    def shards_of_index(self, index: int) -> IndexSet:
        if not 0 <= index < self.index_count:
            raise IndexError(f"index {index} is out of range for {self.index_count} packs")
        return self.shards_of(IndexSet.range(index, index + 1))

    def describe(self) -> str:
        """``"300 shards as 30 pods of up to 10"`` (for logs and the retry plan)."""
        if self.per_pod == 1:
            return f"{len(self.shards)} shards, one per pod"
        if self.sizes:
            return (
                f"{len(self.shards)} shards as {self.index_count} pods of {self.per_pod} down to "
                f"{self.sizes[-1][0]}"
            )
        return f"{len(self.shards)} shards as {self.index_count} pods of up to {self.per_pod}"


def decreasing_sizes(shard_count: int, slots: int, largest: int) -> PackRuns:
    """Guided self-scheduling: each index takes ``1/slots`` of the shards left, at most ``largest``, at
    least one; as runs (a few dozen, however many shards)."""
    runs: list[tuple[int, int]] = []
    left = shard_count
    while left > 0:
        size = min(largest, -(-left // max(slots, 1)))
        if runs and runs[-1][0] == size:
            runs[-1] = (size, runs[-1][1] + 1)
        else:
            runs.append((size, 1))
        left -= size
    return tuple(runs)


@dataclass(frozen=True)
class ShardDuration:
    """How long a shard runs, as the DAG says: one figure, or a range when lengths differ."""

    shortest: float
    longest: float

    @classmethod
    def from_param(cls, value: Any) -> ShardDuration | None:
        """``expected_shard_duration``: a ``timedelta`` or seconds, or a ``(shortest, longest)`` pair."""
        if value is None:
            return None
        pair = value if isinstance(value, (tuple, list)) else (value, value)
        if len(pair) != 2:
            raise InvalidPacking(
                f"expected_shard_duration={value!r}: give one duration, or a (shortest, longest) pair"
            )
        shortest, longest = (_seconds(value, part) for part in pair)
        if longest < shortest:
            raise InvalidPacking(
                f"expected_shard_duration={value!r}: the pair is (shortest, longest); swap them"
            )
        return cls(shortest, longest)

    @property
    def mean(self) -> float:
        """What ``choose_per_pod`` sizes packs for (the middle: lengths spread evenly over the range)."""
        return (self.shortest + self.longest) / 2

    @property
    def skewed(self) -> bool:
        return self.longest >= SKEW_RATIO * self.shortest


def _seconds(param: Any, value: Any) -> float:
    seconds = value.total_seconds() if isinstance(value, timedelta) else value
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
        raise InvalidPacking(
            f"expected_shard_duration={param!r}: give a timedelta or a number of seconds (or a "
            "(shortest, longest) pair of them)"
        )
    if not math.isfinite(seconds) or seconds <= 0:
        raise InvalidPacking(f"expected_shard_duration of {value} s: give a positive duration")
    return float(seconds)


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
    try:
        return ShardPacks.parse(IndexSet.parse(values[SHARDS_ENV]), values.get(SHARDS_PER_POD_ENV, "1"))
    except ValueError:  # InvalidPacking, or a bad SHARDS_ENV
        return None  # not a Job this provider shaped: drawn and counted per index


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
    each Job of the task instance (a retry runs fewer shards) gets ``packs(its shards)``."""

    explicit: int | None = None
    expected: ShardDuration | None = None
    parallelism: int | None = None

    @property
    def packs_any(self) -> bool:
        """Whether the task was told to pack (its Jobs may run several shards per index)."""
        return self.explicit not in (None, 1) or self.expected is not None

    def check(self, shard_count: int) -> None:
        """Refuse what cannot work for the task's first Job (``shards_per_pod`` above its shards, too)."""
        choose_per_pod(shard_count, self.parallelism, self._mean, self.explicit)

    def per_pod(self, shard_count: int) -> int:
        """The largest pack for a Job of ``shard_count`` shards (a retry's explicit size is capped by
        what is left)."""
        explicit = min(self.explicit, shard_count) if self.explicit is not None else None
        return choose_per_pod(shard_count, self.parallelism, self._mean, explicit)

    @property
    def _mean(self) -> float | None:
        return self.expected.mean if self.expected is not None else None

    def packs(self, shards: IndexSet) -> ShardPacks:
        """Even packs, or decreasing ones when the DAG gave a skewed duration range and no explicit size."""
        if not shards:
            return ShardPacks(shards)
        largest = self.per_pod(len(shards))
        if self.explicit is None and self.expected is not None and self.expected.skewed and largest > 1:
            slots = min(self.parallelism or len(shards), len(shards))
            return ShardPacks.decreasing(shards, decreasing_sizes(len(shards), slots, largest))
        return ShardPacks(shards, largest)
