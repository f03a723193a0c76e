"""The operator sends a finished task's points through Airflow's Stats, and a failing backend never fails
the task."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_kueue_provider.kueue.identity.airflow_identity import AirflowIdentity
from airflow_kueue_provider.operators import metrics

IDENTITY = AirflowIdentity("nightly", "price", "run-1")


class Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple[str, str, Any, dict[str, str]]] = []

    def incr(self, name: str, count: int = 1, *, tags: dict[str, str]) -> None:
        self.calls.append(("incr", name, count, tags))

    def gauge(self, name: str, value: float, *, tags: dict[str, str]) -> None:
        self.calls.append(("gauge", name, value, tags))

    def timing(self, name: str, ms: float, *, tags: dict[str, str]) -> None:
        self.calls.append(("timing", name, ms, tags))


def test_points_go_through_stats_with_the_tasks_tags(monkeypatch: pytest.MonkeyPatch) -> None:
    sink = Recorder()
    monkeypatch.setattr(metrics, "stats", lambda: sink)
    metrics.send_run_metrics({"queued_seconds": 2.0, "failed": 1}, "failed", IDENTITY, "lq", "Job")
    assert [(kind, name, value) for kind, name, value, _ in sink.calls] == [
        ("incr", "kueue.task.finished", 1),
        ("timing", "kueue.queue_wait", 2000.0),
        ("incr", "kueue.shards.failed", 1),
    ]
    assert sink.calls[0][3] == {
        "dag_id": "nightly",
        "task_id": "price",
        "queue": "lq",
        "kind": "Job",
        "status": "failed",
    }


def test_a_failing_backend_is_logged_not_raised(monkeypatch: pytest.MonkeyPatch, caplog: Any) -> None:
    class Broken(Recorder):
        def incr(self, name: str, count: int = 1, *, tags: dict[str, str]) -> None:
            raise OSError("statsd unreachable")

    monkeypatch.setattr(metrics, "stats", Broken)
    metrics.send_run_metrics({}, "success", IDENTITY, "lq", "Job")
    assert "could not send the run's metrics: statsd unreachable" in caplog.text
