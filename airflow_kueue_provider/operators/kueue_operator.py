"""The operator every job kind shares: ``execute`` and ``execute_complete`` as one template
(docs/design.md, "Job kinds").

A kind (``KueueIndexedJobOperator``, ``KueueJobSetOperator``) supplies its part (``operator_kind``): its
parameters, its manifest, its client (``hooks.kind_client``), its trigger, its checkpoint shaping and its
log tails; the template does the rest for every kind: the queue check, the deadline plan, reattach or
submit, the pods' checkpoint credentials, defer (or wait here), the result, the log tails and the delete
after a failure, ``on_kill``.

The parameters every kind takes ("the object" is the task's Job or JobSet):

- ``queue_name``: the Kueue LocalQueue in ``namespace`` (templated).
- ``namespace``: default: the kubernetes connection's ``namespace`` extra, else ``default`` (templated).
- ``workload_priority_class``: a Kueue WorkloadPriorityClass (the Workload's priority, for admission order and
  preemption). ``priority_class`` is its earlier name and still works. The pods' Kubernetes PriorityClass is
  the Job kind's ``priority_class_name``, as in KubernetesPodOperator.
- ``spot``: tolerate AKS Spot nodes and do not count Spot evictions (DisruptionTarget) as failures.
- ``queue_timeout``: fail (and delete the object) if it is not admitted within this time (never after a
  first admission: a requeue after an eviction is not "never admitted").
- ``workload_timeout``: seconds Kueue has to create the object's Workload (default 60). The object is
  created suspended, so it runs only once Kueue admits it; one Kueue does not pick up (a namespace Kueue
  does not manage, its webhook or controller missing) is deleted after this and the task fails with the
  likely cause.
- ``start_timeout``: once admitted, how long the pods may take to start (default 600 s). After that, pods
  that cannot start (an image that never pulls, a container config error, pods the Job controller cannot
  create, no node that fits) fail the task with that reason and the object is deleted to free its quota.
- ``checkpointing``: a Blob connection id, or ``Checkpointing(...)`` / its dict: each pod learns where to
  checkpoint (the Job kind also keeps a per-shard ledger, so that a retry runs only unfinished shards).
- ``vm_price``: ``VmPrice(...)`` or a dict of its fields, for the result's ``estimated_cost_usd``
  (default: Standard_D16ds_v5 list prices, on-demand and Spot).
- ``deadline``: when the results are due: a time of day (``"07:00"``, ``"07:00 Europe/London"``; the first
  after the DAG run started), an ISO date-time with an offset, an aware ``datetime``, or a ``timedelta``
  (or seconds) from the run's start; templated. The trigger compares its ETA with it and logs "deadline
  07:00 UTC: on track / AT RISK"; the result gets ``deadline`` and ``eta_history`` (docs/deadlines.md).
- ``deadline_margin``: escalate once the late end of the ETA comes within this of the deadline (default: a
  tenth of the time from submit to the deadline, at most 10 min). With no estimate yet, once this much is
  left. A deadline less its margin already past at submit is logged as a warning (and at parse time, for a
  relative deadline the margin covers).
- ``on_deadline_risk``: ``DeadlineEscalation(raise_priority=..., notify=..., spill_to=...)`` or its dict:
  taken once per task instance, when the run is at risk (the task resumes in a worker, escalates, and
  defers again; a retry does not escalate again); listed in the result's ``escalations``.
- ``kubernetes_conn_id``: the cncf ``kubernetes`` connection (default ``kubernetes_default``; templated).
- ``cluster_context``, ``config_file``, ``in_cluster``: KubernetesPodOperator's overrides of that connection
  (another kubeconfig context or file; in-cluster credentials or not), for the task, its trigger and the
  shared watch alike.
- ``deferrable``: True by default, whatever ``[operators] default_deferrable`` says: a queue wait can last
  an hour and must not hold a worker slot. False waits in the worker with the same async logic.
"""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperator

