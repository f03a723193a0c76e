"""Recent runs per ClusterQueue, from the operator's results."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from airflow_kueue_provider.plugins.views.run_history import RunRecord, queue_histories

T0 = datetime(2026, 12, 1, 2, 0, tzinfo=UTC)


def _result(queue: str, queued: float, evictions: int = 0, cost: float | None = 1.5) -> dict[str, object]:
    return {
        "job_name": "j", "namespace": "genomics", "workload_name": "w", "cluster_queue": queue,
        "completions": 10, "completed_indexes": "0-9", "failed_indexes": "", "succeeded": 10, "failed": 0,
        "queued_seconds": queued, "running_seconds": 60.0, "evictions": evictions, "estimated_cost_usd": cost,
    }  # fmt: skip


def test_each_queue_keeps_its_newest_runs_with_their_wait_evictions_and_cost() -> None:
    records = [
        RunRecord.from_result(
            "nightly", f"r{i}", "shards", -1, T0 + timedelta(days=i), _result("spot", 10.0 * i, i % 2)
        )
        for i in range(12)
    ] + [RunRecord.from_result("risk", "r", "mc", 3, T0, _result("on-demand", 5.0, cost=None))]
    spot, on_demand = sorted(
        queue_histories([r for r in records if r]), key=lambda h: h.cluster_queue != "spot"
    )
    assert spot.cluster_queue == "spot" and [r.run_id for r in spot.runs] == [
        f"r{i}" for i in range(11, 1, -1)
    ]
    assert spot.median_queued_seconds == 65.0 and spot.evictions == 5 and spot.cost_usd == 15.0
    assert on_demand.runs[0].map_index == 3 and on_demand.cost_usd is None


def test_what_is_not_one_of_our_results_is_left_out() -> None:
    for value in (None, "text", [1], {"cluster_queue": "q"}, {**_result("q", 1.0), "completions": "x"}):
        assert RunRecord.from_result("d", "r", "t", -1, T0, value) is None
    assert RunRecord.from_result("d", "r", "t", -1, T0, {**_result("q", 1.0), "cluster_queue": None}) is None


def test_newer_result_keys_are_read_defensively() -> None:
    """``admitted_parallelism`` and ``attempt_figures`` (the attempts the totals add up) when present."""
    newer = {**_result("q", 1.0), "admitted_parallelism": 4, "attempt_figures": [{}, {}]}
    record = RunRecord.from_result("d", "r", "t", -1, T0, newer)
    assert record is not None and (record.admitted_parallelism, record.attempts) == (4, 2)
    odd = {**_result("q", 1.0), "admitted_parallelism": "4", "attempt_figures": "two"}
    record = RunRecord.from_result("d", "r", "t", -1, T0, odd)
    assert record is not None and (record.admitted_parallelism, record.attempts) == (None, None)
    older = RunRecord.from_result("d", "r", "t", -1, T0, _result("q", 1.0))
    assert older is not None and (older.admitted_parallelism, older.attempts) == (None, None)
