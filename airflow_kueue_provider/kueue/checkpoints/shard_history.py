"""How long each shard of a task ran on earlier nights (pure value object, kept in Blob by the history store).

One history per (dag, task, map index), across DAG runs: the shard count, per shard id a learned length (an
exponentially weighted mean over nights, to 0.1 s), the run ids it was learned from (the last
``HISTORY_NIGHTS``) and, per night, how late the forecast's model finished against the run (seconds, the
queue's wait it could not see: ``merge_wait_error``). Nothing else: no names, no outputs, no paths.
Packing and the forecast read it as ``LearnedLengths``.

Merge rules (``merge_night``): a night of another shard count starts over (the old ids mean other work); a
shard's figure from a resumed run (only its tail) never replaces a full one; the same run id merged again
(a retry of the night) is the same night: a shard already counted in it is not counted twice. Bounds: the
nights are capped, a task of more than ``MAX_HISTORY_SHARDS`` keeps no lengths, a length is capped at
``MAX_SHARD_SECONDS``, so the JSON stays under ``MAX_HISTORY_BYTES``. What is read back is checked, and
anything unknown or malformed is dropped (``from_json`` returns None), never acted on.
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from ..errors import KueueProviderError
from ..index_set import IndexSet
from .learned_lengths import LearnedLengths

HISTORY_VERSION = 1
HISTORY_NIGHTS = 14
"""Run ids a history names (the newest); the lengths weigh recent nights most anyway."""
HISTORY_WEIGHT = 0.3
"""A new night's share of a shard's learned length (exponentially weighted mean: older nights fade)."""
MAX_HISTORY_SHARDS = 20_000
"""Above this many shards a history keeps the nights but no lengths (the blob would outgrow its bound)."""
MAX_SHARD_SECONDS = 7 * 24 * 3600.0
"""A figure above a week is taken as a week (keeps each figure, so the blob, bounded)."""
WAIT_ERROR_NIGHTS = 5
"""The newest nights' forecast errors whose median the forecast adds to a wait."""
MAX_WAIT_ERROR_SECONDS = 7 * 24 * 3600.0
"""A night's forecast error beyond a week either way is taken as a week."""
MAX_POD_START_SECONDS = 3600.0
"""A pod's learned cost beside its shards is taken as at most an hour."""
MAX_RUN_ID_CHARS = 250
"""Airflow's run id limit; a longer one is cut."""
MAX_HISTORY_BYTES = 400_000
"""What the JSON of the largest history (``MAX_HISTORY_SHARDS`` shards, every figure at its cap, the
nights at their longest) stays under (tested); a larger blob is not read."""


class HistoryShardCountMismatch(ValueError, KueueProviderError):
    """A shard id outside the night's shard count (the caller mixed up two tasks)."""


def _tenth(seconds: float) -> float:
    return max(0.1, round(min(seconds, MAX_SHARD_SECONDS), 1))


