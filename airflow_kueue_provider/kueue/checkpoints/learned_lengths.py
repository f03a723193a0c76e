"""How long each shard of a task ran on earlier nights, as packing and the forecast read it (pure).

The history store (``shard_history``) keeps the figures; this is the read side every consumer shares, so the
packing, the forecast and the log say the same thing about what was learned."""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class LearnedLengths:
    """``seconds``: shard id -> its learned run time (seconds, > 0); ``nights``: the runs it was learned from
    (run ids, oldest first); ``shard_count``: the task's shard count on those nights (history from another
    shard count is not used)."""

    shard_count: int
    seconds: Mapping[int, float] = field(default_factory=dict)
    nights: tuple[str, ...] = ()
    pod_start_seconds: float | None = None
    """What a pod of this task cost before and between its shards on earlier nights (from creation to its
    first shard, the SDK's per-shard round trips): learned from a clean attempt's running time against its
    shards' lengths; None until one was seen."""
    packable: bool = True
    """Whether packing may put several of these shards in one pod: the lengths came from the worker SDK's
    done records. Lengths read from pod times (a program without the SDK runs one shard per index) serve
    the forecast alone."""
    wait_bias_seconds: float | None = None
    """How much later than the forecast's model this task finished on earlier nights when its Job waited
    for quota (seconds, signed): what the queue did that no read at submit could see (Jobs created later
    at a higher priority, preemption). The forecast adds it to a wait; None until a night had one."""

    def __post_init__(self) -> None:
        if self.shard_count < 1:
            raise ValueError(f"shard_count {self.shard_count} must be >= 1")
        bad = [i for i, s in self.seconds.items() if not (0 <= i < self.shard_count) or not s > 0]
        if bad:
            raise ValueError(f"learned lengths for shards {bad[:5]} are out of range or not positive")

    def fits(self, shard_count: int) -> bool:
        """Whether this history is about a task of ``shard_count`` shards (and knows at least one)."""
        return shard_count == self.shard_count and bool(self.seconds)

    def length_of(self, shard_id: int, fallback: float | None) -> float:
        """The learned seconds of ``shard_id``; one never seen: ``fallback`` (the stated duration), else the
        median of the ones learned."""
        if (known := self.seconds.get(shard_id)) is not None:
            return known
        return fallback if fallback is not None else statistics.median(self.seconds.values())

    def describe(self) -> str:
        """``"learned from 3 nights (run-a .. run-c), 200 of 200 shards"`` for the task log."""
        span = self.nights[0] if len(self.nights) == 1 else f"{self.nights[0]} .. {self.nights[-1]}"
        count = len(self.nights)
        nights = f"{count} night{'s' if count != 1 else ''} ({span})" if self.nights else "earlier nights"
        start = f", pods start in about {self.pod_start_seconds:g} s" if self.pod_start_seconds else ""
        return f"learned from {nights}, {len(self.seconds)} of {self.shard_count} shards{start}"
