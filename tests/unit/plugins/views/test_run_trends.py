"""The numbers behind the plots: a task's runs against its ideal, and ClusterQueue samples over time."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from airflow_kueue_provider.plugins.views.run_history import RunRecord
from airflow_kueue_provider.plugins.views.run_trends import (
    QueueSampleRing,
    ideal_seconds,
    queue_sample,
    quota_series,
    task_trend,
)

T0 = datetime(2026, 12, 1, 2, 0, tzinfo=UTC)


def _run(
    day: int,
    ran: float | None,
    queued: float | None = 10.0,
    completions: int = 10,
    succeeded: int | None = None,
    dag: str = "nightly",
    task: str = "shards",
    map_index: int = -1,
) -> RunRecord:
    result = {
        "cluster_queue": "spot", "namespace": "ns", "completions": completions,
        "succeeded": completions if succeeded is None else succeeded, "failed": 0,
        "queued_seconds": queued, "running_seconds": ran, "evictions": 0,
    }  # fmt: skip
    record = RunRecord.from_result(dag, f"r{day}", task, map_index, T0 + timedelta(days=day), result)
    assert record is not None
    return record


def test_the_ideal_is_the_fastest_clean_run_with_the_same_number_of_shards() -> None:
    runs = [
        _run(0, 300.0),
        _run(1, 200.0, succeeded=7),  # failed shards: may have stopped early, never the ideal
        _run(2, 250.0),
        _run(3, 90.0, completions=4),  # fewer shards: an ideal of its own
        _run(4, None),
    ]
    assert ideal_seconds(runs) == {10: 250.0, 4: 90.0}
    trend = task_trend(runs, "nightly", "shards", -1)
    assert [p.ideal_seconds for p in trend.points] == [250.0, 250.0, 250.0, 90.0, 250.0]
    assert trend.points[0].over_ideal == 1.2 and trend.points[4].over_ideal is None
    assert [p.run_id for p in trend.points] == ["r0", "r1", "r2", "r3", "r4"], "oldest first"


def test_a_trend_holds_only_its_own_tasks_runs_the_newest_ones() -> None:
    runs = [_run(day, 100.0 + day) for day in range(40)] + [
        _run(50, 1.0, dag="other"),
        _run(51, 1.0, task="report"),
        _run(52, 1.0, map_index=3),
    ]
    trend = task_trend(runs, "nightly", "shards", -1, limit=30)
    assert [p.run_id for p in trend.points] == [f"r{d}" for d in range(10, 40)]
    assert {p.ideal_seconds for p in trend.points} == {110.0}, "the window's fastest, not an older one's"
    assert task_trend(runs, "other", "shards", -1).points[0].running_seconds == 1.0
    assert task_trend(runs, "nobody", "shards", -1).points == ()


def test_the_comparison_takes_the_medians_of_the_newest_runs_and_those_before() -> None:
    runs = [_run(d, 100.0 * (1 + d // 5), queued=10.0 * d) for d in range(10)]
    comparison = task_trend(runs, "nightly", "shards", -1).comparison()
    assert comparison is not None and comparison.runs == 5
    assert (comparison.running_now, comparison.running_before) == (200.0, 100.0)
    assert (comparison.queued_now, comparison.queued_before) == (70.0, 20.0)
    assert task_trend(runs[:3], "nightly", "shards", -1).comparison() is None
    short = task_trend(runs[:6], "nightly", "shards", -1).comparison()
    assert short is not None and short.runs == 3


def _cq(pending: int, cpu: str, name: str = "spot", usage_key: str = "flavorsReservation") -> dict[str, Any]:
    """A ClusterQueue as Kueue's v1beta1 and v1beta2 both write it."""
    return {
        "metadata": {"name": name},
        "spec": {
            "resourceGroups": [
                {
                    "coveredResources": ["cpu", "memory"],
                    "flavors": [
                        {
                            "name": "spot",
                            "resources": [
                                {"name": "cpu", "nominalQuota": "8"},
                                {"name": "memory", "nominalQuota": "32Gi"},
                            ],
                        }
                    ],
                }
            ]
        },
        "status": {
            "pendingWorkloads": pending,
            "reservingWorkloads": 2,
            "admittedWorkloads": 1,
            usage_key: [
                {"name": "spot", "resources": [{"name": "cpu", "total": cpu, "borrowed": "0"}]},
                {"name": "gpu", "resources": [{"name": "nvidia.com/gpu", "total": "1"}]},
            ],
        },
    }


def test_a_sample_reads_the_workload_counts_and_quota_against_nominal() -> None:
    found = queue_sample(_cq(3, "10"), 100.0)
    assert found is not None
    name, sample = found
    assert name == "spot" and (sample.pending, sample.reserving, sample.admitted) == (3, 2, 1)
    by_key = {(u.flavor, u.resource): u for u in sample.quota}
    assert by_key[("spot", "cpu")].percent == 125.0, "borrowing: above 100"
    assert by_key[("spot", "memory")].percent == 0.0 and by_key[("spot", "memory")].nominal == 32 * 2**30
    assert by_key[("gpu", "nvidia.com/gpu")].percent is None, "no nominal quota: no percentage"
    flavors_usage = queue_sample(_cq(0, "500m", usage_key="flavorsUsage"), 1.0)
    assert flavors_usage is not None and flavors_usage[1].quota[1].reserved == 0.5
    assert queue_sample({"metadata": {}}, 1.0) is None
    bare = queue_sample({"metadata": {"name": "new"}}, 1.0)  # no status yet
    assert bare is not None and (bare[1].pending, bare[1].admitted, bare[1].quota) == (0, 0, ())


def test_the_ring_keeps_changes_a_sample_a_minute_of_a_flat_stretch_and_its_window() -> None:
    ring = QueueSampleRing(window=3600, max_samples=1000, repeat=60)
    for t in range(0, 300, 10):  # 5 minutes of the same values, read every 10 s
        ring.record([_cq(1, "4")], float(t))
    flat = ring.samples("spot", 300.0)
    assert [s.at for s in flat] == [0.0, 60.0, 120.0, 180.0, 240.0, 290.0], (
        "a minute apart, ends at the newest"
    )
    ring.record([_cq(5, "8")], 295.0)
    ring.record([_cq(5, "8")], 280.0)  # an older answer from a slower reader: dropped
    assert [(s.at, s.pending) for s in ring.samples("spot", 300.0)[-2:]] == [(240.0, 1), (295.0, 5)]
    ring.record([_cq(2, "8")], 4000.0)
    assert [s.at for s in ring.samples("spot", 4000.0)] == [4000.0], "older than the window: gone"
    assert ring.names() == ["spot"]
    series = quota_series(ring.samples("spot", 4000.0))
    assert series == {("spot", "cpu"): [(4000.0, 100.0)], ("spot", "memory"): [(4000.0, 0.0)]}


def test_the_ring_is_bounded_per_cluster_queue() -> None:
    ring = QueueSampleRing(window=1e9, max_samples=50, repeat=60)
    for t in range(200):
        ring.record([_cq(t % 7, "4"), _cq(t % 3, "1", name="on-demand")], float(t))
    assert len(ring.samples("spot", 200.0)) == 50 and len(ring.samples("on-demand", 200.0)) == 50
    assert ring.samples("spot", 200.0)[-1].at == 199.0
