"""The template's failure path (``KueueOperator``): the failed pods' last log lines in the failure message,
the delete of a failed task's object (it must not keep holding quota), and ``on_kill``'s delete of every
object of the task instance. Best effort after a failure: the failure itself matters more than these."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from ..hooks.identity_key import identity_seal
from ..kueue.identity.airflow_identity import AirflowIdentity
from ..kueue.index_set import IndexSet
from ..kueue.progress.trigger_event import KueueEvent
from .job_submission import delete_task_instance_objects

if TYPE_CHECKING:
    from ..hooks.kind_client import KindClient


class FailurePath:
    """Mixed into ``KueueOperator``: reads the object it waits on and the kind's part (``OperatorKind``)."""

    keep_on_failure: bool  # the operator's parameter
    log_tail_indexes: ClassVar[int]  # the kind's
    _name: str | None = None
    _uid: str | None = None
    """The object the task waits on, once it submitted or reattached (its spill Job after a spill)."""
    _identity: AirflowIdentity | None = None
    """The running task instance and try, once known: ``on_kill`` deletes every object it sealed."""

    if TYPE_CHECKING:  # the operator's (KueueOperator's, OperatorKind's, BaseOperator's)
        log: Any

        @property
        def kind(self) -> str: ...
        def _client(self) -> KindClient: ...
        def resolved_namespace(self) -> str: ...
        def _failed_by_job(self, event: KueueEvent) -> dict[str, str]: ...
        def _tail_heading(self, job_name: str, index: int) -> str: ...

    def _log_tails(self, event: KueueEvent) -> str:
        """The last log lines of the first failed indexes of each failed Job."""
        parts = []
        try:
            hook = self._client().hook
            for job_name, indexes in self._failed_by_job(event).items():
                first = list(IndexSet.parse(indexes))[: self.log_tail_indexes]
                tails = hook.failed_index_log_tails(
                    event.namespace or self.resolved_namespace(), job_name, first
                )
                for index, tail in tails.items():
                    heading = self._tail_heading(job_name, index)
                    parts.append(f"\n--- {heading}, last log lines ---\n{tail.rstrip()}")
        except Exception as exc:  # the failure itself matters more than its logs
            return f"\n(could not read the failed pods' logs: {exc})"
        return "".join(parts)

    def _stop_after_failure(self, event: KueueEvent) -> str:
        """A failed task's object must not keep holding quota: delete it unless it finished (or the user
        keeps it). Returns what to add to the failure message."""
        if self.keep_on_failure or not event.name or event.status == "timeout":
            return ""
        try:
            what = self._client().delete_unless_finished(
                event.namespace or self.resolved_namespace(), event.name, uid=event.uid
            )
        except Exception as exc:  # the failure itself matters more
            return (
                f"\n(could not delete {self.kind} {event.name}: {exc}; delete it yourself to free its quota)"
            )
        return f"; its {self.kind} was still running and has been deleted" if what == "deleted" else ""

    def on_kill(self) -> None:
        """The task was killed in a worker (blocking mode, or while it escalates or spills): every object of
        the task instance that carries its seal and still runs goes -- the spill Job and one created
        mid-escalation too, not only the one it waited on. A finished one is kept, as in deferred mode (the
        trigger's on_kill)."""
        namespace = self.resolved_namespace()
        done: dict[str, str] = {}
        if self._identity is not None:
            done = delete_task_instance_objects(self._client(), namespace, self._identity, identity_seal())
        if self._name and self._name not in done:  # listed before it was created, or a lost read
            done[self._name] = self._client().delete_unless_finished(namespace, self._name, uid=self._uid)
        for name, what in done.items():
            self.log.info("task killed; %s %s/%s: %s", self.kind, namespace, name, what)
