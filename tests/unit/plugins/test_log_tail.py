"""The on-demand log tail of one index: only for a user Airflow lets read the DAG's task logs, only of the
task instance's own Jobs, one index's newest pod, bounded."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import pytest
from fastapi import Depends
from fastapi.testclient import TestClient

from airflow_kueue_provider.plugins.app_settings import DashboardSettings
from airflow_kueue_provider.plugins.dashboard_app import create_app
from airflow_kueue_provider.plugins.log_routes import LOG_TAIL_BYTES, LOG_TAIL_LINES
from airflow_kueue_provider.plugins.route_access import dag_access

QUERY = {"dag_id": "a", "run_id": "r", "task_id": "t", "map_index": "{MAP_INDEX}", "job": "job-1", "index": 3}


class OneJob:
    """The task instance's one Job (4 indexes); every index but 2 has a pod with a log."""

    kubernetes_conn_id = "conn"

    def __init__(self) -> None:
        self.tails: list[tuple[str, str, int, int, int]] = []
        self.identities: list[Any] = []

    def task_instance_jobs(self, namespace: str | None, identity: Any) -> list[dict[str, Any]]:
        self.identities.append(identity)
        return [
            {"metadata": {"name": "job-1", "namespace": "team-a", "uid": "uid-1"}, "spec": {"completions": 4}}
        ]

    def index_log_tail(
        self, namespace: str, job: str, index: int, lines: int, limit_bytes: int, job_uid: str | None = None
    ) -> tuple[str, str] | None:
        assert job_uid == "uid-1", "the log is read from that very Job's pods"
        self.tails.append((namespace, job, index, lines, limit_bytes))
        return None if index == 2 else (f"{job}-{index}-x", "<script>alert(1)</script>\nTraceback ...\n")


def _client(hook: OneJob, asked: list[tuple[str, str]] | None = None) -> TestClient:
    def authorize(user: Any, dag_id: str, entity: str) -> bool:
        (asked if asked is not None else []).append((dag_id, entity))
        return dag_id == "a"

    app = create_app(
        DashboardSettings(
            lambda: hook,  # type: ignore[arg-type,return-value]
            lambda: ["team-a"],
            dependencies=[],
            task_access=[],
            queues_access=[],
            log_access=[dag_access("TASK_LOGS", authorize, user=Depends(lambda: "alice"))],
        )
    )
    return TestClient(app)


def test_the_tail_of_one_index_of_the_task_instances_job_is_bounded_and_returned_as_data() -> None:
    hook, asked = OneJob(), []
    answer = _client(hook, asked).get("/api/task/log", params=QUERY)
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"].startswith("application/json"), "data, never HTML: the page"
    body = answer.json()  # sets it as text
    assert body["pod"] == "job-1-3-x" and body["log"].startswith("<script>") and body["index"] == 3
    assert hook.tails == [("team-a", "job-1", 3, LOG_TAIL_LINES, LOG_TAIL_BYTES)]
    assert asked == [("a", "TASK_LOGS")], "the DAG's task logs permission, not only its task instances"
    (identity,) = hook.identities
    assert (identity.dag_id, identity.task_id, identity.run_id, identity.map_index) == ("a", "t", "r", -1)


def test_a_user_who_may_not_read_the_dags_logs_gets_403_and_nothing_is_read() -> None:
    hook = OneJob()
    answer = _client(hook).get("/api/task/log", params={**QUERY, "dag_id": "b"})
    assert answer.status_code == 403 and "the task logs of DAG" in answer.text
    assert hook.tails == [] and hook.identities == []


def test_a_job_that_is_not_the_task_instances_own_is_404_and_no_pod_is_read() -> None:
    hook = OneJob()
    answer = _client(hook).get("/api/task/log", params={**QUERY, "job": "another-teams-job"})
    assert answer.status_code == 404 and "has no Job 'another-teams-job'" in answer.text
    assert hook.tails == []


@pytest.mark.parametrize("index", ["4", "-1", "x"])
def test_an_index_outside_the_job_is_refused_with_the_range(index: str) -> None:
    hook = OneJob()
    answer = _client(hook).get("/api/task/log", params={**QUERY, "index": index})
    assert answer.status_code == 422, answer.text
    if index == "4":
        assert "indexes 0-3" in answer.text
    assert hook.tails == []


def test_an_index_without_a_pod_says_so() -> None:
    answer = _client(OneJob()).get("/api/task/log", params={**QUERY, "index": 2})
    assert answer.status_code == 200 and answer.json()["pod"] is None
    assert "has no pod now" in answer.json()["log"]


def test_each_job_of_the_task_page_has_a_log_tail_form_for_its_own_job() -> None:
    from html.parser import HTMLParser

    from airflow_kueue_provider.plugins.dashboard_pages import task_page
    from tests.unit.plugins.test_page_templates import _panel

    panel = _panel('"&x')  # a name that needs escaping in an attribute and encoding in a URL
    html = task_page("t", [panel], log_query="dag_id=a&run_id=r&task_id=t&map_index=-1")
    forms: list[dict[str, str | None]] = []

    class Forms(HTMLParser):
        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            if tag == "form":
                forms.append(dict(attrs))

    Forms().feed(html)
    (form,) = forms
    assert (
        form["data-log"] == f"api/task/log?dag_id=a&run_id=r&task_id=t&map_index=-1&job={quote(panel.name)}"
    )
    assert "log-tail" in (form["class"] or "")
    assert '<pre class="log" hidden></pre>' in html
    assert task_page("t", [panel]).count("<form") == 0, "no form without the page's query"