from ..airflow_compat import AirflowFailException
from ..hooks.blob_store import BlobConfigError
from ..hooks.cluster_target import ClusterTarget
from ..hooks.identity_key import identity_seal
from ..hooks.kind_client import KindClient
from ..kueue.airflow_identity import AirflowIdentity
from ..kueue.cost import VmPrice
from ..kueue.deadline import DeadlineValue
from ..kueue.index_set import IndexSet
from ..kueue.job_progress import released_so_far
from ..kueue.k8s_names import is_dns1123_subdomain, is_valid_label_value
from ..kueue.quota_guard import DEFAULT_WORKLOAD_TIMEOUT
from ..kueue.start_guard import DEFAULT_START_TIMEOUT
from ..kueue.trigger_event import KueueEvent
from ..triggers.kueue_follow import KueueFollowTrigger
from .checkpointing import Checkpointing, CheckpointSession
from .deadline_escalation import DeadlineEscalation
from .deadline_handling import DeadlineHandling
from .job_submission import (
    Submission,
    adopted,
    check_local_queue,
    create_or_adopt_object,
    delete_task_instance_objects,
    reattachable,
    sealed_previous,
)
from .kueue_link import KueueJobLink
from .metrics import send_run_metrics
from .no_checkpointing import NoCheckpointing
from .operator_kind import OperatorKind, Shards, TaskEntry, WaitOn
from .settings import check_queue_policy, configured_pod_policy
from .task_facts import check_positive_seconds, seconds, task_identity

if TYPE_CHECKING:
    from airflow.sdk import Context


RESUME_METHOD = "execute_complete"
"""Where a deferred (or, in blocking mode, an inline) trigger's event comes back."""


