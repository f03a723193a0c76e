"""The operator every job kind shares: ``execute`` and ``execute_complete`` as one template
(docs/design.md, "Job kinds").

A kind (``KueueIndexedJobOperator``, ``KueueJobSetOperator``) supplies its part (``operator_kind``): its
parameters, its manifest, its client (``hooks.kind_client``), its trigger, its checkpoint shaping and its
log tails; the template does the rest for every kind: the queue check, the deadline plan, reattach or
submit, the pods' checkpoint credentials, defer (or wait here), the result, the log tails and the delete
after a failure, ``on_kill``.

The parameters every kind takes are documented on ``KueueOperator``.
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperator

from ..hooks.cluster_target import ClusterTarget
from ..hooks.identity_key import identity_seal
from ..hooks.kind_client import KindClient
from ..kueue.figures.cost import VmPrice
from ..kueue.identity.airflow_identity import AirflowIdentity
from ..kueue.index_set import IndexSet
from ..kueue.progress.deadline import DeadlineValue
from ..kueue.progress.quota_guard import DEFAULT_WORKLOAD_TIMEOUT
from ..kueue.progress.start_guard import DEFAULT_START_TIMEOUT
from ..kueue.progress.trigger_event import KueueEvent
from ..triggers.log_stream import DEFAULT_LOG_BYTES_PER_SECOND
from .checkpointing import Checkpointing
from .deadline_escalation import DeadlineEscalation
from .failure_path import FailurePath
from .forecast_step import ForecastStep
from .job_submission import (
    Submission,
    adopted,
    checked_local_queues,
    create_or_adopt_object,
    earlier_objects,
    reattachable,
)
from .kueue_link import KueueJobLink
from .metrics import send_run_metrics
from .operator_kind import OperatorKind, Shards, TaskEntry, WaitOn
from .param_typos import check_parameter_names
from .settings import default_namespace, default_queue_name
from .shard_outputs import ShardOutputsStep, check_shard_outputs
from .submitted_object import no_wait_conflicts
from .task_facts import task_identity
from .template_params import TemplateParams, check_task_queues
from .try_shards import open_shards
from .waiting import DEFAULT_INLINE_WAIT, Waiting, inline_wait_seconds, log_plan

if TYPE_CHECKING:
    from airflow.sdk import Context


class KueueOperator(ForecastStep, ShardOutputsStep, Waiting, FailurePath, OperatorKind, BaseOperator):
    """The template of every kind, and the parameters every kind takes and passes on (``**kwargs``); "the
    object" is the task's Job or JobSet.

    :param queue_name: the LocalQueue in ``namespace`` (templated); unset: ``[kueue] default_queue_name``.
    :param namespace: templated; unset: ``[kueue] default_namespace``, the connection's extra, ``default``.
    :param workload_priority_class: a Kueue WorkloadPriorityClass: the Workload's priority, for admission
        order and preemption (the pods' Kubernetes PriorityClass is the Job kind's ``priority_class_name``).
    :param priority_class: ``workload_priority_class``'s earlier name; it still works (set one of them).
    :param spot: tolerate AKS Spot nodes and do not count Spot evictions (DisruptionTarget) as failures.
    :param queue_timeout: fail (and delete the object) if it is not admitted within this time (never after a
        first admission: a requeue after an eviction is not "never admitted").
    :param workload_timeout: seconds Kueue has to create the object's Workload (default 60); one Kueue does
        not pick up (its namespace unmanaged, its webhook or controller missing) is deleted, the task failed.
    :param start_timeout: once admitted, how long the pods may take to start (default 600 s); pods that cannot
        (an image that never pulls, a config error, no node that fits, ...) fail the task, the object deleted.
    :param keep_on_failure: the kind's ``keep_job_on_failure`` / ``keep_jobset_on_failure``: keep an object
        that still runs when the task fails (default: delete it, so it stops holding quota).
    :param checkpointing: a Blob connection id, or ``Checkpointing(...)`` / its dict: each pod learns where to
        checkpoint (the Job kind also keeps a per-shard ledger: a retry runs only unfinished shards).
    :param deadline: when the results are due (templated; docs/deadlines.md): ``"07:00"``, ``"07:00
        Europe/London"`` (the first after the DAG run started), an ISO date-time with an offset, an aware
        ``datetime``, or a ``timedelta`` (or seconds) from the run's start.
    :param deadline_margin: escalate once the late end of the ETA (with no ETA yet, the time left) comes
        within this of the deadline (default: a tenth of the time from submit to it, at most 10 minutes).
    :param on_deadline_risk: ``DeadlineEscalation(raise_priority=..., notify=..., spill_to=...)`` or its dict:
        taken once per task instance when the run is at risk; listed in the result's ``escalations``.
    :param kubernetes_conn_id: the cncf ``kubernetes`` connection (the Job kind templates it).
    :param cluster_context: another kubeconfig context than the connection's (as in KubernetesPodOperator;
        for the task, its trigger and the shared watch alike, as are the next two).
    :param config_file: another kubeconfig file than the connection's.
    :param in_cluster: in-cluster credentials or not, whatever the connection says.
    :param deferrable: True by default, whatever ``[operators] default_deferrable`` says (a queue wait must
        not hold a worker slot); False waits in the worker with the same async logic.
    :param inline_wait: a Job this try made that its forecast ends within this (default 30 s) is waited for
        in the worker, deferring only if it has not ended by then or, admitted, by its forecast end within
        the resume guard's 10 s more (docs/operator.md); None, 0: always defer.
    :param vm_price: ``VmPrice(...)`` or its dict, for the result's ``estimated_cost_usd`` (default:
        Standard_D16ds_v5 list prices, on-demand and Spot).
    :param wait_for_completion: False: submit (every check as usual), return a ``SubmittedObject`` record
        as XCom and succeed, for ``KueueJobSensor``; not with ``checkpointing``, ``deadline``, a ramp.
    :param get_logs: stream pod logs into the task log while it runs (default: only failed indexes' tails).
    :param log_indexes: with ``get_logs``: whose pods (an interval string, default ``"0"``; at most 10).
    :param log_bytes_per_second: with ``get_logs``: the cap over all streamed pods (default 16384).
    :param shard_outputs: with ``checkpointing``: each shard's ``mark_done`` output in the result
        (``shard_outputs``), or where they stay when too large (docs/results.md).
    """

    ui_color = "#d4e9f7"
    operator_extra_links = (KueueJobLink(),)

    def __init__(
        self,
        *,
        queue_name: str | None = None,
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
        inline_wait: timedelta | float | None = DEFAULT_INLINE_WAIT,
        vm_price: VmPrice | dict[str, Any] | None = None,
        wait_for_completion: bool = True,
        get_logs: bool = False,
        log_indexes: str | int = "0",
        log_bytes_per_second: int = DEFAULT_LOG_BYTES_PER_SECOND,
        shard_outputs: bool = False,
        **kwargs: Any,
    ) -> None:
        check_parameter_names(type(self), kwargs.get("task_id"), BaseOperator, kwargs)  # a typo: did you mean
        super().__init__(**kwargs)
        if not wait_for_completion:
            no_wait_conflicts(self.task_id, checkpointing=checkpointing, deadline=deadline)
        parsed = TemplateParams.parse(
            self.task_id,
            self.log,
            namespace=namespace,
            queue_name=queue_name or "",
            workload_priority_class=workload_priority_class,
            priority_class=priority_class,
            queue_timeout=queue_timeout,
            workload_timeout=workload_timeout,
            start_timeout=start_timeout,
            vm_price=vm_price,
            deadline=deadline,
            deadline_margin=deadline_margin,
            on_deadline_risk=on_deadline_risk,
            checkpointing=checkpointing,
        )
        self.queue_name = queue_name or ""  # empty: [kueue] default_queue_name at execute
        self.namespace = namespace
        self.priority_class = parsed.priority_class
        self.spot = spot
        self.queue_timeout = parsed.queue_timeout
        self.workload_timeout = parsed.workload_timeout
        self.start_timeout = parsed.start_timeout
        self.keep_on_failure = keep_on_failure
        self.vm_price = parsed.vm_price
        self.kubernetes_conn_id = kubernetes_conn_id
        self.cluster_context, self.config_file, self.in_cluster = cluster_context, config_file, in_cluster
        self.deferrable, self.inline_wait = deferrable, inline_wait_seconds(self.task_id, inline_wait)
        self.wait_for_completion, self.get_logs, self.log_indexes = wait_for_completion, get_logs, log_indexes
        self.log_bytes_per_second = log_bytes_per_second
        self.shard_outputs = check_shard_outputs(self.task_id, shard_outputs, checkpointing)
        self._log_plan = log_plan(self.task_id, self.description, get_logs, log_indexes, log_bytes_per_second)
        self.deadline = deadline
        self.deadline_margin = parsed.deadline_margin
        self._deadlines = parsed.deadlines
        self.on_deadline_risk = self._deadlines.escalation
        self.checkpointing = self._checkpointing = parsed.checkpointing

    # --- the template ---------------------------------------------------------------------------------------
    def cluster_target(self) -> ClusterTarget:
        """The connection and its overrides (after rendering: ``kubernetes_conn_id`` is templated)."""
        return ClusterTarget(self.kubernetes_conn_id, self.cluster_context, self.config_file, self.in_cluster)

    def resolved_namespace(self) -> str:
        """``namespace``, else ``[kueue] default_namespace``, the connection's ``namespace``, ``default``."""
        if not self.namespace:
            self.namespace = default_namespace() or self._client().hook.connection_namespace() or "default"
        return self.namespace

    def execute(self, context: Context) -> dict[str, Any]:
        seal = identity_seal()  # no key: a typed error naming the option, before anything is created
        self.queue_name = default_queue_name(self.task_id, self.queue_name)  # then the policy checks it
        check_task_queues(
            self.task_id, self.resolved_namespace(), self.queue_name, self.priority_class, self._deadlines
        )
        if not self.wait_for_completion:
            no_wait_conflicts(self.task_id, parallelism_ramp=getattr(self, "parallelism_ramp", None))
        entry = self._entry(context)
        identity, client, shards = entry.identity, entry.client, entry.shards
        manifest = self.build_manifest(identity)
        if spill_to := self._deadlines.spill_to:
            self._deadlines.check_spill_queue(self.queue_name)  # a templated queue_name, rendered
        given = {"queue_name": self.queue_name, "on_deadline_risk spill_to": spill_to}
        self._local_queues = checked_local_queues(client.hook, self.resolved_namespace(), given, self.task_id)
        plan = self._deadlines.plan(context, client, self.deadline)  # bad: nothing is created
        # 1. Reattach to an object of this task instance that still runs (or completed) ...
        previous = self._previous(client, identity, shards)
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
            self._deadlines.mark(manifest, plan)
            submission = self._submit(client, manifest, identity, shards, indexes)
        else:
            submission = adopted(client, submission, seal)
            self._reattached(client, shards, submission.job)
        obj, plan = submission.job, self._with_forecast(context, plan, client, submission)  # to the trigger
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
        if not self.wait_for_completion:  # 3. ... and hand it on to a KueueJobSensor,
            return self._submitted(WaitOn(obj, shards, plan))
        # 3. ... or wait: deferred in the triggerer, or here with the same async logic.
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

    def _previous(
        self, client: KindClient, identity: AirflowIdentity, shards: Shards
    ) -> list[dict[str, Any]]:
        """The objects of the task instance it may adopt (``earlier_objects``)."""
        return earlier_objects(client, self.resolved_namespace(), identity, identity_seal(), shards, self.log)

    def _entry(self, context: Context, check: bool = True) -> TaskEntry:
        """The entry's identity, client and shards, once (``check``: see ``open_shards``)."""
        identity = self._identity = task_identity(context)
        shards = open_shards(
            self.task_id, self._checkpointing, identity, self._shard_count(), self._packing, check
        )
        return TaskEntry(identity, self._client(), shards)

    # --- the final event -> result or failure ---------------------------------------------------------------
    def execute_complete(self, context: Context, event: dict[str, Any] | None = None) -> dict[str, Any]:
        entry = self._entry(context, check=False)
        if not event:
            raise self._failure("the trigger ended without an event", {})
        self.resolved_namespace()
        self.queue_name = default_queue_name(self.task_id, self.queue_name)
        typed = KueueEvent.from_dict(event)
        if typed.status == "deadline_risk":
            return self._escalate(context, typed, entry)
        result, message = self._result(entry.identity, typed, entry.shards)
        result, message = self._forecast_outcome(context, result, message, typed.status)
        self._deadlines.ended(result, typed.status)  # deadline_outcome (met or missed by how much), logged
        send_run_metrics(result, typed.status, entry.identity, self.queue_name, self.kind)
        if typed.status == "success":
            self._fail_tolerated_before_last_try(context, result, typed)  # max_failed_indexes: the last try's
            self.log.info("%s; result: %s", message, json.dumps(result, sort_keys=True))
            result = self._succeeded(result, entry.shards)
            if not self._keeps_records(result):  # the result points at the shards' done records
                entry.shards.clean_up_after_success()
            return result
        if typed.status == "failed":
            message += self._log_tails(typed)
        message += self._stop_after_failure(typed)
        raise self._failure(f"{typed.status}: {message}", event)
