"""The numbers behind the Kueue pages' plots (pure: no I/O, no clock; callers pass ``now``).

Two questions a pipeline's owner asks: *is my task getting slower, is it waiting longer?* and *how full is
the ClusterQueue, how many Workloads wait in it?*

- **Per task** (``task_trend``): the task's recent runs from the operator's results (``RunRecord``), each with
  its run time, its queue wait and an *ideal* run time. **Ideal** = the shortest ``running_seconds`` among
  the window's runs of the same task with the same number of shards (``completions``) that finished every
  shard (``succeeded == completions``): what this task has shown it can do when it is not slowed by
  eviction, retries, partial admission or a crowded cluster. A run's distance from the ideal is what
  queueing and contention cost it; a run that failed shards never sets the ideal (it may have stopped
  early). With one clean run only, that run is its own ideal. Where a result adds up every attempt of a
  task instance (``attempt_figures``), its run time and wait are those totals, so retries show as slower.
- **Per ClusterQueue** (``QueueSampleRing``): samples of the ClusterQueue's ``status`` (quota reserved per
  flavor and resource against its nominal quota, pending / reserving / admitted Workloads), kept in a
  bounded ring per ClusterQueue by whoever reads the ClusterQueues anyway (the queue page).

The field names are those of Kueue's ``ClusterQueueStatus`` in ``v1beta1`` and ``v1beta2`` alike:
``flavorsReservation`` (and ``flavorsUsage``) ``[].resources[].{name,total,borrowed}``, ``pendingWorkloads``,
``reservingWorkloads``, ``admittedWorkloads``; the nominal quota is ``spec.resourceGroups[].flavors[]
.resources[].nominalQuota``.
"""

from __future__ import annotations

import statistics
import threading
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ...kueue.quantity import parse_quantity
from .run_history import RunRecord

RUNS_PER_TASK = 30
"""Runs of one task in its plot: a month of a nightly pipeline."""
COMPARED_RUNS = 5
"""The summary compares the median of the newest this many runs with the this many before them."""


@dataclass(frozen=True)
class TaskRunPoint:
    finished_at: datetime
    run_id: str
    completions: int
    succeeded: int
    running_seconds: float | None
    queued_seconds: float | None
    ideal_seconds: float | None
    """The shortest clean run of the window with the same ``completions`` (module docstring)."""
    evictions: int
    attempts: int | None

    @property
    def over_ideal(self) -> float | None:
        """Run time / ideal: 1.0 at the ideal, 2.0 twice as long."""
        if self.running_seconds is None or not self.ideal_seconds:
            return None
        return self.running_seconds / self.ideal_seconds


@dataclass(frozen=True)
class Comparison:
    """Median run time and wait of the newest ``runs`` runs against the ``runs`` before them."""

    runs: int
    running_now: float | None
    running_before: float | None
    queued_now: float | None
    queued_before: float | None


