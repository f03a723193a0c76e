"""What an operator with ``wait_for_completion=False`` hands on (its XCom return value): the object it
submitted, bound by uid, and how to follow it, so ``KueueJobSensor`` later in the DAG waits and judges it
exactly as the operator's own trigger would."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from ..airflow_compat import AirflowFailException
from ..kueue.errors import KueueProviderError

SUBMITTED_SCHEMA = 1
"""The record's version: a sensor refuses one it cannot read, naming the task that pushed it."""


class NotASubmittedObject(AirflowFailException, KueueProviderError):
    """The XCom the sensor read is not an operator's ``wait_for_completion=False`` record."""


@dataclass(frozen=True)
class SubmittedObject:
    """The object (kind, namespace, name, uid), the LocalQueue it waits in, the connection, and the trigger
    settings the operator would have followed it with (``follow``: its timeouts, ``max_failed_indexes``)."""

    kind: str
    namespace: str
    name: str
    uid: str
    queue_name: str
    kubernetes_conn_id: str
    follow: dict[str, Any] = field(default_factory=dict)
    schema: int = SUBMITTED_SCHEMA

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_xcom(cls, value: Any, source: str) -> SubmittedObject:
        """The record ``source`` (a task id) pushed; a clear error when it is not one (it waited itself,
        pushed nothing, or is another operator)."""
        fix = f"set wait_for_completion=False on task {source!r} (a Kueue operator), then follow it here"
        if not isinstance(value, Mapping) or value.get("schema") != SUBMITTED_SCHEMA:
            got = (
                "nothing" if value is None else f"a {type(value).__name__} without schema={SUBMITTED_SCHEMA}"
            )
            raise NotASubmittedObject(f"task {source!r} pushed {got}, not a submitted Kueue object: {fix}")
        missing = [k for k in ("kind", "namespace", "name", "uid", "queue_name") if not value.get(k)]
        if missing:
            raise NotASubmittedObject(f"task {source!r}'s submitted record lacks {', '.join(missing)}: {fix}")
        return cls(
            kind=str(value["kind"]),
            namespace=str(value["namespace"]),
            name=str(value["name"]),
            uid=str(value["uid"]),
            queue_name=str(value["queue_name"]),
            kubernetes_conn_id=str(value.get("kubernetes_conn_id") or "kubernetes_default"),
            follow=dict(value.get("follow") or {}),
        )


def no_wait_conflicts(task_id: str, **params: Any) -> None:
    """``wait_for_completion=False`` with a parameter that needs the waiting task (a checkpoint ledger and
    the pods' credential renewal, a deadline's escalation, a ramp's steps): a clear error, nothing created."""
    if set_ := [name for name, value in params.items() if value is not None]:
        raise AirflowFailException(
            f"{task_id}: wait_for_completion=False cannot be combined with {', '.join(set_)}: the waiting "
            f"task drives it. Remove {' and '.join(set_)}, or keep wait_for_completion=True"
        )
