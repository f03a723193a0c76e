"""A finished task's result as metric points: names, values and tags (docs/metrics.md)."""

from __future__ import annotations

from airflow_kueue_provider.kueue.figures.run_metrics import MetricPoint, eviction_causes, run_metrics

TAGS = {"dag_id": "nightly", "task_id": "price", "queue": "lq", "kind": "Job"}
RESULT = {
    "namespace": "risk",
    "cluster_queue": "cq-risk",
    "queued_seconds": 12.5,
    "running_seconds": 300,
    "eviction_causes": "Preempted/InCohortFairSharing: 2, PodsReadyTimeout: 1",
    "failed": 3,
    "retried_shards": 5,
    "estimated_cost_usd": 0.42,
    "deadline": "2026-12-03T07:00:00+00:00",
    "eta_history": [{"eta": "2026-12-03T06:30:00+00:00"}, {"eta": "2026-12-03T06:50:00+00:00"}],
}


def test_a_result_becomes_the_documented_points() -> None:
    points = {(p.kind, p.name, p.tags.get("cause")): p for p in run_metrics(RESULT, "success", TAGS)}
    tags = {**TAGS, "status": "success", "namespace": "risk", "cluster_queue": "cq-risk"}
    assert points[("incr", "kueue.task.finished", None)] == MetricPoint(
        "incr", "kueue.task.finished", 1, tags
    )
    assert points[("timing", "kueue.queue_wait", None)].value == 12_500
    assert points[("timing", "kueue.run_time", None)].value == 300_000
    assert points[("incr", "kueue.evictions", "Preempted/InCohortFairSharing")].value == 2
    assert points[("incr", "kueue.evictions", "PodsReadyTimeout")].value == 1
    assert points[("incr", "kueue.preemptions", "Preempted/InCohortFairSharing")].value == 2
    assert ("incr", "kueue.preemptions", "PodsReadyTimeout") not in points
    assert points[("incr", "kueue.shards.failed", None)].value == 3
    assert points[("incr", "kueue.shards.retried", None)].value == 5
    assert points[("gauge", "kueue.cost_usd", None)].value == 0.42
    assert points[("gauge", "kueue.deadline.slack_seconds", None)].value == 600, "from the last ETA"


def test_what_is_unknown_or_zero_sends_nothing() -> None:
    points = run_metrics({"queued_seconds": None, "failed": 0, "eviction_causes": None}, "failed", TAGS)
    assert [p.name for p in points] == ["kueue.task.finished"]
    assert points[0].tags["status"] == "failed"


def test_eviction_causes_read_both_forms() -> None:
    assert eviction_causes({"Preempted/InClusterQueue": 1}) == {"Preempted/InClusterQueue": 1}
    assert eviction_causes("A/b: 1, C: 2, A/b: 1") == {"A/b": 2, "C": 2}
    assert eviction_causes("garbage") == {}
