"""What operators read from their task's context and from the objects they created."""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, Any

from ..airflow_compat import AirflowFailException
from ..kueue.api_time import parse_api_time
from ..kueue.identity.airflow_identity import AirflowIdentity

if TYPE_CHECKING:
    from airflow.sdk import Context


def task_identity(context: Context) -> AirflowIdentity:
    """The running task instance and try, as the labels and names of its objects carry it."""
    ti = context["ti"]
    return AirflowIdentity(
        dag_id=ti.dag_id,
        task_id=ti.task_id,
        run_id=ti.run_id,
        try_number=int(ti.try_number or 1),
        map_index=int(getattr(ti, "map_index", -1)),
    )


def seconds(value: timedelta | float) -> float:
    return value.total_seconds() if isinstance(value, timedelta) else value


def check_positive_seconds(task_id: str, **durations: float | None) -> None:
    """Each duration (seconds, already from a timedelta) must be a positive number; None is left alone."""
    for name, value in durations.items():
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
            raise AirflowFailException(
                f"{task_id}: {name} must be a positive number of seconds or a timedelta, got {value!r}"
            )


def created_epoch(obj: dict[str, Any]) -> float | None:
    """When the apiserver created the object (epoch seconds): a trigger's clock starts there."""
    created = parse_api_time(obj["metadata"].get("creationTimestamp"))
    return created.timestamp() if created else None
