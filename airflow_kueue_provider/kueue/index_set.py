"""Sets of Job completion indexes, stored as intervals.

Kubernetes reports the indexes of an Indexed Job as interval strings (``status.completedIndexes``,
``status.failedIndexes``, e.g. ``"0-3,7,9-11"``). A Job may have 100,000 completions, so the set is kept as
sorted, disjoint, non-adjacent closed intervals and every operation costs O(number of intervals), never
O(number of indexes).
"""

from __future__ import annotations

import bisect
import itertools
import re
from collections.abc import Iterable, Iterator

Interval = tuple[int, int]
"""A closed interval ``(first, last)`` with ``0 <= first <= last``."""

_SINGLE = re.compile(r"[0-9]+", re.ASCII)
_RANGE = re.compile(r"([0-9]+)-([0-9]+)", re.ASCII)


class IndexSet:
    """An immutable set of non-negative integers (Job completion indexes).

    ``str()`` gives the canonical Kubernetes form. Like the Job controller (``orderedIntervals.String`` in
    ``pkg/controller/job/indexed_job_utils.go``) a run of exactly two indexes is written ``"4,5"``, longer
    runs ``"4-6"``; ``parse`` accepts either.
    """

    __slots__ = ("_count", "_intervals")

    _intervals: tuple[Interval, ...]
    _count: int

    def __init__(self, intervals: Iterable[Interval] = ()) -> None:
        """Build from closed intervals in any order; overlapping or adjacent ones are merged."""
        checked: list[Interval] = []
        for first, last in intervals:
            if first < 0:
                raise ValueError(f"index {first} is negative: indexes must be >= 0")
            if first > last:
                raise ValueError(f"interval ({first}, {last}) starts after it ends")
            checked.append((first, last))
        checked.sort()
        self._set(_merge_sorted(checked))

    def _set(self, intervals: tuple[Interval, ...]) -> None:
        self._intervals = intervals
        self._count = sum(last - first + 1 for first, last in intervals)

    @classmethod
    def _from_normalised(cls, intervals: tuple[Interval, ...]) -> IndexSet:
        result = cls.__new__(cls)
        result._set(intervals)
        return result

    # -- constructors -------------------------------------------------------------------------------

    @classmethod
    def parse(cls, text: str | None) -> IndexSet:
        """Parse an interval string such as ``"0-3,7,9-11"``; ``""`` and ``None`` give the empty set.

        Unsorted and overlapping input is accepted and normalised. Raises ``ValueError`` naming the bad item.
        """
        if text is None or not text.strip():
            return cls()
        intervals: list[Interval] = []
        append = intervals.append
        for position, raw in enumerate(text.split(","), start=1):
            # The fast path (a 100,000-index Job's status can hold 50,000 items); _parse_item checks the rest
            # and names what is wrong. isascii() keeps out digits int() would take ("٣") and "1_0".
            first, dash, last = raw.partition("-")
            if first.isdigit() and first.isascii() and (not dash or (last.isdigit() and last.isascii())):
                low = int(first)
                high = int(last) if dash else low
                if low <= high:
                    append((low, high))
                    continue
            append(_parse_item(raw.strip(), position, text))
        if _is_normalised(intervals):  # what Kubernetes sends: skip the sort and merge
            return cls._from_normalised(tuple(intervals))
        return cls(intervals)

    @classmethod
    def range(cls, start: int, stop: int) -> IndexSet:
        """The indexes ``start <= i < stop`` (half-open, like Python's ``range``)."""
        if start < 0:
            raise ValueError(f"range start {start} is negative: indexes must be >= 0")
        if stop <= start:
            return cls()
        return cls._from_normalised(((start, stop - 1),))

    @classmethod
    def from_indexes(cls, indexes: Iterable[int]) -> IndexSet:
        """Build from individual indexes in any order (duplicates allowed)."""
        return cls((index, index) for index in indexes)

    # -- inspection ---------------------------------------------------------------------------------

    @property
    def intervals(self) -> tuple[Interval, ...]:
        """The normalised closed intervals, ascending."""
        return self._intervals

    def __len__(self) -> int:
        return self._count

    def __bool__(self) -> bool:
        return bool(self._intervals)

    def __contains__(self, index: object) -> bool:
        if not isinstance(index, int) or isinstance(index, bool):
            return False
        position = bisect.bisect_right(self._intervals, index, key=_first) - 1
        return position >= 0 and self._intervals[position][1] >= index

    def __iter__(self) -> Iterator[int]:
        for first, last in self._intervals:
            yield from range(first, last + 1)

    def min(self) -> int:
        """The smallest index, in O(1). Raises ``ValueError`` when empty."""
        if not self._intervals:
            raise ValueError("min() of an empty IndexSet")
        return self._intervals[0][0]

    def max(self) -> int:
        """The largest index, in O(1). Raises ``ValueError`` when empty."""
        if not self._intervals:
            raise ValueError("max() of an empty IndexSet")
        return self._intervals[-1][1]

    def select(self, ranks: IndexSet) -> IndexSet:
        """The elements at the given 0-based ranks (positions in ascending order).

        ``IndexSet.parse("2,5,8").select(IndexSet.parse("0,2")) == IndexSet.parse("2,8")``. A retry Job runs
        only the unfinished shards, and its index ``i`` runs the ``i``-th of them: this maps the Job's
        completed indexes back to shard ids in O((ranks + intervals) log intervals).
        """
        if ranks and ranks.max() >= self._count:
            raise IndexError(f"rank {ranks.max()} is out of range for a set of {self._count}")
        starts: list[int] = []
        total = 0
        for first, last in self._intervals:
            starts.append(total)
            total += last - first + 1
        picked: list[Interval] = []
        for low, high in ranks._intervals:
            k = bisect.bisect_right(starts, low) - 1
            rank = low
            while rank <= high:
                first, last = self._intervals[k]
                end = min(high, starts[k] + last - first)
                picked.append((first + rank - starts[k], first + end - starts[k]))
                rank, k = end + 1, k + 1
        return IndexSet(picked)

    def issubset(self, other: IndexSet) -> bool:
        return not (self - other)

    def isdisjoint(self, other: IndexSet) -> bool:
        return not (self & other)

    # -- set algebra (each a single linear merge over both interval lists) --------------------------

    def __or__(self, other: IndexSet) -> IndexSet:
        if not isinstance(other, IndexSet):
            return NotImplemented
        merged = _merge_two_sorted(self._intervals, other._intervals)
        return IndexSet._from_normalised(_merge_sorted(merged))

    def __and__(self, other: IndexSet) -> IndexSet:
        if not isinstance(other, IndexSet):
            return NotImplemented
        if _covers(other, self):  # e.g. a Job's indexes & range(0, completions): O(1)
            return self
        if _covers(self, other):
            return other
        result: list[Interval] = []
        a, b = self._intervals, other._intervals
        i = j = 0
        while i < len(a) and j < len(b):
            first = max(a[i][0], b[j][0])
            last = min(a[i][1], b[j][1])
            if first <= last:
                result.append((first, last))
            if a[i][1] < b[j][1]:
                i += 1
            else:
                j += 1
        return IndexSet._from_normalised(tuple(result))

    def __sub__(self, other: IndexSet) -> IndexSet:
        if not isinstance(other, IndexSet):
            return NotImplemented
        if not other or not self or other.max() < self.min() or other.min() > self.max():
            return self
        result: list[Interval] = []
        b = other._intervals
        j = 0
        for first, last in self._intervals:
            # Skip removals that end before this interval starts.
            while j < len(b) and b[j][1] < first:
                j += 1
            current = first
            k = j
            while k < len(b) and b[k][0] <= last:
                if b[k][0] > current:
                    result.append((current, b[k][0] - 1))
                current = max(current, b[k][1] + 1)
                k += 1
            if current <= last:
                result.append((current, last))
        return IndexSet._from_normalised(tuple(result))

    # -- value semantics ----------------------------------------------------------------------------

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, IndexSet):
            return NotImplemented
        return self._intervals == other._intervals

    def __hash__(self) -> int:
        return hash(self._intervals)

    def __str__(self) -> str:
        parts: list[str] = []
        for first, last in self._intervals:
            if first == last:
                parts.append(str(first))
            elif last == first + 1:
                parts.append(f"{first},{last}")
            else:
                parts.append(f"{first}-{last}")
        return ",".join(parts)

    def __repr__(self) -> str:
        return f"IndexSet.parse({str(self)!r})"


