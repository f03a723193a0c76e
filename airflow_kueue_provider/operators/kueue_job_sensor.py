"""``KueueJobSensor``: wait, later in the DAG, for an object a Kueue operator submitted with
``wait_for_completion=False``.

It follows the object on the SAME shared watch and with the same trigger (and settings) as the operator
would have, bound by the uid the operator recorded, never by name alone (docs/tenancy.md: a namesake made
after a delete is not the task's), and succeeds or fails as the operator would (``max_failed_indexes``,
the queue and start timeouts).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperator

from ..hooks.cluster_target import ClusterTarget
from ..hooks.kind_client import KindClient
from ..kueue import kinds
from ..kueue.progress.trigger_event import KueueEvent
from ..triggers import kueue_job  # noqa: F401  (the Job kind's trigger: always known)
from ..triggers.kueue_follow import KueueFollowTrigger
from .failures import KueueTaskFailed
from .submitted_object import NotASubmittedObject, SubmittedObject
from .task_facts import created_epoch

if TYPE_CHECKING:
    from airflow.sdk import Context

RESUME_METHOD = "execute_complete"


class KueueObjectReplaced(KueueTaskFailed):
    """The submitted object is gone, or a namesake with another uid stands in its place."""


def trigger_class(kind: str) -> type[KueueFollowTrigger[Any]]:
    """The loaded trigger of ``kind`` (a DAG that submits a kind imports its operator, hence its trigger)."""
    todo: list[type[Any]] = [KueueFollowTrigger]
    while todo:
        cls = todo.pop()
        description = cls.__dict__.get("description")
        if description is not None and description.kind == kind:
            return cls
        todo.extend(cls.__subclasses__())
    raise NotASubmittedObject(f"no trigger is loaded for kind {kind!r}: import its operator in the DAG file")


class KueueJobSensor(BaseOperator):
    """Wait for the object task ``submit_task_id`` submitted with ``wait_for_completion=False`` (any kind).

    Returns the event's result keys (counts, failed indexes, times); fails as the operator would.

    :param submit_task_id: the Kueue operator task that submitted the object (its XCom return value).
    :param kubernetes_conn_id: default: the one the operator used.
    :param deferrable: True by default: the wait is in the triggerer, not a worker slot.
    :param keep_on_failure: keep an object that still runs when this task fails (default: delete it).
    """

    template_fields: Sequence[str] = ("submit_task_id",)
    ui_color = "#d4e9f7"

    def __init__(
        self,
        *,
        submit_task_id: str,
        kubernetes_conn_id: str | None = None,
        deferrable: bool = True,
        keep_on_failure: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.submit_task_id = submit_task_id
        self.kubernetes_conn_id = kubernetes_conn_id
        self.deferrable = deferrable
        self.keep_on_failure = keep_on_failure

    def _record(self, context: Context) -> SubmittedObject:
        value = context["ti"].xcom_pull(task_ids=self.submit_task_id)
        return SubmittedObject.from_xcom(value, self.submit_task_id)

    def _client(self, record: SubmittedObject) -> KindClient:
        conn_id = self.kubernetes_conn_id or record.kubernetes_conn_id
        return KindClient(kinds.describe(record.kind), ClusterTarget(conn_id))

    def execute(self, context: Context) -> dict[str, Any]:
        record = self._record(context)
        trigger_cls = trigger_class(record.kind)
        where = f"{record.kind} {record.namespace}/{record.name}"
        obj = self._client(record).get(record.namespace, record.name)
        if obj is None or obj["metadata"].get("uid") != record.uid:
            now = "is gone" if obj is None else f"is now another object (uid {obj['metadata'].get('uid')})"
            raise KueueObjectReplaced(
                f"{where} (uid {record.uid}) that {self.submit_task_id} submitted {now}; nothing to wait for",
                {"status": "error", "namespace": record.namespace},
            )
        description = trigger_cls.description
        binding: dict[str, Any] = {description.name_key: record.name, description.uid_key: record.uid}
        trigger = trigger_cls(
            **binding,
            namespace=record.namespace,
            queue_name=record.queue_name,
            kubernetes_conn_id=self.kubernetes_conn_id or record.kubernetes_conn_id,
            submitted_at=created_epoch(obj),
            deferred_at=time.time(),
            **record.follow,
        )
        self.log.info("following %s (uid %s) submitted by %s", where, record.uid, self.submit_task_id)
        if self.deferrable:
            self.defer(trigger=trigger, method_name=RESUME_METHOD)
        event = asyncio.run(trigger.first_event())
        result: dict[str, Any] = self.resume_execution(RESUME_METHOD, {"event": event}, context)
        return result

    def execute_complete(self, context: Context, event: dict[str, Any] | None = None) -> dict[str, Any]:
        record = self._record(context)
        typed = KueueEvent.from_dict(event or {"status": "error", "message": "the trigger ended silently"})
        if typed.status == "success":
            result = typed.result_keys()
            self.log.info("%s; result: %s", typed.message, json.dumps(result, sort_keys=True))
            return result
        message = f"{typed.status}: {typed.message}"
        if not self.keep_on_failure and typed.status != "timeout":  # a timeout: the trigger deleted it
            what = self._client(record).delete_unless_finished(record.namespace, record.name, uid=record.uid)
            if what == "deleted":
                message += f"; its {record.kind} was still running and has been deleted"
        raise KueueTaskFailed(message, event or {})
