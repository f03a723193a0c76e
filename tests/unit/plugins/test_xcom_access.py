"""What the Kueue pages derive from XComs (the task view's plot of the task's results, the queue page's run
history) needs the DAG's XCom read permission, as Airflow's own XCom routes ask: a user who may read the DAG
and its task instances but not its XComs sees the pages without those parts, and a sentence saying why."""

from __future__ import annotations

from typing import Any

from fastapi import Depends
from fastapi.testclient import TestClient

from airflow_kueue_provider.plugins.app_settings import DashboardSettings
from airflow_kueue_provider.plugins.dashboard_app import create_app
from airflow_kueue_provider.plugins.dashboard_data import TaskInstanceFacts
from airflow_kueue_provider.plugins.route_access import dag_permission, readable_results
from airflow_kueue_provider.plugins.task_routes import HIDDEN_RESULTS
from airflow_kueue_provider.plugins.views.run_history import RunRecord

from .test_trend_pages import RECORDS, TASK, FakeHook

GRANTS = {("alice", "a", "TASK_INSTANCE"), ("alice", "b", "TASK_INSTANCE"), ("alice", "b", "XCOM")}
"""alice reads DAG a's task instances but not its XComs; DAG b's both."""


def authorize(user: Any, dag_id: str, entity: str) -> bool:
    return (user, dag_id, entity) in GRANTS


def _alice() -> str:
    return "alice"


def _client(asked: list[tuple[str, str, int]]) -> TestClient:
    def task_runs(dag_id: str, task_id: str, map_index: int) -> list[RunRecord]:
        asked.append((dag_id, task_id, map_index))
        return [r for r in RECORDS if r.dag_id == dag_id]

    app = create_app(
        DashboardSettings(
            FakeHook,  # type: ignore[arg-type]
            lambda: ["ns"],
            dependencies=[],
            task_access=[],
            queues_access=[],
            task_instances=lambda *a: TaskInstanceFacts("KueueIndexedJobOperator"),
            task_runs=task_runs,
            results_access=dag_permission("XCOM", authorize, Depends(_alice)).dependency,
        )
    )
    return TestClient(app)


def test_a_user_without_the_dags_xcom_permission_sees_the_task_view_without_the_plot_and_why() -> None:
    asked: list[tuple[str, str, int]] = []
    page = _client(asked).get("/task", params=TASK)  # DAG a
    assert page.status_code == 200 and "has no Kueue Job" in page.text, "the Jobs part is hers"
    assert HIDDEN_RESULTS.split(":")[0] in page.text and "XCom read permission" in page.text
    assert "Run time against the ideal" not in page.text and "r9 (" not in page.text
    assert asked == [], "the results were not even read"


def test_a_user_with_the_dags_xcom_permission_sees_the_plot() -> None:
    asked: list[tuple[str, str, int]] = []
    page = _client(asked).get("/task", params={**TASK, "dag_id": "b"})
    assert page.status_code == 200 and asked == [("b", "shards", -1)]
    assert "Recent runs of this task" in page.text and "XCom read permission" not in page.text


def test_the_run_history_keeps_only_the_dags_whose_xcoms_the_user_may_read() -> None:
    grants = {("alice", "a", "XCOM")}
    assert readable_results("alice", ["a", "b"], lambda u, d, e: (u, d, e) in grants) == {"a"}
    assert readable_results("alice", [], authorize) == set()
