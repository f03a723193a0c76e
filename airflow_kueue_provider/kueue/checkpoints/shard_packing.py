"""Several shards per pod: which shard ids Job index ``i`` runs, and how many per pod to choose.

A pod costs seconds that are not shard work (the Job controller's refill, scheduling, the container start,
the SDK's first Blob round trip). Shards shorter than that are packed: index ``i`` of a Job runs the ``i``-th
group of consecutive shard ids of the shards the Job runs, one after the other in one process. Everything
else stays per shard: checkpoints, ``done.json``, the ledger, a retry that runs only the unfinished shards
(packed again).

Three pack shapes, one mapping (``ShardPacks.runs``):

- **even**: every pack holds ``per_pod`` shards (the last may hold fewer): an explicit ``shards_per_pod``.
  From a stated duration of about one length, ``choose_per_pod`` keeps at least ``MIN_PACKS_PER_SLOT`` packs
  per slot and ``whole_wave_sizes`` fills whole waves of ``parallelism`` pods, sizes one apart (167 packs on
  50 slots would leave a fourth wave of 17 alone); written as runs (``"4x2,3x14"``) unless all are equal.
- **decreasing** (guided self-scheduling): index ``i`` takes ``1/parallelism`` of the shards the indexes
  before it left, at most ``per_pod``, at least one. For shards of uneven length: the Job controller starts
  the lowest pending index first, so the last pods run single shards and fill the gaps of a skewed tail
  instead of one long pack running alone at the end (measured: ``docs/shard-packing.md``).
- **ordered** (from shard history, ``history_packing``): the packs take the shards in a given ``order`` (a
  permutation of them), in sizes of any runs: balanced packs of the learned lengths, longest first. The
  shape text carries the order after a ``/`` (``"10x18,1x4/17,3-5,120,..."``), so the pods, the ledger and
  ``packs_of_job`` read it from where they read the sizes; a provider that predates it refuses the shape.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import KueueProviderError
from ..index_set import IndexSet
from ..names import SHARDS_ENV, SHARDS_PER_POD_ENV
from .pack_order import order_text, parse_order

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
    """Decreasing pack sizes (``decreasing``), or any sizes with an ``order``; empty for even packs."""
    order: tuple[int, ...] = ()
    """The shard ids in pack order (a permutation of ``shards``); empty: ascending."""

    def __post_init__(self) -> None:
        if isinstance(self.per_pod, bool) or not isinstance(self.per_pod, int) or self.per_pod < 1:
            raise InvalidPacking(f"shards per pod must be a whole number >= 1, got {self.per_pod!r}")
        if self.order and (
            len(self.order) != len(self.shards) or IndexSet.from_indexes(self.order) != self.shards
        ):
            raise InvalidPacking(
                f"pack order of {len(self.order)} ids is not an ordering of the Job's shards {self.shards}"
            )
        if not self.sizes:
            return
        sizes = [size for size, _ in self.sizes]
        in_order = self.order or sizes == sorted(sizes, reverse=True)
        if any(size < 1 or count < 1 for size, count in self.sizes) or not in_order:
            raise InvalidPacking(
                f"pack sizes {self.shape}: give decreasing sizes >= 1, each run once or more"
            )
        if max(sizes) != self.per_pod:
            raise InvalidPacking(f"pack sizes {self.shape} reach {max(sizes)}, not per_pod={self.per_pod}")
        if (total := sum(size * count for size, count in self.sizes)) != len(self.shards):
            raise InvalidPacking(
                f"pack sizes {self.shape} hold {total} shards, not the Job's {len(self.shards)}"
            )

    @classmethod
    def decreasing(cls, shards: IndexSet, sizes: PackRuns) -> ShardPacks:
        """Packs of ``sizes``, written in the even form when they are even (so the shape stays ``"5"``)."""
        merged = _merged_runs(sizes)
        if not merged:
            return cls(shards)
        even = cls(shards, merged[0][0])
        return even if even.runs == tuple(merged) else cls(shards, merged[0][0], tuple(merged))

    @classmethod
    def ordered(cls, shards: IndexSet, order: tuple[int, ...], sizes: PackRuns) -> ShardPacks:
        """Packs of ``sizes`` (any runs) over ``order``; ascending order is written without it."""
        merged = _merged_runs(sizes)
        if not merged:
            return cls(shards)
        largest = max(size for size, _ in merged)
        if list(order) == list(shards):
            try:
                return cls.decreasing(shards, tuple(merged))
            except InvalidPacking:
                pass  # sizes that are not decreasing: they keep the (ascending) order written out
        even = cls(shards, largest, order=tuple(order))
        return even if even.runs == tuple(merged) else cls(shards, largest, tuple(merged), tuple(order))

    @classmethod
    def parse(cls, shards: IndexSet, shape: str) -> ShardPacks:
        """The inverse of ``shape``: ``"5"`` (even), ``"5x26,4x3,1x20"`` (decreasing), either followed by
        ``/`` and an order (``"10x18,1x4/17,3-5,120"``)."""
        text, slash, order_part = shape.strip().partition("/")
        order = parse_order(order_part, len(shards)) if slash else ()
        if order is None:
            raise InvalidPacking(
                f"pack shape {shape!r}: the order after '/' is shard ids and ascending runs such as "
                "'17,3-5,120'"
            )
        if text.isdigit() and text.isascii():
            return cls(shards, int(text), order=order)
        runs: list[tuple[int, int]] = []
        for part in text.split(","):
            size, sep, count = part.strip().partition("x")
            if not (sep and size.isdigit() and count.isdigit() and size.isascii() and count.isascii()):
                raise InvalidPacking(
                    f"pack shape {shape!r}: give a whole number of shards per pod, or decreasing runs "
                    "such as '5x26,4x3,1x20' (size x count)"
                )
            runs.append((int(size), int(count)))
        return cls(shards, max(size for size, _ in runs), tuple(runs), order)

    @property
    def shape(self) -> str:
        """The text form (``SHARDS_PER_POD_ENV``, the ledger): ``"5"``, ``"5x26,4x3,1x20"``, either with
        ``/<order>`` after it."""
        sizes = ",".join(f"{size}x{count}" for size, count in self.sizes) or str(self.per_pod)
        return f"{sizes}/{order_text(self.order)}" if self.order else sizes

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
        return self.ids_at(self.ranks_of(indexes))

    def ids_at(self, ranks: IndexSet) -> IndexSet:
        """The shard ids at positions ``ranks`` of the pack order."""
        if not self.order:
            return self.shards.select(ranks)
        return IndexSet.from_indexes(self.order[r] for r in ranks if r < len(self.order))

    def ids_in_order(self, ranks: IndexSet) -> list[int]:
        """The shard ids at positions ``ranks``, in pack order (one per position)."""
        if not self.order:
            return list(self.shards.select(ranks))
        return [self.order[r] for r in ranks if r < len(self.order)]

    @property
    def is_packed(self) -> bool:
        """Whether a pod needs ``SHARDS_PER_POD_ENV`` (several shards per index, or an order)."""
        return self.per_pod > 1 or bool(self.order)

    def shards_of_index(self, index: int) -> IndexSet:
        if not 0 <= index < self.index_count:
            raise IndexError(f"index {index} is out of range for {self.index_count} packs")
        return self.shards_of(IndexSet.range(index, index + 1))

    def run_order_of_index(self, index: int) -> tuple[int, ...]:
        """The shard ids index ``index`` runs, in the order it runs them (longest first when ordered)."""
        if not 0 <= index < self.index_count:
            raise IndexError(f"index {index} is out of range for {self.index_count} packs")
        first, stop = self._first_rank(index), self._first_rank(index + 1)
        return tuple(self.ids_in_order(IndexSet.range(first, stop)))

    def describe(self) -> str:
        """``"300 shards as 30 pods of up to 10"`` (for logs and the retry plan)."""
        if self.per_pod == 1:
            return f"{len(self.shards)} shards, one per pod"
        if self.order:
            return (
                f"{len(self.shards)} shards as {self.index_count} pods of up to {self.per_pod}, "
                "balanced by their learned lengths"
            )
        if self.sizes:
            return (
                f"{len(self.shards)} shards as {self.index_count} pods of {self.per_pod} down to "
                f"{self.sizes[-1][0]}"
            )
        return f"{len(self.shards)} shards as {self.index_count} pods of up to {self.per_pod}"


def _merged_runs(sizes: PackRuns) -> list[tuple[int, int]]:
    """``sizes`` with neighbouring runs of one size joined and empty runs left out."""
    merged: list[tuple[int, int]] = []
    for size, count in sizes:
        if merged and merged[-1][0] == size:
            merged[-1] = (size, merged[-1][1] + count)
        elif count:
            merged.append((size, count))
    return merged


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
