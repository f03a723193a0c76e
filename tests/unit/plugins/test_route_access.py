"""Every Kueue route authorizes itself: the per-DAG check reads the one dag_id the route serves (query or
path), on every Airflow version, and the app serves no API docs without a login."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi import Depends
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient

from airflow_kueue_provider.plugins.app_settings import DashboardSettings
from airflow_kueue_provider.plugins.dashboard_app import create_app
from airflow_kueue_provider.plugins.route_access import dag_access, route_checks

TASK = {"run_id": "r", "task_id": "t", "map_index": "{MAP_INDEX}"}


class NoJobs:
    kubernetes_conn_id = "conn"

    def task_instance_jobs(self, namespace: str | None, identity: Any) -> list[dict[str, Any]]:
        return []


def _dag_param(route: APIRoute) -> bool:
    params = route.dependant.query_params + route.dependant.path_params
    return any(p.name == "dag_id" for p in params)


def test_every_route_of_the_app_has_its_own_authorization_and_every_dag_route_the_per_dag_check() -> None:
    app = create_app()
    routes = [r for r in app.routes if isinstance(r, APIRoute)]
    assert {r.path for r in routes} >= {
        "/",
        "/queues",
        "/api/queues",
        "/task",
        "/api/task",
        "/api/task/stream",
        "/api/task/log",
    }
    for route in routes:
        checks = route_checks(route)
        assert checks, (
            f"{route.path} has no authorization of its own (route_access.dag_access or a view check)"
        )
        if _dag_param(route):
            assert "dag" in checks, f"{route.path} serves a dag_id without the per-DAG check"


def test_the_app_serves_no_api_docs() -> None:
    settings = DashboardSettings(NoJobs, lambda: ["ns"], dependencies=[], task_access=[], queues_access=[])  # type: ignore[arg-type]
    app = create_app(settings)
    client = TestClient(app)
    for path in ("/openapi.json", "/docs", "/redoc", "/docs/oauth2-redirect"):
        assert client.get(path).status_code == 404, path


def _client(asked: list[tuple[Any, str, str]]) -> TestClient:
    def authorize(user: Any, dag_id: str, entity: str) -> bool:
        asked.append((user, dag_id, entity))
        return dag_id == "a"

    check = dag_access("TASK_INSTANCE", authorize, user=Depends(lambda: "alice"))
    app = create_app(
        DashboardSettings(
            NoJobs,  # type: ignore[arg-type]
            lambda: ["ns"],
            dependencies=[],
            task_access=[check],
            queues_access=[],
            task_instances=lambda *key: None,
            task_runs=lambda *key: [],
        )
    )
    return TestClient(app)


@pytest.mark.parametrize("path", ["/task", "/api/task", "/api/task/stream"])
def test_a_dag_route_asks_for_the_dag_in_its_query_and_refuses_another(path: str) -> None:
    asked: list[tuple[Any, str, str]] = []
    client = _client(asked)
    refused = client.get(path, params={**TASK, "dag_id": "b"})
    assert refused.status_code == 403 and "'b'" in refused.text
    assert asked == [("alice", "b", "TASK_INSTANCE")]
    assert client.get(path, params={**TASK, "dag_id": "a"}).status_code == 200


@pytest.mark.parametrize("query", ["dag_id=a&dag_id=b", "dag_id=b&dag_id=a", "dag_id=", "dag_id=a&dag_id=a"])
def test_a_request_naming_no_dag_or_two_is_refused_before_any_check(query: str) -> None:
    asked: list[tuple[Any, str, str]] = []
    answer = _client(asked).get(f"/api/task?run_id=r&task_id=t&{query}")
    assert answer.status_code == 422 and "dag_id" in answer.text and asked == []
