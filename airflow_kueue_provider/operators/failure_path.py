"""The template's failure path (``KueueOperator``): the failed pods' last log lines in the failure message,
the delete of a failed task's object (it must not keep holding quota), ``on_kill``'s delete of every
object of the task instance, and ``max_failed_indexes`` as the last try's tolerance (a try with retries left
fails on failed indexes, so the retry runs them again). Best effort after a failure: the failure itself
matters more than these."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from ..hooks.identity_key import identity_seal
from ..kueue.identity.airflow_identity import AirflowIdentity
from ..kueue.index_set import IndexSet
from ..kueue.progress.trigger_event import KueueEvent
from .job_submission import delete_task_instance_objects

if TYPE_CHECKING:
    from ..airflow_compat import AirflowException
    from ..hooks.kind_client import KindClient


def retries_left(context: Any, retries: int | None) -> bool:
    """Whether Airflow will retry this try if it fails: Airflow's own test (``TaskInstance.
    is_eligible_to_retry``), ``try_number <= max_tries``; ``max_tries`` is the task's retries unless the
    task instance was cleared (then it grew)."""
    if not retries:
        return False
    ti = context.get("ti") if hasattr(context, "get") else None
    try_number = int(getattr(ti, "try_number", 1) or 1)
    max_tries = getattr(ti, "max_tries", None)
    return try_number <= (int(max_tries) if max_tries is not None else retries)


def failed_before_last_try(result: dict[str, Any], limit: int | None, try_number: int) -> str | None:
    """Why a try whose indexes failed within ``max_failed_indexes`` fails anyway while it has retries left
    (None: nothing failed, or no limit set): the retry runs the failed shards again, and only the last try
    accepts up to ``limit`` of them."""
    failed = int(result.get("failed") or 0)
    if limit is None or failed <= 0:
        return None
    which = result.get("failed_indexes") or "?"
    noun = "index" if failed == 1 else "indexes"
    return (
        f"{failed} {noun} failed ({which}), within max_failed_indexes={limit}, but try {try_number} has "
        "retries left: the task fails so that the retry runs them again (with checkpointing only the "
        f"unfinished shards); only the last try succeeds with up to {limit} failed"
    )


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
        def _failure(self, message: str, event: Mapping[str, Any]) -> AirflowException: ...

    def _fail_tolerated_before_last_try(
        self, context: Any, result: dict[str, Any], event: KueueEvent
    ) -> None:
        """Raise (a retryable failure) when the try succeeded only by ``max_failed_indexes`` and Airflow has
        retries left for it; the last try keeps the tolerance."""
        if not retries_left(context, getattr(self, "retries", 0)):
            return
        ti = context.get("ti") if hasattr(context, "get") else None
        why = failed_before_last_try(
            result, getattr(self, "max_failed_indexes", None), int(getattr(ti, "try_number", 1) or 1)
        )
        if why:
            raise self._failure(why + self._log_tails(event), event.to_dict())

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
