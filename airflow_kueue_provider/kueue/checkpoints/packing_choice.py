"""How many shards each pod runs, from what the DAG said (``shards_per_pod``, ``expected_shard_duration``)
and its parallelism: the even and decreasing shapes ``ShardPacks`` maps (``shard_packing``), or with shard
history the ordered ones (``history_packing``)."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Any

from ..index_set import IndexSet
from .history_packing import packs_from_history
from .learned_lengths import LearnedLengths
from .shard_packing import InvalidPacking, PackRuns, ShardPacks

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


def whole_wave_sizes(shard_count: int, slots: int, largest: int) -> PackRuns:
    """Packs of at most ``largest`` in a whole number of waves of ``slots`` pods (as many shards as there
    are allow), sizes differing by one at most, the larger first: 50 shards of at most 4 on 8 slots are
    2 x 4 and 14 x 3 (16 pods, two full waves), not 12 x 4 and 1 x 2 (13: a second wave of 5 pods whose
    3 idle slots keep their quota)."""
    packs = -(-shard_count // max(largest, 1))
    slots = max(slots, 1)
    packs = min(shard_count, -(-packs // slots) * slots)
    size, larger = divmod(shard_count, packs)
    return tuple(run for run in ((size + 1, larger), (size, packs - larger)) if run[1])


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
    10,000 x 1 s: 200 s per slot, 3 waves -> at most 67 per pod (``whole_wave_sizes``: 150 pods of 67 and
    66).
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
    learned: LearnedLengths | None = None
    """The shards' lengths from earlier nights (``shard_history``): with no explicit size, the packs are
    balanced over them (``history_packing``); None behaves as before history existed."""

    @property
    def packs_any(self) -> bool:
        """Whether the task was told to pack (its Jobs may run several shards per index)."""
        return self.explicit not in (None, 1) or self.expected is not None or self.learned is not None

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
        """Balanced packs of the learned lengths; else the explicit size's even packs, or from the stated
        duration whole waves of packs (``whole_wave_sizes``), decreasing ones when the range is skewed."""
        if not shards:
            return ShardPacks(shards)
        if self.explicit is None and self.learned is not None:
            fallback = self._mean
            packs = packs_from_history(shards, self.learned, fallback, self.parallelism)
            if packs is not None:
                return packs
            stated = self.expected or _range_of(self.learned)
            return replace(self, learned=None, expected=stated).packs(shards)
        largest = self.per_pod(len(shards))
        if self.explicit is not None or self.expected is None or largest == 1:
            return ShardPacks(shards, largest)
        slots = min(self.parallelism or len(shards), len(shards))
        sizes = decreasing_sizes if self.expected.skewed else whole_wave_sizes
        return ShardPacks.decreasing(shards, sizes(len(shards), slots, largest))


def _range_of(learned: LearnedLengths) -> ShardDuration:
    """The learned lengths as a stated range would give them (too many shards to carry an order)."""
    return ShardDuration(min(learned.seconds.values()), max(learned.seconds.values()))