class KueueOperator(OperatorKind, BaseOperator):
    """The template of every kind; its parameters are in this module's docstring."""

    ui_color = "#d4e9f7"
    operator_extra_links = (KueueJobLink(),)

    def __init__(
        self,
        *,
        queue_name: str,
        namespace: str | None = None,
        workload_priority_class: str | None = None,
        priority_class: str | None = None,
        spot: bool = False,
        queue_timeout: timedelta | float | None = None,
        workload_timeout: timedelta | float = DEFAULT_WORKLOAD_TIMEOUT,
        start_timeout: timedelta | float = DEFAULT_START_TIMEOUT,
        keep_on_failure: bool = False,
        checkpointing: Checkpointing | dict[str, Any] | str | None = None,
        deadline: DeadlineValue | None = None,
        deadline_margin: timedelta | float | None = None,
        on_deadline_risk: DeadlineEscalation | dict[str, Any] | None = None,
        kubernetes_conn_id: str = "kubernetes_default",
        cluster_context: str | None = None,
        config_file: str | None = None,
        in_cluster: bool | None = None,
        deferrable: bool = True,
        vm_price: VmPrice | dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        """The kinds take their own parameters and pass these on (``**kwargs``); ``keep_on_failure`` is the
        kind's ``keep_job_on_failure`` / ``keep_jobset_on_failure``."""
        super().__init__(**kwargs)
        if workload_priority_class is not None and priority_class is not None:
            raise AirflowFailException(
                f"{self.task_id}: set workload_priority_class or priority_class (its earlier name), not both"
            )
        priority_class = workload_priority_class if workload_priority_class is not None else priority_class
        self.queue_name = queue_name
        self.namespace = namespace
        self.priority_class = priority_class
        self.spot = spot
        self.queue_timeout = None if queue_timeout is None else seconds(queue_timeout)
        self.workload_timeout = seconds(workload_timeout)
        self.start_timeout = seconds(start_timeout)
        self.keep_on_failure = keep_on_failure
        try:
            self.vm_price = VmPrice.from_param(vm_price)
        except (TypeError, ValueError) as exc:
            raise AirflowFailException(f"{self.task_id}: vm_price: {exc}") from None
        self.kubernetes_conn_id = kubernetes_conn_id
        self.cluster_context = cluster_context
        self.config_file = config_file
        self.in_cluster = in_cluster
        self.deferrable = deferrable
        self.deadline = deadline
        self.deadline_margin = (
            None if deadline_margin is None else timedelta(seconds=seconds(deadline_margin))
        )
        self._deadlines = DeadlineHandling(
            self.task_id, deadline, self.deadline_margin, on_deadline_risk, self.log
        )
        self.on_deadline_risk = self._deadlines.escalation
        try:
            self.checkpointing = self._checkpointing = Checkpointing.from_param(
                checkpointing, queue_timeout=self.queue_timeout
            )
        except (TypeError, ValueError) as exc:
            raise AirflowFailException(f"{self.task_id}: checkpointing: {exc}") from None
        if self._deadlines.spill_to is not None and self._checkpointing is None:
            raise AirflowFailException(
                f"{self.task_id}: on_deadline_risk spill_to needs checkpointing=: the ledger says which "
                "shards are left, and the spill Job's pods find their shards (and checkpoints) through it"
            )
        self._deadlines.check_spill_queue(queue_name)
        if self.queue_timeout is not None and self.queue_timeout <= 0:
            raise AirflowFailException(
                f"{self.task_id}: queue_timeout must be positive, got {self.queue_timeout}"
            )
        check_positive_seconds(
            self.task_id, workload_timeout=self.workload_timeout, start_timeout=self.start_timeout
        )
        if (
            priority_class is not None
            and "{{" not in priority_class
            and not (is_dns1123_subdomain(priority_class) and is_valid_label_value(priority_class))
        ):
            raise AirflowFailException(
                f"{self.task_id}: workload_priority_class {priority_class!r} is not a valid "
                "WorkloadPriorityClass name: use at most 63 lowercase letters, digits, '-' and '.'"
            )
        self._check_queue_policy(namespace)  # literal values now; templated ones before submitting
        self._name: str | None = None
        self._uid: str | None = None
        self._identity: AirflowIdentity | None = None
        """The running task instance and try, once known: ``on_kill`` deletes every object it sealed."""

    def _check_queue_policy(self, namespace: str | None) -> None:
        escalation = self._deadlines.escalation
        check_queue_policy(
            self.task_id,
            namespace,
            self.queue_name,
            self.priority_class,
            self._deadlines.spill_to,
            escalation.raise_priority if escalation is not None else None,
        )

    # --- the template ---------------------------------------------------------------------------------------
    def cluster_target(self) -> ClusterTarget:
        """The connection and its overrides (after rendering: ``kubernetes_conn_id`` is templated)."""
        return ClusterTarget(self.kubernetes_conn_id, self.cluster_context, self.config_file, self.in_cluster)

    def resolved_namespace(self) -> str:
        """``namespace``, else the kubernetes connection's ``namespace`` extra, else ``default``."""
        if not self.namespace:
            self.namespace = self._client().hook.connection_namespace() or "default"
        return self.namespace

    def execute(self, context: Context) -> dict[str, Any]:
        seal = identity_seal()  # no key: a typed error naming the option, before anything is created
        self._check_queue_policy(self.resolved_namespace())
        entry = self._entry(context)
        identity, client, shards = entry.identity, entry.client, entry.shards
        manifest = self.build_manifest(identity)
        check_local_queue(client.hook, self.resolved_namespace(), self.queue_name, "queue_name", self.task_id)
        if spill_to := self._deadlines.spill_to:
            self._deadlines.check_spill_queue(self.queue_name)  # a templated queue_name, rendered
            check_local_queue(
                client.hook, self.resolved_namespace(), spill_to, "on_deadline_risk spill_to", self.task_id
            )
        plan = self._deadlines.plan(context, client, self.deadline)  # bad: nothing is created
        # 1. Reattach to an object of this task instance that still runs (or completed) ...
        previous = self._previous(client, identity)
        plan = self._deadlines.once_per_task_instance(plan, previous)
        submission = reattachable(previous, completed_counts=self._reattaches_to_completed(shards))
        if submission is None:
            # 2. ... or run what is left: every shard, or on a retry those the ledger has not seen finish.
            indexes, ledger = self._shards_to_run(shards, previous)
            if ledger is not None and ledger.attempts:
                self.log.info("%s", ledger.retry_plan(self._packing().packs))
            if not indexes:
                self.log.info("every shard already finished in an earlier try; nothing to run")
                return self._succeeded(self._nothing_left(identity, shards, ledger), shards)
            submission = self._submit(client, manifest, identity, shards, indexes)
        else:
            submission = adopted(client, submission, seal)
            self._reattached(client, shards, submission.job)
        obj = submission.job
        self._name, self._uid = obj["metadata"]["name"], obj["metadata"].get("uid")
        if plan is not None:
            self._deadlines.record_on(client, obj, plan)
        self.log.info(
            "%s %s %s/%s (%s) in LocalQueue %s%s",
            "reattached to" if submission.reattached else "submitted",
            self.kind,
            self.resolved_namespace(),
            self._name,
            submission.reason,
            self.queue_name,
            self._submitted_line(),
        )
        # 3. Wait: deferred in the triggerer, or here with the same async logic.
        return self._wait(context, self._trigger_for(WaitOn(obj, shards, plan)))

    def _submit(
        self,
        client: KindClient,
        manifest: dict[str, Any],
        identity: AirflowIdentity,
        shards: Shards,
        indexes: IndexSet,
    ) -> Submission:
        """Create this try's object (a worker that died after creating it adopts it through the 409), hand
        its pods their checkpoint credential and let the kind record the attempt (also for an adopted one:
        its worker may have died before recording it)."""
        self._shape(manifest, shards, indexes)
        self._before_create(client, manifest)
        token = shards.prepare_pod_access()  # before the object: a bad connection creates nothing
        submission = create_or_adopt_object(client, manifest, identity, identity_seal())
        shards.hand_pods_their_sas(client, submission.job, token)
        self._record_attempt(shards, submission.job, indexes)
        return submission

    def _reattached(self, client: KindClient, shards: Shards, obj: dict[str, Any]) -> None:
        """A worker that died between creating the object and its Secret left pods that can never start,
        and a ledger that never learnt the attempt: ensure both (the null object does nothing)."""
        shards.ensure_pod_access(client, obj)
        self._record_attempt(shards, obj, IndexSet.range(0, shards.shard_count))

    def _previous(self, client: KindClient, identity: AirflowIdentity) -> list[dict[str, Any]]:
        """The objects of the task instance it may adopt: those with its seal (docs/tenancy.md). Also on a
        first try: the LIST says which objects carry the task's labels without its seal, and for a kind
        the cluster or the Role lacks it fails before anything is created, naming what to do."""
        return sealed_previous(client, self.resolved_namespace(), identity, identity_seal(), self.log)

    def _shards(self, identity: AirflowIdentity, check: bool = True) -> Shards:
        """The try's checkpoint session (or its null object); ``check`` fails fast on bad Blob
        configuration, before anything is submitted."""
        config = self._checkpointing
        if config is None:
            return NoCheckpointing(self._shard_count())
        session = CheckpointSession(config, identity, self._shard_count(), self._packing())
        if not check:
            return session
        if problem := config.pod_policy_problem(configured_pod_policy()):
            raise AirflowFailException(f"{self.task_id}: checkpointing: {problem}")
        try:
            session.check()
        except BlobConfigError as exc:
            raise AirflowFailException(f"{self.task_id}: checkpointing: {exc}") from None
        return session

    def _entry(self, context: Context, check: bool = True) -> TaskEntry:
        """The entry's identity, client and shards, once (``check``: see ``_shards``)."""
        identity = self._identity = task_identity(context)
        return TaskEntry(identity, self._client(), self._shards(identity, check))

    def _wait(self, context: Context, trigger: KueueFollowTrigger[Any]) -> dict[str, Any]:
        """Defer to the triggerer; in blocking mode run the same trigger here and resume the way Airflow
        resumes a deferred task (``resume_execution``): one entry into ``execute_complete`` for both."""
        if self.deferrable:
            self.defer(trigger=trigger, method_name=RESUME_METHOD)
        event = asyncio.run(trigger.first_event())
        result: dict[str, Any] = self.resume_execution(RESUME_METHOD, {"event": event}, context)
        return result

    # --- the final event -> result or failure ---------------------------------------------------------------
    def execute_complete(self, context: Context, event: dict[str, Any] | None = None) -> dict[str, Any]:
        entry = self._entry(context, check=False)
        if not event:
            raise self._failure("the trigger ended without an event", {})
        self.resolved_namespace()
        typed = KueueEvent.from_dict(event)
        if typed.status == "deadline_risk":
            return self._escalate(context, typed, entry)
        identity, shards = entry.identity, entry.shards
        result, message = self._result(identity, typed, shards)
        send_run_metrics(result, typed.status, identity, self.queue_name, self.kind)
        if typed.status == "success":
            self.log.info("%s; result: %s", message, json.dumps(result, sort_keys=True))
            result = self._succeeded(result, shards)
            shards.clean_up_after_success()
            return result
        if typed.status == "failed":
            message += self._log_tails(typed)
        message += self._stop_after_failure(typed)
        raise self._failure(f"{typed.status}: {message}", event)

    def _escalate(self, context: Context, event: KueueEvent, entry: TaskEntry) -> dict[str, Any]:
        """The ETA passed the deadline (less the margin): take ``on_deadline_risk``'s steps, then wait again
        with a trigger that only keeps the ETA."""
        self.log.warning("%s: escalating", event.message or "deadline at risk")
        client = entry.client
        obj = client.get(self.resolved_namespace(), event.name)
        if obj is None:
            raise self._failure(
                f"{self.kind} {self.resolved_namespace()}/{event.name} is gone (deleted while the task "
                "escalated)",
                event.to_dict(),
            )
        escalated = self._deadlines.escalate(context, event, client, obj, self._spill(entry))
        self._name, self._uid = escalated.obj["metadata"]["name"], escalated.obj["metadata"].get("uid")
        released = released_so_far(event.result)  # the next trigger counts on from the quota released so far
        trigger = self._trigger_for(
            WaitOn(escalated.obj, entry.shards, escalated.plan, escalated.queue_name, released)
        )
        return self._wait(context, trigger)

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