@dataclass(frozen=True)
class ShardHistory:
    """``seconds[i]``: shard ``i``'s learned length (None: never seen); ``partial``: shards known only from a
    resumed run (their figure is the longest tail seen, a lower bound); ``tonight``: shards already counted
    in the last night (a retry of that night does not count them again)."""

    shard_count: int
    seconds: tuple[float | None, ...] = ()
    nights: tuple[str, ...] = ()
    partial: IndexSet = field(default_factory=IndexSet)
    tonight: IndexSet = field(default_factory=IndexSet)
    pod_start: float | None = None
    """A pod's cost beside its shards' lengths (``LearnedLengths.pod_start_seconds``), over nights."""
    from_pods: bool = False
    """The last night's lengths came from pod times: the program wrote no done records (no worker SDK), so
    it runs one shard per index and must not be packed (``LearnedLengths.packable``)."""
    wait_errors: tuple[float | None, ...] = ()
    """Per night (aligned with ``nights``; shorter: the rest None): the forecast model's finish error on that
    night, actual - forecast, of a forecast made while the Job waited for quota."""

    @classmethod
    def empty(cls, shard_count: int) -> ShardHistory:
        keeps = shard_count <= MAX_HISTORY_SHARDS
        return cls(shard_count, (None,) * shard_count if keeps else ())

    @property
    def keeps_lengths(self) -> bool:
        return self.shard_count <= MAX_HISTORY_SHARDS

    def merge_night(
        self,
        run_id: str,
        shard_count: int,
        durations: Mapping[int, float],
        resumed: IndexSet | None = None,
        pod_start: float | None = None,
        from_pods: bool = False,
    ) -> ShardHistory:
        """This history with night ``run_id``'s shard lengths (``resumed``: shards whose figure is a tail)
        and, from a clean attempt, what its pods cost beside them (``pod_start``); ``from_pods``: some of
        them were read from pod times (no done records: the program does not use the SDK)."""
        run_id = run_id[:MAX_RUN_ID_CHARS]
        base = self if shard_count == self.shard_count else ShardHistory.empty(shard_count)
        if run_id in base.nights[:-1]:
            return base  # an older night run again: its figures were counted then
        if pod_start is not None and math.isfinite(pod_start) and pod_start >= 0:
            old = base.pod_start
            cost = min(pod_start, MAX_POD_START_SECONDS)
            base = replace(
                base, pod_start=round(cost if old is None else old + HISTORY_WEIGHT * (cost - old), 1)
            )
        if bad := [i for i in durations if not 0 <= i < shard_count]:
            raise HistoryShardCountMismatch(f"shard ids {bad[:5]} are outside the night's {shard_count}")
        same = bool(base.nights) and base.nights[-1] == run_id
        if durations:  # a retry of the same night that timed some from pods still runs without the SDK
            base = replace(base, from_pods=from_pods or (same and base.from_pods))
        counted = base.tonight if same else IndexSet()
        if not same:
            base = base._with_night(run_id)
        if not base.keeps_lengths:
            return replace(base, tonight=IndexSet())
        tails = resumed or IndexSet()
        seconds, partial, now = list(base.seconds), base.partial, []
        for shard_id, value in durations.items():
            if shard_id in counted or not (isinstance(value, (int, float)) and math.isfinite(value)):
                continue
            now.append(shard_id)
            seconds[shard_id], partial = _merged(
                seconds[shard_id], shard_id, value, shard_id in tails, partial
            )
        return replace(
            base,
            seconds=tuple(seconds),
            partial=partial,
            tonight=counted | IndexSet.from_indexes(now),
        )

    def _with_night(self, run_id: str) -> ShardHistory:
        """This history with ``run_id`` as its newest night (the oldest past ``HISTORY_NIGHTS`` dropped)."""
        errors = _canonical((*self._aligned_errors(), None)[-HISTORY_NIGHTS:])
        return replace(self, nights=(*self.nights, run_id)[-HISTORY_NIGHTS:], wait_errors=errors)

    def _aligned_errors(self) -> tuple[float | None, ...]:
        return (*self.wait_errors, *(None,) * len(self.nights))[: len(self.nights)]

    def merge_wait_error(self, run_id: str, shard_count: int, seconds: float) -> ShardHistory:
        """This history with night ``run_id``'s forecast error (actual - the model's finish, seconds): the
        newest night's replaces what it had (a retry of the night), an older night's is not taken, a new
        night is added; a night of another shard count starts over, as ``merge_night`` does."""
        run_id = run_id[:MAX_RUN_ID_CHARS]
        if not math.isfinite(seconds):
            return self
        base = self if shard_count == self.shard_count else ShardHistory.empty(shard_count)
        if run_id in base.nights[:-1]:
            return base
        if not base.nights or base.nights[-1] != run_id:
            base = replace(base._with_night(run_id), tonight=IndexSet())
        error = round(max(-MAX_WAIT_ERROR_SECONDS, min(MAX_WAIT_ERROR_SECONDS, seconds)), 1)
        return replace(base, wait_errors=(*base._aligned_errors()[:-1], error))

    def wait_bias(self) -> float | None:
        """The forecast's learned correction to a queued Job's wait: the median error of the last
        ``WAIT_ERROR_NIGHTS`` nights that had one (one night's outage does not move it); None before any."""
        errors = [e for e in self._aligned_errors() if e is not None][-WAIT_ERROR_NIGHTS:]
        return round(statistics.median(errors), 1) if errors else None

    def learned(self) -> LearnedLengths | None:
        """What packing and the forecast read; None without any length."""
        known = {i: s for i, s in enumerate(self.seconds) if s is not None}
        if not known or not self.keeps_lengths:
            return None
        return LearnedLengths(
            self.shard_count, known, self.nights, self.pod_start, not self.from_pods, self.wait_bias()
        )

    def to_json(self) -> dict[str, Any]:
        errors = self._aligned_errors()
        return {
            "version": HISTORY_VERSION,
            "shard_count": self.shard_count,
            "nights": list(self.nights),
            "seconds": list(self.seconds),
            "partial": str(self.partial),
            "tonight": str(self.tonight),
            **({"pod_start_seconds": self.pod_start} if self.pod_start is not None else {}),
            **({"from_pods": True} if self.from_pods else {}),
            **({"wait_errors": list(errors)} if any(e is not None for e in errors) else {}),
        }

    @classmethod
    def from_json(cls, data: Any) -> ShardHistory | None:
        """The history in ``data``, or None for anything this version did not write or that breaks a
        bound (it is then ignored, and the next night's record starts it over)."""
        try:
            if len(_compact(data)) > MAX_HISTORY_BYTES:
                return None
            return _parsed(data)
        except (TypeError, ValueError, KeyError, AttributeError):
            return None


