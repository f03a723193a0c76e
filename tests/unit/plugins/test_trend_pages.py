"""The plots on the Kueue pages: what they show, that they show only what the user may read, and that they
cost no request to the cluster beyond the page's own."""

from __future__ import annotations

from collections.abc import Collection
from datetime import UTC, datetime, timedelta
from typing import Any

from fastapi.testclient import TestClient

from airflow_kueue_provider.plugins.app_settings import DashboardSettings
from airflow_kueue_provider.plugins.dashboard_app import create_app
from airflow_kueue_provider.plugins.dashboard_data import TaskInstanceFacts
from airflow_kueue_provider.plugins.trend_pages import IDEAL_SENTENCE, task_trend_html
from airflow_kueue_provider.plugins.views.run_history import RunRecord
from airflow_kueue_provider.plugins.views.run_trends import QueueSampleRing, task_trend

T0 = datetime(2026, 11, 1, 2, 0, tzinfo=UTC)
TASK = {"dag_id": "a", "run_id": "r9", "task_id": "shards", "map_index": "{MAP_INDEX}"}


def _record(dag_id: str, day: int, ran: float, queued: float, task_id: str = "shards") -> RunRecord:
    result = {
        "cluster_queue": "spot", "namespace": "ns", "completions": 10, "succeeded": 10,
        "queued_seconds": queued, "running_seconds": ran,
    }  # fmt: skip
    record = RunRecord.from_result(dag_id, f"r{day}", task_id, -1, T0 + timedelta(days=day), result)
    assert record is not None
    return record


RECORDS = [_record("a", d, 600.0 + 30 * d, 60.0 * d) for d in range(10)] + [
    _record("<b>", d, 5.0, 1.0) for d in range(3)
]


class FakeHook:
    """The cluster as the pages read it: one LocalQueue of ClusterQueue spot; counts the reads."""

    kubernetes_conn_id = "test"

    def __init__(self) -> None:
        self.reads: list[str] = []
        self.pending = 2

    def list_local_queues(self, namespace: str | None) -> list[dict[str, Any]]:
        self.reads.append("localqueues")
        return [
            {"metadata": {"namespace": "ns", "name": "lq"}, "spec": {"clusterQueue": "spot"}, "status": {}}
        ]

    def list_cluster_queues(self) -> list[dict[str, Any]]:
        self.reads.append("clusterqueues")
        quota = [{"name": "spot", "resources": [{"name": "cpu", "nominalQuota": "4"}]}]
        used = [{"name": "spot", "resources": [{"name": "cpu", "total": "3"}]}]
        return [
            {
                "metadata": {"name": "spot"},
                "spec": {"resourceGroups": [{"flavors": quota}]},
                "status": {
                    "pendingWorkloads": self.pending,
                    "admittedWorkloads": 1,
                    "flavorsReservation": used,
                },
            }
        ]

    def task_instance_jobs(self, namespace: str | None, identity: object) -> list[dict[str, Any]]:
        self.reads.append("jobs")
        return []


def _app(hook: FakeHook, **kwargs: Any) -> TestClient:
    kwargs.setdefault("task_instances", lambda *a: TaskInstanceFacts("KueueIndexedJobOperator"))
    app = create_app(
        DashboardSettings(
            lambda: hook,  # type: ignore[arg-type,return-value]
            lambda: ["ns"],
            dependencies=[],
            task_access=[],
            queues_access=[],
            **kwargs,
        )
    )
    return TestClient(app)


def test_the_task_view_plots_the_tasks_runs_against_the_ideal_with_the_numbers() -> None:
    asked: list[tuple[str, str, int]] = []

    def task_runs(dag_id: str, task_id: str, map_index: int) -> list[RunRecord]:
        asked.append((dag_id, task_id, map_index))
        return RECORDS  # a careless reader: other DAGs' results too

    page = _app(FakeHook(), task_runs=task_runs).get("/task", params=TASK)
    assert page.status_code == 200 and asked == [("a", "shards", -1)]
    html = page.text
    assert "has no Kueue Job" in html, "its Jobs are gone; its results are not"
    assert "Recent runs of this task" in html and IDEAL_SENTENCE in html
    assert 'role="img"' in html and "<title id=" in html and "<desc id=" in html
    assert html.count("r9 (2026-11-10 02:00 UTC): ran 14.5 min, ideal 10.0 min, waited 9.0 min") == 2
    assert "ran 14.5 min, 1.4x its ideal of 10.0 min" in html
    assert "&lt;b&gt;" not in html and "<b>" not in html, "another DAG's runs: in no plot, no table"


def test_another_operators_task_reads_no_results() -> None:
    asked: list[object] = []

    def task_runs(*args: object) -> list[RunRecord]:
        asked.append(args)
        return []

    client = _app(
        FakeHook(), task_instances=lambda *a: TaskInstanceFacts("EmptyOperator"), task_runs=task_runs
    )
    page = client.get("/task", params=TASK)
    assert "its operator is EmptyOperator" in page.text and "Recent runs" not in page.text and asked == []


def test_the_queue_pages_run_plot_shows_only_the_dags_the_user_may_read() -> None:
    asked: list[object] = []

    def records(dag_ids: Collection[str] | None) -> list[RunRecord]:
        asked.append(dag_ids)
        return [r for r in RECORDS if dag_ids is None or r.dag_id in dag_ids]

    page = _app(FakeHook(), run_records=records, readable_dags=lambda: {"a"}, queue_samples=QueueSampleRing())
    html = page.get("/queues").text
    assert asked == [{"a"}]
    assert "Recent runs in ClusterQueue spot: run time and queue wait" in html
    assert html.count("a / shards / r9 (2026-11-10 02:00 UTC)") == 2, "its run time and wait points"
    assert "&lt;b&gt;" not in html, "DAG <b> is not readable: none of its runs in any plot"


def test_the_queue_page_samples_the_cluster_queues_it_reads_anyway() -> None:
    hook, ring = FakeHook(), QueueSampleRing()
    client = _app(hook, run_records=lambda d: [], queue_samples=ring)
    client.get("/queues")
    hook.pending = 5
    html = client.get("/queues").text
    assert hook.reads == ["localqueues", "clusterqueues"] * 2, "no read of its own"
    assert [s.pending for s in ring.samples("spot", ring.samples("spot", 0)[-1].at + 1)] == [2, 5]
    assert "ClusterQueue spot over time" in html and "at most the last 6 hours" in html
    assert "ClusterQueue spot: quota reserved, percent of nominal" in html
    assert "ClusterQueue spot: pending and admitted Workloads" in html
    assert "5 pending, 1 admitted; quota reserved spot cpu 75% of nominal" in html
    over_time = client.get("/api/queues").json()["over_time"]
    assert [s["pending"] for s in over_time["spot"]] == [2, 5, 5], "its own read: the newest"
    assert over_time["spot"][-1]["quota"] == [
        {"flavor": "spot", "resource": "cpu", "reserved": 3.0, "nominal": 4.0}
    ]


def test_a_task_without_results_says_so() -> None:
    html = task_trend_html(task_trend([], "a", "shards", -1))
    assert "No finished run of this task has left a Kueue result yet." in html and "<svg" not in html
