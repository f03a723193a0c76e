"""Who may read what in the Kueue pages: each route asks Airflow's auth manager itself.

Airflow's ``requires_access_dag`` read ``dag_id`` only from the path up to 3.1.6, and every Kueue route takes
it in the query: with that dependency a user allowed DAG ``a`` read DAG ``b``'s Jobs on the floor version.
So the routes resolve the DAG they serve (path or query, exactly one value) and call
``is_authorized_dag`` themselves, the same on every supported Airflow. A route's check is marked
(``ROUTE_CHECK``) so a test can walk the app and fail on a route without one.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any

from fastapi import Depends, HTTPException, Request

ROUTE_CHECK = "kueue_route_check"
"""The attribute that marks a dependency as a route's authorization (its value: ``dag`` or ``view``)."""

DagAuthorizer = Callable[[Any, str, str], bool]
"""(user, dag_id, DagAccessEntity name) -> allowed; Airflow's auth manager by default."""


def served_dag_id(request: Request) -> str:
    """The one DAG id the request names, in its path or its query. Two values (``?dag_id=a&dag_id=b``, or a
    path and a query that differ) are refused: the check and the route must read the same DAG."""
    named = request.query_params.getlist("dag_id")
    if "dag_id" in request.path_params:
        named.append(str(request.path_params["dag_id"]))
    values = set(named)
    if len(values) != 1 or len(named) != len(values) or not named[0].strip():
        raise HTTPException(
            422, "dag_id: give exactly one non-empty dag_id (in the query), e.g. ?dag_id=my_dag"
        )
    return named[0]


def airflow_dag_authorizer(user: Any, dag_id: str, entity: str) -> bool:
    """Airflow's auth manager on ``GET`` of ``entity`` (a ``DagAccessEntity`` name) of ``dag_id``."""
    from airflow.api_fastapi.app import get_auth_manager
    from airflow.api_fastapi.auth.managers.models.resource_details import DagAccessEntity, DagDetails

    return bool(
        get_auth_manager().is_authorized_dag(
            method="GET", access_entity=DagAccessEntity[entity], details=DagDetails(id=dag_id), user=user
        )
    )


def airflow_user() -> Any:
    """The logged-in user (Airflow's JWT, bearer or cookie), as a dependency."""
    from airflow.api_fastapi.core_api.security import get_user

    return Depends(get_user)


def dag_access(
    entity: str = "TASK_INSTANCE",
    authorize: DagAuthorizer = airflow_dag_authorizer,
    user: Any = None,
) -> Any:
    """A dependency: 403 unless the user may read ``entity`` (``TASK_INSTANCE``, ``TASK_LOGS``) of the DAG
    the request serves. Tests pass an ``authorize`` and a ``user`` dependency of their own; by default Airflow
    decides for its login."""

    login = user if user is not None else airflow_user()

    def check(request: Request, who: Any = login) -> None:
        dag_id = served_dag_id(request)
        if not authorize(who, dag_id, entity):
            what = entity.lower().replace("_", " ")
            what += "" if what.endswith("s") else "s"
            raise HTTPException(403, f"Forbidden: you may not read the {what} of DAG {dag_id!r}")

    setattr(check, ROUTE_CHECK, "dag")
    return Depends(check)


def dag_permission(
    entity: str = "XCOM",
    authorize: DagAuthorizer = airflow_dag_authorizer,
    user: Any = None,
) -> Any:
    """A dependency: whether the user may read ``entity`` of the DAG the request serves, without refusing the
    request (a page leaves out what derives from it: the task view's plot of the task's results needs the
    DAG's XComs, as Airflow's own XCom routes ask)."""

    login = user if user is not None else airflow_user()

    def allowed(request: Request, who: Any = login) -> bool:
        return bool(authorize(who, served_dag_id(request), entity))

    return Depends(allowed)


def readable_results(
    user: Any, dag_ids: Collection[str], authorize: DagAuthorizer = airflow_dag_authorizer
) -> set[str]:
    """Of ``dag_ids`` (those the user may read), the DAGs whose XComs the user may read too: the run history
    shows the operator's results, which are XComs."""
    return {dag_id for dag_id in dag_ids if authorize(user, dag_id, "XCOM")}


def marked(dependency: Any, kind: str) -> Any:
    """``dependency`` (a ``Depends``) marked as a route's authorization of ``kind``."""
    setattr(dependency.dependency, ROUTE_CHECK, kind)
    return dependency


def route_checks(route: Any) -> set[str]:
    """The kinds of authorization marked on ``route``'s dependencies (all levels)."""
    found: set[str] = set()
    pending = [route.dependant]
    while pending:
        dependant = pending.pop()
        kind = getattr(dependant.call, ROUTE_CHECK, None)
        if kind:
            found.add(str(kind))
        pending.extend(dependant.dependencies)
    return found
