"""A job kind's part of the operator (docs/design.md, "Job kinds"): what ``KueueOperator``'s ``execute`` and
``execute_complete`` ask of the kind, on the model of Kueue's ``jobframework.GenericJob``: the abstract
methods every kind implements (checked when the class is made: a kind that misses one cannot be
instantiated), and hooks with a default that a kind with the capability overrides (a null object each)."""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from ..airflow_compat import AirflowException
from ..hooks.cluster_target import ClusterTarget
from ..hooks.kind_client import KindClient
from ..kueue.checkpoints.ledger import RunLedger
from ..kueue.checkpoints.packing_choice import PackingChoice
from ..kueue.identity.airflow_identity import AirflowIdentity
from ..kueue.index_set import IndexSet
from ..kueue.kinds import KindDescription
from ..kueue.progress.deadline import DeadlinePlan
from ..kueue.progress.trigger_event import KueueEvent
from ..triggers.kueue_follow import KueueFollowTrigger
from .deadline_handling import Spill
from .failures import KueueTaskFailed
from .shard_session import ShardSession
from .task_facts import created_epoch

Shards = ShardSession
"""The try's shards: a ``CheckpointSession``, or the ``NoCheckpointing`` null object (the seam's Protocol)."""


@dataclass(frozen=True)
class TaskEntry:
    """What one entry into the operator (``execute``, ``execute_complete``, an escalation) works with,
    computed once: the task instance's identity, the kind's client and the try's shards."""

    identity: AirflowIdentity
    client: KindClient
    shards: Shards


@dataclass(frozen=True)
class WaitOn:
    """What the next trigger follows: the object, the try's shards, the deadline plan, the queue it waits in
    (None: the task's) and the quota released so far (a re-deferral after an escalation)."""

    obj: dict[str, Any]
    shards: Shards
    plan: DeadlinePlan | None
    queue_name: str | None = None
    released_before: dict[str, Any] | None = None


class OperatorKind(ABC):
    """What a kind (``KueueIndexedJobOperator``, ``KueueJobSetOperator``) gives the template: its
    description (``kueue.kinds``), its failure type, and the methods below."""

    description: ClassVar[KindDescription]
    failure: ClassVar[type[KueueTaskFailed]]
    """What the task raises when its object failed, timed out or could not run."""
    trigger: ClassVar[type[KueueFollowTrigger[Any]]]
    """The kind's trigger: it takes the kind's name and uid keys, what every kind's trigger takes, and the
    kind's own kwargs (``_trigger_kwargs``)."""

    # What the template (``KueueOperator``) holds and a trigger is wired from.
    queue_name: str
    kubernetes_conn_id: str
    queue_timeout: float | None
    workload_timeout: float
    start_timeout: float

    @property
    def kind(self) -> str:
        return self.description.kind

    @abstractmethod
    def build_manifest(self, identity: AirflowIdentity) -> dict[str, Any]:
        """The object to create for this try (validated when the DAG was parsed)."""

    @abstractmethod
    def cluster_target(self) -> ClusterTarget:
        """The connection and its overrides (``ClusterTarget``)."""

    def _client(self) -> KindClient:
        return KindClient(self.description, self.cluster_target())

    @abstractmethod
    def _shard_count(self) -> int:
        """The shards the checkpoint location is for (the ledger's size)."""

    @abstractmethod
    def _shards_to_run(
        self, shards: Shards, previous: list[dict[str, Any]]
    ) -> tuple[IndexSet, RunLedger | None]:
        """The shards this try runs, and the ledger when there is one."""

    @abstractmethod
    def _shape(self, manifest: dict[str, Any], shards: Shards, indexes: IndexSet) -> None:
        """Give the pods their shards and checkpoint location (a no-op without checkpointing)."""

    def _packing(self) -> PackingChoice:
        """How many shards each pod runs (the Job kind with ``shards_per_pod``); one by default."""
        return PackingChoice()

    def _before_create(self, client: KindClient, manifest: dict[str, Any]) -> None:
        """What the kind checks of its object as the cluster would create it, before it does (the JobSet
        kind: not through MultiKueue); nothing by default."""
        return None

    def _reattaches_to_completed(self, shards: Shards) -> bool:
        """Whether a retry reattaches to an earlier object that completed (and returns its result), rather
        than deciding from a ledger (the Job kind with checkpointing runs what the ledger has not seen
        finish)."""
        return True

    def _record_attempt(self, shards: Shards, obj: dict[str, Any], indexes: IndexSet) -> None:
        """Record the submitted attempt where the kind keeps its attempts (the Job kind: the shard ledger);
        nothing by default."""
        return None

    @abstractmethod
    def resolved_namespace(self) -> str: ...

    def _trigger_for(self, wait: WaitOn) -> KueueFollowTrigger[Any]:
        """The kind's trigger for ``wait``, with what every kind's trigger takes."""
        meta = wait.obj["metadata"]
        return self.trigger(
            **{self.description.name_key: meta["name"], self.description.uid_key: meta.get("uid")},
            namespace=self.resolved_namespace(),
            queue_name=wait.queue_name or self.queue_name,
            kubernetes_conn_id=self.kubernetes_conn_id,
            **self.cluster_target().overrides(),
            queue_timeout=self.queue_timeout,
            submitted_at=created_epoch(wait.obj),
            workload_timeout=self.workload_timeout,
            start_timeout=self.start_timeout,
            deadline=wait.plan.to_dict() if wait.plan else None,
            deferred_at=time.time(),
            released_before=wait.released_before,
            credential=wait.shards.trigger_credential(meta["name"]),
            **self._trigger_kwargs(wait),
        )

    def _trigger_kwargs(self, wait: WaitOn) -> dict[str, Any]:
        """The kind's own trigger kwargs (the Job kind: its failed-index limit, ledger and ramp); none by
        default."""
        return {}

    def _submitted_line(self) -> str:
        """What the submit log line adds after the queue (e.g. the replicated jobs)."""
        return ""

    def _result(
        self, identity: AirflowIdentity, event: KueueEvent, shards: Shards
    ) -> tuple[dict[str, Any], str]:
        """(the task's result, the final message) for the trigger's last event."""
        return event.result_keys(), event.message

    @abstractmethod
    def _nothing_left(
        self, identity: AirflowIdentity, shards: Shards, ledger: RunLedger | None
    ) -> dict[str, Any]:
        """The result when an earlier try already finished every shard (the ledger says so)."""

    def _succeeded(self, result: dict[str, Any], shards: Shards) -> dict[str, Any]:
        """The successful result, with what a task adds while the shards' records still exist (before the
        clean-up): ``@task.kueue`` adds each shard's return value. The result as is by default."""
        return result

    log_tail_indexes: ClassVar[int] = 5
    """Failed indexes whose pods' last log lines the failure shows, per failed Job."""

    @abstractmethod
    def _failed_by_job(self, event: KueueEvent) -> dict[str, str]:
        """Each failed Job's failed indexes (an interval string), for the log tails."""

    def _tail_heading(self, job_name: str, index: int) -> str:
        return f"{job_name} index {index}"

    def _failure(self, message: str, event: Mapping[str, Any]) -> AirflowException:
        return self.failure(message, event)

    def _spill(self, entry: TaskEntry) -> Spill | None:
        """The kind's ``spill_to`` for this escalation (None: the kind refuses it when the DAG is parsed)."""
        return None