@dataclass(frozen=True)
class TaskTrend:
    dag_id: str
    task_id: str
    map_index: int
    points: tuple[TaskRunPoint, ...]
    """Oldest first, at most RUNS_PER_TASK."""

    @property
    def newest(self) -> TaskRunPoint | None:
        return self.points[-1] if self.points else None

    def comparison(self, runs: int = COMPARED_RUNS) -> Comparison | None:
        """None with fewer than four runs; with fewer than ``2 * runs``, half of them each side."""
        n = min(runs, len(self.points) // 2)
        if n < 2:
            return None
        now, before = self.points[-n:], self.points[-2 * n : -n]
        return Comparison(
            n,
            _median(p.running_seconds for p in now),
            _median(p.running_seconds for p in before),
            _median(p.queued_seconds for p in now),
            _median(p.queued_seconds for p in before),
        )


def task_trend(
    records: Iterable[RunRecord], dag_id: str, task_id: str, map_index: int, limit: int = RUNS_PER_TASK
) -> TaskTrend:
    """The newest ``limit`` runs of one task instance's task (the same map index), oldest first. Records of
    any other DAG or task are left out, whatever the caller read."""
    mine = (
        sorted(
            (r for r in records if (r.dag_id, r.task_id, r.map_index) == (dag_id, task_id, map_index)),
            key=lambda r: r.finished_at,
        )[-limit:]
        if limit > 0
        else []
    )
    ideal = ideal_seconds(mine)
    points = tuple(
        TaskRunPoint(
            finished_at=r.finished_at,
            run_id=r.run_id,
            completions=r.completions,
            succeeded=r.succeeded,
            running_seconds=r.running_seconds,
            queued_seconds=r.queued_seconds,
            ideal_seconds=ideal.get(r.completions),
            evictions=r.evictions,
            attempts=r.attempts,
        )
        for r in mine
    )
    return TaskTrend(dag_id, task_id, map_index, points)


def ideal_seconds(records: Iterable[RunRecord]) -> dict[int, float]:
    """Per number of shards: the shortest run time of the runs that finished every shard."""
    best: dict[int, float] = {}
    for r in records:
        if r.running_seconds is None or r.running_seconds <= 0 or r.succeeded < r.completions:
            continue
        if r.completions not in best or r.running_seconds < best[r.completions]:
            best[r.completions] = r.running_seconds
    return best


def _median(values: Iterable[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return statistics.median(known) if known else None


# --- ClusterQueues over time -------------------------------------------------------------------------------

SAMPLE_WINDOW_SECONDS = 6 * 3600.0
"""How far back a ClusterQueue's samples go."""
MAX_SAMPLES = 2_000
"""Samples kept per ClusterQueue, whatever the window (a change every 10 s for 5.5 hours)."""
REPEAT_SAMPLE_SECONDS = 60.0
"""While nothing changes, one sample a minute is kept (and the newest read)."""


@dataclass(frozen=True)
class QuotaUse:
    flavor: str
    resource: str
    reserved: float
    """Quota reserved by admitted Workloads (``status.flavorsReservation``), in the resource's base unit."""
    nominal: float | None
    """The ClusterQueue's nominal quota; None when it has none for this flavor and resource."""

    @property
    def percent(self) -> float | None:
        """Reserved as a percentage of nominal (above 100 while borrowing); None without a nominal quota."""
        return 100.0 * self.reserved / self.nominal if self.nominal else None


@dataclass(frozen=True)
class QueueSample:
    at: float
    """Seconds since the epoch."""
    pending: int
    reserving: int
    admitted: int
    quota: tuple[QuotaUse, ...]

    def same_values(self, other: QueueSample) -> bool:
        return (self.pending, self.reserving, self.admitted, self.quota) == (
            other.pending,
            other.reserving,
            other.admitted,
            other.quota,
        )


def queue_sample(cluster_queue: Mapping[str, Any], at: float) -> tuple[str, QueueSample] | None:
    """The ClusterQueue's name and its status now; None for an object without a name."""
    name = (cluster_queue.get("metadata") or {}).get("name")
    if not name:
        return None
    spec, status = (cluster_queue.get(key) or {} for key in ("spec", "status"))
    nominal: dict[tuple[str, str], float] = {}
    for group in spec.get("resourceGroups") or []:
        for flavor in group.get("flavors") or []:
            for res in flavor.get("resources") or []:
                value = _quantity(res.get("nominalQuota"))
                if value is not None:
                    nominal[(str(flavor.get("name")), str(res.get("name")))] = value
    reserved: dict[tuple[str, str], float] = {}
    for flavor in status.get("flavorsReservation") or status.get("flavorsUsage") or []:
        for res in flavor.get("resources") or []:
            reserved[(str(flavor.get("name")), str(res.get("name")))] = _quantity(res.get("total")) or 0.0
    keys = sorted(set(nominal) | set(reserved))
    quota = tuple(QuotaUse(f, r, reserved.get((f, r), 0.0), nominal.get((f, r))) for f, r in keys)
    return str(name), QueueSample(
        at,
        _int(status.get("pendingWorkloads")),
        _int(status.get("reservingWorkloads")),
        _int(status.get("admittedWorkloads")),
        quota,
    )


class QueueSampleRing:
    """Samples per ClusterQueue, bounded in count and age; safe to record from several threads.

    Every read that changes a value is kept; while nothing changes, one sample every ``repeat`` seconds, and
    the newest read (so a flat stretch ends where it was last seen). The readers read at most every 2 s
    (the queue page's stream) or once per page load."""

    def __init__(
        self,
        window: float = SAMPLE_WINDOW_SECONDS,
        max_samples: int = MAX_SAMPLES,
        repeat: float = REPEAT_SAMPLE_SECONDS,
    ) -> None:
        self.window, self.max_samples, self.repeat = window, max_samples, repeat
        self._rings: dict[str, deque[QueueSample]] = {}
        self._latest: dict[str, QueueSample] = {}
        self._lock = threading.Lock()

    def record(self, cluster_queues: Iterable[Mapping[str, Any]], now: float) -> None:
        for cq in cluster_queues:
            found = queue_sample(cq, now)
            if found is not None:
                self._add(*found)

    def _add(self, name: str, sample: QueueSample) -> None:
        with self._lock:
            ring = self._rings.setdefault(name, deque(maxlen=self.max_samples))
            latest = self._latest.get(name)
            if latest is not None and sample.at < latest.at:
                return  # a slower reader's older answer
            last = ring[-1] if ring else None
            if last is None or not sample.same_values(last) or sample.at - last.at >= self.repeat:
                ring.append(sample)
            self._latest[name] = sample
            while ring and ring[0].at < sample.at - self.window:
                ring.popleft()

    def samples(self, name: str, now: float) -> list[QueueSample]:
        """Oldest first, those of the last ``window`` seconds, the newest read last."""
        with self._lock:
            kept = list(self._rings.get(name, ()))
            latest = self._latest.get(name)
        if latest is not None and (not kept or latest.at > kept[-1].at):
            kept.append(latest)
        return [s for s in kept if s.at >= now - self.window]

    def names(self) -> list[str]:
        with self._lock:
            return sorted(self._rings)


def quota_series(samples: Sequence[QueueSample]) -> dict[tuple[str, str], list[tuple[float, float]]]:
    """Per (flavor, resource) with a nominal quota: (time, percent of nominal reserved)."""
    series: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for sample in samples:
        for use in sample.quota:
            if use.percent is not None:
                series.setdefault((use.flavor, use.resource), []).append((sample.at, use.percent))
    return series


def _quantity(value: Any) -> float | None:
    if value is None:
        return None
    try:
        return float(parse_quantity(value))
    except ValueError:
        return None


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0