def _merged(
    old: float | None, shard_id: int, value: float, resumed: bool, partial: IndexSet
) -> tuple[float, IndexSet]:
    """A shard's new figure and the partial set: a tail never replaces a full figure (a lower bound keeps
    the longest tail); a full figure replaces a lower bound and is averaged into a full one."""
    one = IndexSet.from_indexes([shard_id])
    was_partial = shard_id in partial
    if resumed:
        if old is not None and not was_partial:
            return old, partial
        return _tenth(max(old or 0.0, value)), partial | one
    if old is None or was_partial:
        return _tenth(value), partial - one
    return _tenth(old + HISTORY_WEIGHT * (value - old)), partial


_KEYS = {"version", "shard_count", "nights", "seconds", "partial", "tonight"}
_OPTIONAL_KEYS = {"pod_start_seconds", "from_pods", "wait_errors"}


def _parsed(data: Any) -> ShardHistory | None:
    if not isinstance(data, Mapping) or data.get("version") != HISTORY_VERSION:
        return None
    if not _KEYS <= set(data) <= _KEYS | _OPTIONAL_KEYS:
        return None
    pod_start = data.get("pod_start_seconds")
    if pod_start is not None and not _is_pod_start(pod_start):
        return None
    count = data["shard_count"]
    nights, seconds = data["nights"], data["seconds"]
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        return None
    if not isinstance(nights, list) or len(nights) > HISTORY_NIGHTS:
        return None
    if not all(isinstance(n, str) and 0 < len(n) <= MAX_RUN_ID_CHARS for n in nights):
        return None
    expected = count if count <= MAX_HISTORY_SHARDS else 0
    if not isinstance(seconds, list) or len(seconds) != expected or not all(map(_is_figure, seconds)):
        return None
    if not (isinstance(data["partial"], str) and isinstance(data["tonight"], str)):
        return None
    partial, tonight = IndexSet.parse(data["partial"]), IndexSet.parse(data["tonight"])
    if any(s and not (s.min() >= 0 and s.max() < count) for s in (partial, tonight)):
        return None
    values = tuple(None if s is None else float(s) for s in seconds)
    start = float(pod_start) if pod_start is not None else None
    from_pods = data.get("from_pods", False)
    if not isinstance(from_pods, bool):
        return None
    errors = data.get("wait_errors", [])
    if not isinstance(errors, list) or len(errors) != (len(nights) if errors else 0):
        return None
    if not all(e is None or _is_wait_error(e) for e in errors):
        return None
    waits = _canonical(tuple(None if e is None else float(e) for e in errors))
    return ShardHistory(count, values, tuple(nights), partial, tonight, start, from_pods, waits)


def _canonical(errors: tuple[float | None, ...]) -> tuple[float | None, ...]:
    """No night's error known is kept as none at all (so equal histories compare equal)."""
    return errors if any(e is not None for e in errors) else ()


def _is_wait_error(value: Any) -> bool:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    return math.isfinite(value) and abs(value) <= MAX_WAIT_ERROR_SECONDS


def _is_pod_start(value: Any) -> bool:
    """0 counts: pods whose running time their shards' lengths fill (``start_cost_of``) cost nothing more."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    return 0 <= value <= MAX_POD_START_SECONDS


def _is_figure(value: Any) -> bool:
    if value is None:
        return True
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    return 0 < value <= MAX_SHARD_SECONDS


def _compact(data: Any) -> str:
    """JSON as the Blob hook writes it (compact): what the size bound is of."""
    return json.dumps(data, separators=(",", ":"), sort_keys=True)


def history_bytes(history: ShardHistory) -> int:
    """The size of the history's blob."""
    return len(_compact(history.to_json()))
