"""A DAG's nights and one DAG run's Kueue tasks, from the operator's results (pure: no I/O, no clock).

- **Nights** (``dag_nights``): per Kueue task of a DAG, one entry per DAG run (a *night*) with a result, its
  map indexes added up: the run time from submit (queue wait + running; the slowest map index's), the
  forecast made at submit and the deadline, both as seconds from submit too, the queue wait, the cost and
  the evictions. The forecast and the deadline are placed against the run's own duration, so the plot's gaps
  are the recorded figures: deadline = duration + the margin the result recorded (``deadline_outcome``), and
  forecast = duration - its recorded error (``forecast.error_seconds``; before the run ended, its forecast
  finish - the time it was made).
- **A DAG run** (``dag_run_view``): every Kueue task instance of one DAG run (one row per map index) and
  the run's totals: cost, shards, evictions, deadlines met and missed, the forecast error of the task
  instance that finished last.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

from .run_history import RunRecord
from .run_outcomes import DeadlineOutcome

NIGHTS = 30
"""DAG runs on the nights page unless asked otherwise: a month of a nightly pipeline."""
MOST_NIGHTS = 90
"""The most DAG runs the page reads (a page asks with ``?nights=``)."""


def duration_seconds(record: RunRecord) -> float | None:
    """Queue wait + running (the result's totals over its attempts); None when neither is known."""
    if record.queued_seconds is None and record.running_seconds is None:
        return None
    return (record.queued_seconds or 0.0) + (record.running_seconds or 0.0)


def forecast_seconds(record: RunRecord) -> float | None:
    """The forecast, as seconds from submit, placed against the run's duration (module docstring)."""
    forecast, duration = record.forecast, duration_seconds(record)
    if forecast is None:
        return None
    if forecast.error_seconds is not None and duration is not None:
        return max(duration - forecast.error_seconds, 0.0)
    return max(forecast.seconds_from_submit, 0.0)


def deadline_seconds(record: RunRecord) -> float | None:
    """The deadline, as seconds from submit: the duration + the recorded margin (negative when missed)."""
    duration = duration_seconds(record)
    if record.deadline is None or duration is None:
        return None
    return max(duration + record.deadline.margin_seconds, 0.0)


@dataclass(frozen=True)
class TaskNight:
    """One Kueue task in one DAG run, its map indexes added up."""

    run_id: str
    finished_at: datetime
    """When its last result was written."""
    task_instances: int
    duration_seconds: float | None
    """The slowest map index's queue wait + running."""
    queued_seconds: float | None
    """The longest queue wait of its map indexes."""
    forecast_seconds: float | None
    """The latest forecast finish of its map indexes, as seconds from submit."""
    deadline_seconds: float | None
    """The tightest deadline of its map indexes, as seconds from submit."""
    deadline: DeadlineOutcome | None
    """The outcome with the least margin (a missed one when any was missed)."""
    forecast_error_seconds: float | None
    """The slowest map index's forecast error (late > 0)."""
    cost_usd: float | None
    evictions: int
    completions: int
    succeeded: int
    learned_nights: int | None


@dataclass(frozen=True)
class TaskNights:
    dag_id: str
    task_id: str
    nights: tuple[TaskNight, ...]
    """Oldest first."""


def task_night(run_id: str, records: Sequence[RunRecord]) -> TaskNight:
    """``records``: the results of one task in one DAG run (one per map index, at least one)."""
    slowest = max(records, key=lambda r: duration_seconds(r) or 0.0)
    outcomes = [r.deadline for r in records if r.deadline is not None]
    deadlines = [s for r in records if (s := deadline_seconds(r)) is not None]
    forecasts = [s for r in records if (s := forecast_seconds(r)) is not None]
    waits = [r.queued_seconds for r in records if r.queued_seconds is not None]
    costs = [r.cost_usd for r in records if r.cost_usd is not None]
    learned = [r.learned_nights for r in records if r.learned_nights is not None]
    return TaskNight(
        run_id=run_id,
        finished_at=max(r.finished_at for r in records),
        task_instances=len(records),
        duration_seconds=duration_seconds(slowest),
        queued_seconds=max(waits) if waits else None,
        forecast_seconds=max(forecasts) if forecasts else None,
        deadline_seconds=min(deadlines) if deadlines else None,
        deadline=min(outcomes, key=lambda o: o.margin_seconds) if outcomes else None,
        forecast_error_seconds=slowest.forecast.error_seconds if slowest.forecast else None,
        cost_usd=sum(costs) if costs else None,
        evictions=sum(r.evictions for r in records),
        completions=sum(r.completions for r in records),
        succeeded=sum(r.succeeded for r in records),
        learned_nights=max(learned) if learned else None,
    )


def dag_nights(
    records: Iterable[RunRecord], dag_id: str, task_id: str | None = None, nights: int = NIGHTS
) -> list[TaskNights]:
    """Per Kueue task of ``dag_id`` (``task_id``: that one only), its newest ``nights`` DAG runs with a
    result, oldest first; tasks by name. Records of any other DAG are left out, whatever the caller read."""
    by_task: dict[str, dict[str, list[RunRecord]]] = {}
    for r in records:
        if r.dag_id == dag_id and (task_id is None or r.task_id == task_id):
            by_task.setdefault(r.task_id, {}).setdefault(r.run_id, []).append(r)
    found = []
    for task, runs in sorted(by_task.items()):
        made = sorted((task_night(run, rs) for run, rs in runs.items()), key=lambda n: n.finished_at)
        found.append(TaskNights(dag_id, task, tuple(made[-nights:] if nights > 0 else ())))
    return found


@dataclass(frozen=True)
class DagRunTotals:
    task_instances: int
    cost_usd: float | None
    completions: int
    succeeded: int
    failed: int
    evictions: int
    deadlines_met: int
    deadlines_missed: int
    worst_deadline: DeadlineOutcome | None
    """The outcome with the least margin (the latest miss, or the closest call)."""
    last_forecast_error_seconds: float | None
    """The forecast error of the task instance that finished last (late > 0); None without forecasts."""


@dataclass(frozen=True)
class DagRunView:
    dag_id: str
    run_id: str
    rows: tuple[RunRecord, ...]
    """By task id, then map index."""
    totals: DagRunTotals


def dag_run_view(records: Iterable[RunRecord], dag_id: str, run_id: str) -> DagRunView:
    """Every Kueue task instance of one DAG run, and its totals; records of other runs are left out."""
    rows = tuple(
        sorted(
            (r for r in records if (r.dag_id, r.run_id) == (dag_id, run_id)),
            key=lambda r: (r.task_id, r.map_index),
        )
    )
    outcomes = [r.deadline for r in rows if r.deadline is not None]
    costs = [r.cost_usd for r in rows if r.cost_usd is not None]
    ended = [r.forecast for r in rows if r.forecast is not None and r.forecast.error_seconds is not None]
    last = max(ended, key=lambda f: f.actual_finish or f.finish) if ended else None
    totals = DagRunTotals(
        task_instances=len(rows),
        cost_usd=sum(costs) if costs else None,
        completions=sum(r.completions for r in rows),
        succeeded=sum(r.succeeded for r in rows),
        failed=sum(r.failed for r in rows),
        evictions=sum(r.evictions for r in rows),
        deadlines_met=sum(o.met for o in outcomes),
        deadlines_missed=sum(not o.met for o in outcomes),
        worst_deadline=min(outcomes, key=lambda o: o.margin_seconds) if outcomes else None,
        last_forecast_error_seconds=None if last is None else last.error_seconds,
    )
    return DagRunView(dag_id, run_id, rows, totals)
