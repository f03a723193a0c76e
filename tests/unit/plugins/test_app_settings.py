"""``create_app`` takes one ``DashboardSettings``; the old form (its fields as arguments), which
benchmarks/ui_streams.py and cluster tests outside the plugin use, makes the same app."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.routing import APIRoute

from airflow_kueue_provider.plugins.app_settings import DashboardSettings
from airflow_kueue_provider.plugins.dashboard_app import create_app
from airflow_kueue_provider.plugins.route_access import route_checks


def _hook() -> Any:
    return None


def _namespaces() -> list[str]:
    return ["ns"]


def _shape(app: FastAPI) -> list[tuple[Any, ...]]:
    """Each route: path, methods, endpoint, its checks and every dependency's name (all levels), params."""

    def names(dependant: Any) -> list[str]:
        found = []
        for sub in dependant.dependencies:
            found += [getattr(sub.call, "__name__", type(sub.call).__name__), *names(sub)]
        return found

    return [
        (
            route.path,
            sorted(route.methods),
            route.endpoint.__name__,
            sorted(route_checks(route)),
            names(route.dependant),
            [(p.name, p.field_info.default) for p in route.dependant.query_params],
        )
        for route in app.routes
        if isinstance(route, APIRoute)
    ]


def test_the_old_form_and_the_settings_make_the_same_app() -> None:
    fields: dict[str, Any] = {"dependencies": [], "task_access": [], "queues_access": []}
    old = create_app(_hook, _namespaces, **fields)
    new = create_app(DashboardSettings(_hook, _namespaces, **fields))
    assert _shape(old) == _shape(new)
    assert [r.path for r in new.routes if isinstance(r, APIRoute)] == [
        "/", "/api/queues", "/queues", "/api/queues/stream", "/api/task", "/task", "/api/task/stream",
        "/api/task/log", "/nights", "/api/nights", "/dag-run", "/api/dag-run",
    ]  # fmt: skip
    assert _shape(create_app()) == _shape(create_app(DashboardSettings()))  # Airflow's checks


def test_the_settings_keep_create_apps_old_parameters_in_their_order() -> None:
    assert [f.name for f in dataclasses.fields(DashboardSettings)] == [
        "hook_factory", "namespaces", "dependencies", "task_access", "log_access", "queues_access",
        "task_instances", "run_records", "readable_dags", "task_runs", "queue_samples", "stream_caps",
        "stream_user", "read_caps", "results_access", "dag_nights", "dag_run_records",
    ]  # fmt: skip


def test_settings_are_frozen_and_a_wrong_field_or_both_forms_are_refused() -> None:
    settings = DashboardSettings(_hook, _namespaces)
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.dependencies = []  # type: ignore[misc]
    with pytest.raises(TypeError, match="namespace"):
        create_app(_hook, namespace=_namespaces)
    with pytest.raises(TypeError, match="not both"):
        create_app(settings, dependencies=[])