def _covers(outer: IndexSet, inner: IndexSet) -> bool:
    """``outer`` is one interval that holds all of ``inner``."""
    spans = outer._intervals
    return len(spans) == 1 and (not inner or (spans[0][0] <= inner.min() and inner.max() <= spans[0][1]))


def _is_normalised(intervals: list[Interval]) -> bool:
    """Sorted, disjoint and non-adjacent (each interval's own first <= last is already checked)."""
    return all(previous[1] + 1 < current[0] for previous, current in itertools.pairwise(intervals))


def _first(interval: Interval) -> int:
    return interval[0]


def _parse_item(item: str, position: int, text: str) -> Interval:
    if _SINGLE.fullmatch(item):
        index = int(item)
        return (index, index)
    match = _RANGE.fullmatch(item)
    if match:
        first, last = int(match.group(1)), int(match.group(2))
        if first <= last:
            return (first, last)
    # Errors only from here on, so the (long) message is built only when needed.
    shown = text if len(text) <= 80 else text[:77] + "..."
    where = f"item {position} ({item!r}) of index string {shown!r}"
    if not item:
        raise ValueError(f"empty {where}: expected an index like '7' or a range like '0-3'")
    if match:
        raise ValueError(
            f"bad {where}: range start {match.group(1)} is greater than its end {match.group(2)}"
        )
    if item.startswith("-"):
        raise ValueError(f"bad {where}: indexes must be non-negative integers")
    raise ValueError(f"bad {where}: expected an index like '7' or a range like '0-3'")


def _merge_sorted(intervals: list[Interval] | tuple[Interval, ...]) -> tuple[Interval, ...]:
    """Merge intervals sorted by start into disjoint, non-adjacent ones."""
    merged: list[Interval] = []
    for first, last in intervals:
        if merged and first <= merged[-1][1] + 1:
            if last > merged[-1][1]:
                merged[-1] = (merged[-1][0], last)
        else:
            merged.append((first, last))
    return tuple(merged)


def _merge_two_sorted(a: tuple[Interval, ...], b: tuple[Interval, ...]) -> list[Interval]:
    """Interleave two start-sorted interval lists into one start-sorted list, in O(len(a) + len(b))."""
    result: list[Interval] = []
    i = j = 0
    while i < len(a) and j < len(b):
        if a[i] <= b[j]:
            result.append(a[i])
            i += 1
        else:
            result.append(b[j])
            j += 1
    result.extend(a[i:])
    result.extend(b[j:])
    return result
