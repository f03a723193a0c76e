"""A DAG's nights and one DAG run's Kueue tasks, from results that carry the deadline and forecast keys."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from airflow_kueue_provider.plugins.views.nights import (
    dag_nights,
    dag_run_view,
    deadline_seconds,
    forecast_seconds,
)
from airflow_kueue_provider.plugins.views.run_history import RunRecord
from airflow_kueue_provider.plugins.views.run_outcomes import (
    DeadlineOutcome,
    FinishForecast,
    deadline_sentence,
    forecast_error_sentence,
)

T0 = datetime(2026, 12, 1, 2, 0, tzinfo=UTC)


def _iso(at: datetime) -> str:
    return at.isoformat()


def result(
    night: int,
    queued: float = 60.0,
    running: float = 600.0,
    margin: float | None = 240.0,
    error: float | None = 30.0,
    cost: float = 1.25,
    evictions: int = 0,
) -> dict[str, Any]:
    """One night's result: submitted at 02:00 of day ``night``, ended queued + running later; ``margin``
    before its deadline (negative: late), ``error`` seconds after its forecast finish."""
    submit = T0 + timedelta(days=night)
    end = submit + timedelta(seconds=queued + running)
    value: dict[str, Any] = {
        "cluster_queue": "spot", "namespace": "genomics", "completions": 8, "succeeded": 8, "failed": 0,
        "queued_seconds": queued, "running_seconds": running, "evictions": evictions,
        "estimated_cost_usd": cost, "shard_history": {"nights": ["a", "b"], "shards_learned": 8},
    }  # fmt: skip
    if margin is not None:
        deadline = end + timedelta(seconds=margin)
        value["deadline_outcome"] = {
            "deadline": _iso(deadline), "finished_at": _iso(end), "met": margin >= 0, "seconds": abs(margin),
        }  # fmt: skip
    if error is not None:
        finish = end - timedelta(seconds=error)
        early, late = finish - timedelta(minutes=5), finish + timedelta(minutes=5)
        value["forecast"] = {
            "made_at": _iso(submit), "start": _iso(submit + timedelta(seconds=50)), "finish": _iso(finish),
            "finish_early": _iso(early), "finish_late": _iso(late), "nights": 2,
            "basis": "2 nights of shard history", "actual_finish": _iso(end), "error_seconds": error,
        }  # fmt: skip
    return value


def record(
    night: int, task_id: str = "shards", map_index: int = -1, dag_id: str = "nightly", **kw: Any
) -> RunRecord:
    made = RunRecord.from_result(
        dag_id,
        f"scheduled__{night}",
        task_id,
        map_index,
        T0 + timedelta(days=night, hours=1),
        result(night, **kw),
    )
    assert made is not None
    return made


def test_the_result_keys_are_read_and_older_or_odd_results_still_count() -> None:
    r = record(0, margin=-20.0)
    assert r.deadline is not None and not r.deadline.met and r.deadline.margin_seconds == -20.0
    assert r.forecast is not None and r.forecast.error_seconds == 30.0 and r.forecast.nights == 2
    assert r.learned_nights == 2
    odd = {
        **result(0),
        "deadline_outcome": {"met": "yes"},
        "forecast": "soon",
        "shard_history": {"nights": 3},
    }
    older = {k: v for k, v in result(0).items() if k not in ("deadline_outcome", "forecast", "shard_history")}
    for value in (odd, older):
        plain = RunRecord.from_result("d", "r", "t", -1, T0, value)
        assert plain is not None and plain.completions == 8
        assert (plain.deadline, plain.forecast, plain.learned_nights) == (None, None, None)


def test_the_outcome_sentences() -> None:
    met = DeadlineOutcome(T0, T0, True, 240.0)
    missed = DeadlineOutcome(T0, T0, False, 20.0)
    assert deadline_sentence(met) == "met with 4 min to spare"
    assert deadline_sentence(missed) == "missed by 20 s"
    forecast = FinishForecast(T0, None, T0, None, None, 0, "", T0, 185.0)
    assert forecast_error_sentence(forecast) == "finished 3 min later than forecast"
    assert forecast_error_sentence(FinishForecast(T0, None, T0, None, None, 0, "", None, -20.0)) == (
        "finished 20 s earlier than forecast"
    )
    assert forecast_error_sentence(FinishForecast(T0, None, T0, None, None, 0, "")) is None


def test_the_forecast_and_the_deadline_sit_against_the_run_time_at_their_recorded_gaps() -> None:
    r = record(0, queued=60.0, running=600.0, margin=240.0, error=30.0)
    assert forecast_seconds(r) == 630.0, "the run ended 30 s after its forecast"
    assert deadline_seconds(r) == 900.0, "4 min to spare"
    late = record(0, margin=-20.0)
    assert deadline_seconds(late) == 640.0
    running = RunRecord.from_result(
        "d", "r", "t", -1, T0, {**result(0), "forecast": {**result(0)["forecast"], "error_seconds": None}}
    )
    assert running is not None and forecast_seconds(running) == 630.0, "before the end: finish - made_at"
    older = RunRecord.from_result("d", "r", "t", -1, T0, {**result(0, margin=None, error=None)})
    assert older is not None and (forecast_seconds(older), deadline_seconds(older)) == (None, None)


def test_nights_add_up_map_indexes_per_task_and_keep_the_newest_runs() -> None:
    records = [record(n) for n in range(5)]
    records += [
        record(n, task_id="per_sample", map_index=i, running=100.0 * (i + 1), evictions=i)
        for n in (3, 4)
        for i in range(3)
    ]
    records += [record(n, task_id="per_sample", map_index=3, margin=-20.0) for n in (4,)]
    records.append(record(4, dag_id="other"))
    tasks = dag_nights(records, "nightly", nights=3)
    assert [t.task_id for t in tasks] == ["per_sample", "shards"]
    per_sample, shards = tasks
    assert [n.run_id for n in shards.nights] == ["scheduled__2", "scheduled__3", "scheduled__4"]
    newest = per_sample.nights[-1]
    assert newest.task_instances == 4 and newest.completions == 32
    assert newest.duration_seconds == 660.0, "the slowest map index (index 3: 60 + 600)"
    assert newest.evictions == 3 and newest.cost_usd == 5.0
    assert newest.deadline is not None and not newest.deadline.met, "a missed index misses the night"
    assert newest.deadline_seconds == 400.0, "the tightest: index 0, 60 + 100 s + 4 min (index 3: 640 s)"
    assert newest.learned_nights == 2
    assert dag_nights(records, "nightly", task_id="shards", nights=30)[0].task_id == "shards"
    assert dag_nights(records, "nope") == []


def test_a_dag_run_lists_every_task_instance_with_the_runs_totals() -> None:
    records = [record(4, task_id="per_sample", map_index=i, evictions=1) for i in (2, 0, 1)]
    records += [record(4, margin=-20.0, error=90.0), record(3), record(4, dag_id="other")]
    view = dag_run_view(records, "nightly", "scheduled__4")
    assert [(r.task_id, r.map_index) for r in view.rows] == [
        ("per_sample", 0), ("per_sample", 1), ("per_sample", 2), ("shards", -1),
    ]  # fmt: skip
    t = view.totals
    assert (t.task_instances, t.completions, t.succeeded, t.evictions, t.cost_usd) == (4, 32, 32, 3, 5.0)
    assert (t.deadlines_met, t.deadlines_missed) == (3, 1)
    assert t.worst_deadline is not None and deadline_sentence(t.worst_deadline) == "missed by 20 s"
    assert t.last_forecast_error_seconds is not None
    empty = dag_run_view(records, "nightly", "nope").totals
    assert (empty.task_instances, empty.worst_deadline, empty.cost_usd) == (0, None, None)
