"""Which checks each route group of the UI's app runs (``AppAccess``): the settings' own, else Airflow's
login and auth manager. Without Airflow's login (``dependencies`` given, in tests) the per-user parts
default to open: every DAG's results, one anonymous user, the plot shown."""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any

from fastapi import Depends

from .app_settings import DashboardSettings
from .route_access import airflow_user, dag_access, dag_permission, marked, readable_results


@dataclass(frozen=True)
class AppAccess:
    """The dependencies of every route (``app``), of the task, log and queue routes, and the per-request
    ones: the DAGs whose results the user may see, whose streams and reads it counts as, and whether the
    task view may plot the task's results."""

    app: list[Any]
    task: list[Any]
    logs: list[Any]
    queues: list[Any]
    readable_dags: Callable[..., Collection[str] | None]
    stream_user: Callable[..., str]
    results_access: Callable[..., bool]


def app_access(settings: DashboardSettings) -> AppAccess:
    """The settings' checks, Airflow's where they give none (None)."""
    s = settings
    tests = s.dependencies is not None  # no Airflow login: the per-user parts are open
    task = s.task_access if s.task_access is not None else [dag_access("TASK_INSTANCE", user=airflow_user())]
    logs = s.log_access if s.log_access is not None else [dag_access("TASK_LOGS", user=airflow_user())]
    readable_dags = s.readable_dags
    if readable_dags is None:
        readable_dags = _every_dag if tests else _readable_dags()
    stream_user = s.stream_user
    if stream_user is None:
        stream_user = _nobody if tests else _stream_user()
    results_access = s.results_access
    if results_access is None:
        results_access = _yes if tests else dag_permission("XCOM", user=airflow_user()).dependency
    return AppAccess(
        app=list(s.dependencies) if s.dependencies is not None else [_airflow_login()],
        task=list(task),
        logs=list(logs),
        queues=list(s.queues_access) if s.queues_access is not None else [_queues_access()],
        readable_dags=readable_dags,
        stream_user=stream_user,
        results_access=results_access,
    )


def _airflow_login() -> Any:
    from airflow.api_fastapi.core_api.security import get_user

    return Depends(get_user)


def _every_dag() -> None:
    return None


def _nobody() -> str:
    return ""


def _yes() -> bool:
    return True


def _stream_user() -> Callable[..., str]:
    """A dependency: the logged-in user's name, whose open streams and running reads are counted."""
    from airflow.api_fastapi.core_api.security import get_user

    def name(user: Any = Depends(get_user)) -> str:  # noqa: B008
        return str(user.get_name())

    return name


def _readable_dags() -> Callable[..., Collection[str]]:
    """A dependency: the DAG ids whose results the logged-in user may read (the run history shows only
    those): the DAGs she may read and whose XComs she may read, as Airflow's own XCom routes ask."""
    from airflow.api_fastapi.app import get_auth_manager
    from airflow.api_fastapi.core_api.security import get_user

    # Annotated with module-level names only: FastAPI resolves the (postponed) annotations in this module's
    # globals, where the lazily imported BaseUser is not.
    def readable(user: Any = Depends(get_user)) -> Collection[str]:  # noqa: B008
        return readable_results(user, get_auth_manager().get_authorized_dag_ids(user=user, method="GET"))

    return readable


def _queues_access() -> Any:
    from airflow.api_fastapi.auth.managers.models.resource_details import AccessView
    from airflow.api_fastapi.core_api.security import requires_access_view

    return marked(Depends(requires_access_view(AccessView.CLUSTER_ACTIVITY)), "view")
