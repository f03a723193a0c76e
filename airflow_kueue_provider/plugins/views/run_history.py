"""Recent runs per ClusterQueue, from the results the operator returned (pure).

What KueueViz does not keep: how long the last runs waited in a queue, how long they ran, how often they
were evicted and what they cost. The results (the task's XCom ``return_value``) outlive the Jobs and their
Workloads, which the cluster deletes a day after they finish.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from .run_outcomes import DeadlineOutcome, FinishForecast, learned_nights

RUNS_PER_QUEUE = 10


@dataclass(frozen=True)
class RunRecord:
    """One task instance's finished Job, as its result tells it."""

    dag_id: str
    run_id: str
    task_id: str
    map_index: int
    finished_at: datetime
    namespace: str
    cluster_queue: str
    completions: int
    succeeded: int
    failed: int
    queued_seconds: float | None
    running_seconds: float | None
    evictions: int
    cost_usd: float | None
    admitted_parallelism: int | None = None
    """Pods Kueue admitted the Job with (below its parallelism after a partial admission); None when the
    result does not say (a JobSet's, or an older result)."""
    attempts: int | None = None
    """How many attempts the result's figures add up (the length of its ``attempt_figures``, when it has
    them: ``running_seconds``, ``queued_seconds`` and the cost are then totals over every attempt)."""
    deadline: DeadlineOutcome | None = None
    """The result's ``deadline_outcome``: None without a deadline, or in an older result."""
    forecast: FinishForecast | None = None
    """The result's ``forecast`` made at submit (with its error once the run ended); None without."""
    learned_nights: int | None = None
    """How many earlier nights the shard packing learned from (``shard_history``); None without history."""

    @classmethod
    def from_result(
        cls, dag_id: str, run_id: str, task_id: str, map_index: int, finished_at: datetime, result: Any
    ) -> RunRecord | None:
        """None for anything that is not one of this operator's results (another shape, or no queue)."""
        if not isinstance(result, Mapping) or not result.get("cluster_queue") or "completions" not in result:
            return None
        try:
            return cls(
                dag_id=dag_id,
                run_id=run_id,
                task_id=task_id,
                map_index=map_index,
                finished_at=finished_at,
                namespace=str(result.get("namespace") or ""),
                cluster_queue=str(result["cluster_queue"]),
                completions=int(result["completions"]),
                succeeded=int(result.get("succeeded") or 0),
                failed=int(result.get("failed") or 0),
                queued_seconds=_number(result.get("queued_seconds")),
                running_seconds=_number(result.get("running_seconds")),
                evictions=int(result.get("evictions") or 0),
                cost_usd=_number(result.get("estimated_cost_usd")),
                admitted_parallelism=_count(result.get("admitted_parallelism")),
                attempts=len(figures) if isinstance(figures := result.get("attempt_figures"), list) else None,
                deadline=DeadlineOutcome.read(result.get("deadline_outcome")),
                forecast=FinishForecast.read(result.get("forecast")),
                learned_nights=learned_nights(result.get("shard_history")),
            )
        except (TypeError, ValueError):
            return None


@dataclass(frozen=True)
class QueueHistory:
    cluster_queue: str
    runs: tuple[RunRecord, ...]
    """Newest first, at most RUNS_PER_QUEUE."""

    @property
    def median_queued_seconds(self) -> float | None:
        waits = [r.queued_seconds for r in self.runs if r.queued_seconds is not None]
        return statistics.median(waits) if waits else None

    @property
    def evictions(self) -> int:
        return sum(r.evictions for r in self.runs)

    @property
    def cost_usd(self) -> float | None:
        costs = [r.cost_usd for r in self.runs if r.cost_usd is not None]
        return round(sum(costs), 4) if costs else None


def queue_histories(records: Iterable[RunRecord], per_queue: int = RUNS_PER_QUEUE) -> list[QueueHistory]:
    """The newest ``per_queue`` runs of each ClusterQueue, queues by name."""
    by_queue: dict[str, list[RunRecord]] = {}
    for record in sorted(records, key=lambda r: r.finished_at, reverse=True):
        runs = by_queue.setdefault(record.cluster_queue, [])
        if len(runs) < per_queue:
            runs.append(record)
    return [QueueHistory(queue, tuple(runs)) for queue, runs in sorted(by_queue.items())]


def _number(value: Any) -> float | None:
    return None if value is None else float(value)


def _count(value: Any) -> int | None:
    """A positive count, None for anything else (read defensively: the result's keys grow over releases)."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None
