"""The Kueue tab's page without a Job: a plain sentence saying why, never an error, for another operator."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient
from kubernetes.client.rest import ApiException

from airflow_kueue_provider.plugins.app_settings import DashboardSettings
from airflow_kueue_provider.plugins.dashboard_app import create_app
from airflow_kueue_provider.plugins.dashboard_data import TaskInstanceFacts
from airflow_kueue_provider.plugins.dashboard_pages import no_job_message
from airflow_kueue_provider.plugins.kueue_ui import TASK_INSTANCE_HREF, KueueUiPlugin

TASK = {
    "dag_id": "d",
    "run_id": "manual__2026-11-30T02:00:00+00:00",
    "task_id": "t",
    "map_index": "{MAP_INDEX}",
}


class FakeHook:
    """Finds no Job, or answers every call with ``error``."""

    def __init__(self, error: ApiException | None = None) -> None:
        self.error = error

    def task_instance_jobs(self, namespace: str | None, identity: Any) -> list[dict[str, Any]]:
        if self.error is not None:
            raise self.error
        return []


def _client(
    hook: FakeHook, facts: TaskInstanceFacts | None, asked: list[tuple[Any, ...]] | None = None
) -> TestClient:
    def task_instances(*key: Any) -> TaskInstanceFacts | None:
        (asked if asked is not None else []).append(key)
        return facts

    app = create_app(
        DashboardSettings(
            lambda: hook,  # type: ignore[arg-type,return-value]
            lambda: ["ns"],
            dependencies=[],
            task_access=[],
            queues_access=[],
            task_instances=task_instances,
        )
    )
    return TestClient(app)


def test_the_views_hrefs_are_relative_to_airflows_base_url() -> None:
    # The UI's <base href> is Airflow's base URL: "/kueue/..." would miss a deployment under a path.
    hrefs = [view["href"] for view in KueueUiPlugin.external_views]
    assert hrefs == ["kueue/queues", TASK_INSTANCE_HREF] and TASK_INSTANCE_HREF.startswith("kueue/task?")


def test_another_operators_task_says_plainly_that_it_has_no_kueue_job() -> None:
    asked: list[tuple[Any, ...]] = []
    page = _client(FakeHook(), TaskInstanceFacts("BashOperator"), asked).get("/task", params=TASK)
    assert page.status_code == 200
    assert "This task has no Kueue Job: its operator is BashOperator" in page.text
    assert asked == [("d", TASK["run_id"], "t", -1)], "the unfilled {MAP_INDEX} is an unmapped task"


def test_another_operators_task_shows_no_cluster_error() -> None:
    denied = FakeHook(ApiException(status=403, reason="Forbidden"))
    page = _client(denied, TaskInstanceFacts("BashOperator")).get("/task", params=TASK)
    assert page.status_code == 200 and "its operator is BashOperator" in page.text


@pytest.mark.parametrize("facts", [TaskInstanceFacts("KueueIndexedJobOperator"), None])
def test_a_cluster_error_on_a_kueue_task_is_a_readable_page_and_json(facts: TaskInstanceFacts | None) -> None:
    client = _client(FakeHook(ApiException(status=403, reason="Forbidden")), facts)
    page = client.get("/task", params=TASK)
    assert page.status_code == 502 and page.headers["content-type"].startswith("text/html")
    assert "could not read the cluster: the cluster answered 403 Forbidden" in page.text
    api = client.get("/api/task", params=TASK)
    assert api.status_code == 502 and "403 Forbidden" in api.json()["error"]


def test_the_sentence_says_why_there_is_no_job() -> None:
    assert "has no Kueue Job: it has not submitted one yet" in no_job_message(
        TaskInstanceFacts("KueueIndexedJobOperator")
    )
    assert "mapped task with 4 task instances" in no_job_message(TaskInstanceFacts(None, mapped_instances=4))
    assert (
        no_job_message(TaskInstanceFacts(None))
        == "Airflow has no such task instance, so it has no Kueue Job."
    )
    assert "has no Kueue Job" in no_job_message(None)  # Airflow's database could not be read
    page = _client(FakeHook(), TaskInstanceFacts("<b>Op</b>")).get("/task", params=TASK).text
    assert "&lt;b&gt;Op&lt;/b&gt;" in page and "<b>Op" not in page


def test_a_job_failed_only_for_allowed_indexes_reads_as_finished_like_the_task() -> None:
    from airflow_kueue_provider.kueue.job_progress import view_of
    from airflow_kueue_provider.plugins.dashboard_data import _summary

    def job(max_failed: int | None) -> dict[str, Any]:
        return {
            "metadata": {"name": "j", "namespace": "ns", "uid": "u"},
            "spec": {"completions": 6, "completionMode": "Indexed", "maxFailedIndexes": max_failed},
            "status": {
                "completedIndexes": "0-3,5",
                "failedIndexes": "4",
                "conditions": [{"type": "Failed", "status": "True", "reason": "FailedIndexes"}],
            },
        }

    assert _summary(view_of(job(1), None), 1) == "Finished: 5/6 done, 1 failed, within maxFailedIndexes=1"
    assert _summary(view_of(job(0), None), 0) == "Failed: 5/6 done, 1 failed (FailedIndexes)"
