"""``KueueIndexedJobOperator``: one Kueue-queued IndexedJob per task, waited for through the queue."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any, ClassVar

import yaml
from airflow.sdk import BaseOperator
from kubernetes.client.rest import ApiException

from ..airflow_compat import AirflowException, AirflowFailException
from ..hooks.blob_store import BlobConfigError, BlobStoreError
from ..hooks.kueue_hook import KueueHook
from ..kueue.airflow_identity import AirflowIdentity, deterministic_job_name
from ..kueue.attempt_figures import AttemptFigures, CostModel, job_figures
from ..kueue.cost import VmPrice
from ..kueue.deadline import (
    DEADLINE_RESULT_KEYS,
    DeadlinePlan,
    DeadlineValue,
    InvalidDeadline,
    default_margin,
    margin_covers_relative_deadline,
    resolve_deadline,
    submit_warning,
    taken_before,
)
from ..kueue.index_set import IndexSet
from ..kueue.job_manifest import build_indexed_job
from ..kueue.job_progress import released_so_far
from ..kueue.job_spec import IndexedJobSpec, InvalidJobSpec
from ..kueue.job_template import as_mapping, template_main_container
from ..kueue.job_validation import validate_untemplated
from ..kueue.ledger import RunLedger, attempt_status
from ..kueue.names import DEADLINE_ANNOTATION, ELASTIC_JOB_ANNOTATION, ESCALATIONS_ANNOTATION
from ..kueue.parallelism_ramp import ParallelismRamp
from ..kueue.pod_policy import violations, with_restricted_defaults
from ..kueue.quota_guard import DEFAULT_WORKLOAD_TIMEOUT
from ..kueue.result import JobResult
from ..kueue.retry_policy import PER_INDEX_DEFAULT, PerIndexDefault, per_index_retries
from ..kueue.spill import SPILL_NAME_VARIANT, spill_taken
from ..kueue.start_guard import DEFAULT_START_TIMEOUT
from ..kueue.topology import InvalidTopology, TopologyRequest, with_topology
from ..triggers.kueue_job import KueueJobTrigger
from .checkpointing import Checkpointing, CheckpointSession
from .deadline_escalation import DeadlineEscalation, InvalidEscalation, take_steps
from .deadline_spill import SpillOutcome, spill
from .job_submission import create_or_adopt, reattachable
from .k8s_models import from_secrets, plain, secret_names
from .kueue_link import KueueJobLink
from .run_figures import JobLister, event_figures, shard_summary, task_instance_totals
from .settings import configured_pod_policy
from .task_facts import check_positive_seconds, created_epoch, seconds, task_identity

if TYPE_CHECKING:
    from airflow.sdk import Context

LOG_TAIL_INDEXES = 5


class KueueJobFailed(AirflowException):
    """The task's Job failed, timed out in the queue, or could not run: ``status``, ``job_name``,
    ``namespace`` and ``failed_indexes`` (an interval string) say which and where. Airflow retries it like
    any task failure (bad input fails earlier, with AirflowFailException, without retries)."""

    def __init__(self, message: str, event: dict[str, Any]) -> None:
        super().__init__(message)
        self.status: str | None = event.get("status")
        self.job_name: str | None = event.get("job_name")
        self.namespace: str | None = event.get("namespace")
        self.failed_indexes: str = str(event.get("failed_indexes") or "")


class KueueIndexedJobOperator(BaseOperator):
    """Run ``completions`` shards as a batch/v1 Indexed Job in a Kueue LocalQueue and wait for every index.

    Each pod gets ``JOB_COMPLETION_INDEX`` (its shard). The task defers while Kueue queues, admits, evicts
    and requeues the Job: a long queue wait is not a failure unless ``queue_timeout`` is set. It returns a
    result whose times and cost cover every Job of the task instance (retries, a spill) and whose other keys
    say which are per attempt (docs/results.md), and fails only when the Job fails or more indexes fail
    than ``max_failed_indexes``. Bad input that no template changes fails when the DAG is parsed.
    A retry reattaches to a Job that still runs (or already completed) instead of creating another one.

    :param queue_name: the Kueue LocalQueue in ``namespace``.
    :param namespace: the Jobs' namespace; default: the kubernetes connection's ``namespace`` extra, else
        ``default``.
    :param job_template: a batch/v1 Job (dict, ``V1Job``, YAML text or a ``.yaml``/``.yml`` file path, found
        and rendered like any template file) to start from; the other parameters are applied on top of it.
        Only this parameter is read as a file: ``arguments=["--config", "config.yaml"]`` stays a string.

    Pod-spec parameters take KubernetesPodOperator's names and meanings, as Kubernetes client models
    (``V1EnvVar``, ``V1ResourceRequirements``, ``V1Toleration``, ...) or their dicts: ``env_vars`` (or
    ``env``), ``container_resources`` (or ``resources``), ``tolerations``, ``affinity``, ``volumes``,
    ``volume_mounts``, ``env_from``, ``secrets`` (the cncf provider's ``Secret``), ``image_pull_secrets``,
    ``image_pull_policy``, ``security_context`` (the pod's) and ``container_security_context``. They apply to
    the shard container (the template's container named ``main``, else its first).
    :param min_parallelism: Kueue's partial admission: when ``parallelism`` pods do not fit the queue's free
        quota, Kueue may start the Job with fewer, down to this many (it lowers the Job's parallelism for the
        run; the shards are the same, they take longer). Between 1 and ``parallelism`` - 1. The log and the
        result's ``admitted_parallelism`` say what it got.
    :param topology: Kueue's topology-aware scheduling: ``"topology.kubernetes.io/zone"`` (the pods must share
        one domain of that level), ``{"preferred": "kubernetes.io/hostname"}`` (as few domains as fit) or
        ``TopologyRequest(level, required=...)``. The level must be one of the ResourceFlavor's Topology. The
        log and the result's ``topology_placement`` say where Kueue put the pods.
    :param backoff_limit_per_index: retries of each index (default 1, or what ``job_template`` sets): an
        index that fails more often fails alone, the others go on, and the task fails only by
        ``max_failed_indexes`` (or at the end when any index failed). ``None``: Kubernetes' whole-Job
        ``backoffLimit`` (6 pod failures anywhere fail every shard).
    :param non_retriable_exit_codes: exit codes that end their index at once, without a retry (a bad
        input): a ``podFailurePolicy`` rule with ``action: FailIndex``.
    :param queue_timeout: fail (and delete the Job) if it is not admitted within this time.
    :param workload_timeout: seconds Kueue has to create the Job's Workload (default 60). The Job is created
        suspended, so it runs only once Kueue admits it; a Job Kueue does not pick up (a namespace Kueue does
        not manage, its webhook or controller missing) is deleted after this and the task fails with the
        likely cause.
    :param start_timeout: once admitted, how long the pods may take to start (default 600 s). After that, pods
        that cannot start (an image that never pulls, a container config error, pods the Job controller cannot
        create, no node that fits) fail the task with that reason and the Job is deleted to free its quota.
    :param keep_job_on_failure: keep a Job that still runs when the task fails (default: delete it, so it
        stops holding quota).
    :param spot: tolerate AKS Spot nodes and do not count Spot evictions (DisruptionTarget) as failures.
    :param checkpointing: a Blob connection id, or ``Checkpointing(...)`` / its dict: keeps a per-shard ledger
        so that a retry runs only the shards that did not finish, and tells each pod where to checkpoint.
    :param parallelism_ramp: ``ParallelismRamp(start, step, every_seconds)``: start with ``start`` pods and
        add ``step`` more every ``every_seconds`` up to ``parallelism``, so a large Job does not pull its
        image on every node at once (the Job is elastic: Kueue admits each raise as a Workload slice).
    :param vm_price: ``VmPrice(...)`` or a dict of its fields, for the result's ``estimated_cost_usd``
        (default: Standard_D16ds_v5 list prices, on-demand and Spot).
    :param deadline: when the results are due: a time of day (``"07:00"``, ``"07:00 Europe/London"``; the
        first after the DAG run started), an ISO date-time with an offset, an aware ``datetime``, or a
        ``timedelta`` (or seconds) from the run's start; templated. The trigger compares its ETA with it and
        logs "deadline 07:00 UTC: on track / AT RISK"; the result gets ``deadline`` and ``eta_history``.
    :param deadline_margin: escalate once the late end of the ETA comes within this of the deadline (default:
        a tenth of the time from submit to the deadline, at most 10 min). With no estimate yet (a queue that
        does not move, no index finished), once this much is left. A deadline less its margin already past
        at submit is logged as a warning (and at parse time, for a relative deadline the margin covers).
    :param on_deadline_risk: ``DeadlineEscalation(raise_priority=..., notify=...)`` or its dict (from
        ``airflow_kueue_provider.operators.deadline_escalation``): taken once per task instance, when the run
        is at risk (the task resumes in a worker, escalates, and defers again; a retry does not escalate
        again); listed in the result's ``escalations``.
    :param deferrable: True by default, whatever ``[operators] default_deferrable`` says: a queue wait can
        last an hour and must not hold a worker slot. False waits in the worker with the same async logic.
    """

    template_fields: Sequence[str] = (
        "queue_name",
        "namespace",
        "image",
        "cmds",
        "arguments",
        "env",
        "job_template",
        "labels",
        "annotations",
        "node_selector",
        "volumes",
        "volume_mounts",
        "env_from",
        "deadline",
    )
    # No template_ext: it would read *every* templated string ending in .yaml as a file (an argument
    # "config.yaml" included). job_template alone is read as a file (see _TemplateFile).
    template_ext: Sequence[str] = ()
    template_fields_renderers: ClassVar[dict[str, str]] = {"job_template": "yaml", "env": "json"}
    ui_color = "#d4e9f7"
    operator_extra_links = (KueueJobLink(),)

    def __init__(
        self,
        *,
        queue_name: str,
        namespace: str | None = None,
        image: str | None = None,
        cmds: list[str] | None = None,
        arguments: list[str] | None = None,
        env: Mapping[str, str] | list[Any] | None = None,
        env_vars: Mapping[str, str] | list[Any] | None = None,
        completions: int = 1,
        parallelism: int | None = None,
        min_parallelism: int | None = None,
        topology: TopologyRequest | str | dict[str, Any] | None = None,
        resources: Mapping[str, Any] | Any | None = None,
        container_resources: Mapping[str, Any] | Any | None = None,
        priority_class: str | None = None,
        spot: bool = False,
        backoff_limit_per_index: int | PerIndexDefault | None = PER_INDEX_DEFAULT,
        max_failed_indexes: int | None = None,
        non_retriable_exit_codes: Sequence[int] | None = None,
        ttl_seconds_after_finished: int | None = 86400,
        queue_timeout: timedelta | float | None = None,
        workload_timeout: timedelta | float = DEFAULT_WORKLOAD_TIMEOUT,
        start_timeout: timedelta | float = DEFAULT_START_TIMEOUT,
        keep_job_on_failure: bool = False,
        job_template: Mapping[str, Any] | str | Any | None = None,
        labels: Mapping[str, str] | None = None,
        annotations: Mapping[str, str] | None = None,
        node_selector: Mapping[str, str] | None = None,
        service_account_name: str | None = None,
        tolerations: list[Any] | None = None,
        affinity: Mapping[str, Any] | Any | None = None,
        volumes: list[Any] | None = None,
        volume_mounts: list[Any] | None = None,
        env_from: list[Any] | None = None,
        secrets: list[Any] | None = None,
        image_pull_secrets: str | list[Any] | None = None,
        image_pull_policy: str | None = None,
        security_context: Mapping[str, Any] | Any | None = None,
        container_security_context: Mapping[str, Any] | Any | None = None,
        job_name_prefix: str | None = None,
        checkpointing: Checkpointing | dict[str, Any] | str | None = None,
        parallelism_ramp: ParallelismRamp | dict[str, Any] | None = None,
        vm_price: VmPrice | dict[str, Any] | None = None,
        deadline: DeadlineValue | None = None,
        deadline_margin: timedelta | float | None = None,
        on_deadline_risk: DeadlineEscalation | dict[str, Any] | None = None,
        kubernetes_conn_id: str = "kubernetes_default",
        deferrable: bool = True,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        for name, value, alias, other in (
            ("env", env, "env_vars", env_vars),
            ("resources", resources, "container_resources", container_resources),
        ):
            if value is not None and other is not None:
                raise AirflowFailException(
                    f"{self.task_id}: set {name} or {alias} (the same thing), not both"
                )
        secret_env, secret_env_from, secret_volumes, secret_mounts = from_secrets(secrets)
        self.queue_name = queue_name
        self.namespace = namespace
        self.image = image
        self.cmds = cmds
        self.arguments = arguments
        env = plain(env if env is not None else env_vars)
        if secret_env:
            env = [*_env_items(env), *secret_env]
        self.env = env
        self.completions = completions
        self.parallelism = parallelism
        self.min_parallelism = min_parallelism
        try:
            self.topology = TopologyRequest.from_param(topology)
        except InvalidTopology as exc:
            raise AirflowFailException(f"{self.task_id}: {exc}") from None
        # BaseOperator.resources means executor resources; the pods' requests/limits live here.
        self.job_resources = plain(resources if resources is not None else container_resources)
        self.tolerations = plain(tolerations)
        self.affinity = plain(affinity)
        self.volumes = _joined(plain(volumes), secret_volumes)
        self.volume_mounts = _joined(plain(volume_mounts), secret_mounts)
        self.env_from = _joined(plain(env_from), secret_env_from)
        self.image_pull_secrets = secret_names(image_pull_secrets)
        self.image_pull_policy = image_pull_policy
        self.security_context = plain(security_context)
        self.container_security_context = plain(container_security_context)
        self.priority_class = priority_class
        self.spot = spot
        self.backoff_limit_per_index = backoff_limit_per_index
        self.max_failed_indexes = max_failed_indexes
        self.non_retriable_exit_codes = non_retriable_exit_codes
        self.ttl_seconds_after_finished = ttl_seconds_after_finished
        self.queue_timeout = None if queue_timeout is None else seconds(queue_timeout)
        self.workload_timeout = seconds(workload_timeout)
        self.start_timeout = seconds(start_timeout)
        self.keep_job_on_failure = keep_job_on_failure
        self.job_template = _TemplateFile.wrap(plain(job_template))
        self.labels = labels
        self.annotations = annotations
        self.node_selector = node_selector
        self.service_account_name = service_account_name
        self.job_name_prefix = job_name_prefix
        self.checkpointing = checkpointing
        self.parallelism_ramp = ParallelismRamp.from_param(parallelism_ramp)
        self.vm_price = VmPrice.from_param(vm_price)
        self.deadline = deadline
        self.deadline_margin = (
            None if deadline_margin is None else timedelta(seconds=seconds(deadline_margin))
        )
        try:
            self.on_deadline_risk = DeadlineEscalation.from_param(on_deadline_risk)
            if deadline is not None and not (isinstance(deadline, str) and "{{" in deadline):
                resolve_deadline(deadline, datetime.now(timezone.utc))  # the form, early; templated: at run
        except (InvalidEscalation, InvalidDeadline) as exc:
            raise AirflowFailException(f"{self.task_id}: {exc}") from None
        if warning := margin_covers_relative_deadline(deadline, self.deadline_margin):
            self.log.warning("%s: %s", self.task_id, warning)
        if self.on_deadline_risk is not None and deadline is None:
            raise AirflowFailException(
                f"{self.task_id}: on_deadline_risk needs a deadline= to compare the ETA with"
            )
        spill_to = self.on_deadline_risk.spill_to if self.on_deadline_risk else None
        if spill_to is not None and checkpointing is None:
            raise AirflowFailException(
                f"{self.task_id}: on_deadline_risk spill_to needs checkpointing=: the ledger says which "
                "shards are left, and the spill Job's pods find their shards (and checkpoints) through it"
            )
        if spill_to is not None and spill_to == queue_name:
            raise AirflowFailException(
                f"{self.task_id}: on_deadline_risk spill_to={spill_to!r} is the task's own queue_name; name "
                "another LocalQueue (e.g. one on on-demand nodes)"
            )
        self.kubernetes_conn_id = kubernetes_conn_id
        self.deferrable = deferrable
        self._job_name: str | None = None
        self._job_uid: str | None = None
        self._check_untemplated()

    def _check_untemplated(self) -> None:
        """Every check no template can change, when the DAG is parsed: a bad count, quantity, retry setting,
        ramp or timeout fails the DAG's import with the message, and no run ever starts. (The rest, and these
        again, are checked at run time, after rendering, before anything is created.)"""
        template = self.job_template if isinstance(self.job_template, Mapping) else {}
        spec = IndexedJobSpec(
            name="parse-time-check",
            namespace="default",
            queue_name="parse-time-check",
            image="parse-time-check",
            completions=self.completions,
            parallelism=self.parallelism_ramp.start if self.parallelism_ramp else self.parallelism,
            min_parallelism=self.min_parallelism,
            resources=self.job_resources,
            spot=self.spot,
            backoff_limit_per_index=per_index_retries(
                self.backoff_limit_per_index, as_mapping(template.get("spec"))
            ),
            max_failed_indexes=self.max_failed_indexes,
            non_retriable_exit_codes=self.non_retriable_exit_codes,
            ttl_seconds_after_finished=self.ttl_seconds_after_finished,
            tolerations=self.tolerations,
            affinity=self.affinity,
            image_pull_secrets=self.image_pull_secrets,
            image_pull_policy=self.image_pull_policy,
            security_context=self.security_context,
            container_security_context=self.container_security_context,
        )
        try:
            validate_untemplated(spec)
        except InvalidJobSpec as exc:
            raise AirflowFailException(f"{self.task_id}: {exc}") from None
        ramp = self.parallelism_ramp
        if ramp is not None and (problems := ramp.problems(self._target_parallelism())):
            raise AirflowFailException(f"{self.task_id}: parallelism_ramp: {'; '.join(problems)}")
        if ramp is not None and self.min_parallelism is not None:
            raise AirflowFailException(
                f"{self.task_id}: min_parallelism and parallelism_ramp do not go together (Kueue refuses a "
                "parallelism change of a running Job that allows partial admission): set one of them"
            )
        if self.queue_timeout is not None and self.queue_timeout <= 0:
            raise AirflowFailException(
                f"{self.task_id}: queue_timeout must be positive, got {self.queue_timeout}"
            )
        check_positive_seconds(
            self.task_id, workload_timeout=self.workload_timeout, start_timeout=self.start_timeout
        )

    # --- 1. build and validate (no cluster call before this passes) ---------------------------------------
    def build_manifest(self, identity: AirflowIdentity) -> dict[str, Any]:
        template = self._template()
        template_image = template_main_container(template).get("image")
        spec = IndexedJobSpec(
            name=deterministic_job_name(identity, self.job_name_prefix, per_try=True),
            namespace=self.resolved_namespace(),
            queue_name=self.queue_name,
            image=self.image or (str(template_image) if template_image else ""),
            completions=self.completions,
            cmds=self.cmds,
            arguments=self.arguments,
            env=self.env,
            parallelism=self.parallelism_ramp.start if self.parallelism_ramp else self.parallelism,
            min_parallelism=self.min_parallelism,
            resources=self.job_resources,
            priority_class=self.priority_class,
            spot=self.spot,
            backoff_limit_per_index=per_index_retries(
                self.backoff_limit_per_index, as_mapping((template or {}).get("spec"))
            ),
            max_failed_indexes=self.max_failed_indexes,
            non_retriable_exit_codes=self.non_retriable_exit_codes,
            ttl_seconds_after_finished=self.ttl_seconds_after_finished,
            labels=self.labels,
            annotations=self._pod_annotations(),
            node_selector=self.node_selector,
            service_account_name=self.service_account_name,
            tolerations=self.tolerations,
            affinity=self.affinity,
            volumes=self.volumes,
            volume_mounts=self.volume_mounts,
            env_from=self.env_from,
            image_pull_secrets=self.image_pull_secrets,
            image_pull_policy=self.image_pull_policy,
            security_context=self.security_context,
            container_security_context=self.container_security_context,
            job_template=template,
            identity=identity,
            job_annotations={ELASTIC_JOB_ANNOTATION: "true"} if self.parallelism_ramp else None,
        )
        try:  # validates the spec first (job_validation)
            built = build_indexed_job(spec)
        except InvalidJobSpec as exc:
            raise AirflowFailException(f"{self.task_id}: {exc}") from None
        # The merged Job (template included) against the platform's pod policy, with safe defaults.
        job = with_restricted_defaults(built)
        if problems := violations(job, configured_pod_policy()):
            raise AirflowFailException(
                f"{self.task_id}: the Job breaks the cluster's pod policy ([kueue] config):\n- "
                + "\n- ".join(problems)
            )
        return job

    def _pod_annotations(self) -> Mapping[str, str] | None:
        """``annotations``, with ``topology``'s Kueue annotation (set through ``topology=`` only)."""
        try:
            return with_topology(self.annotations, self.topology)
        except InvalidTopology as exc:
            raise AirflowFailException(f"{self.task_id}: {exc}") from None

    # --- 2. submit or reattach, then wait -------------------------------------------------------------------
    def execute(self, context: Context) -> dict[str, Any]:
        identity = task_identity(context)
        manifest = self.build_manifest(identity)
        session = self._checkpoint_session(identity)
        hook = KueueHook(self.kubernetes_conn_id)
        self._check_local_queue(hook, self.queue_name, "queue_name")
        if self.on_deadline_risk is not None and self.on_deadline_risk.spill_to:
            if self.on_deadline_risk.spill_to == self.queue_name:  # a templated queue_name, rendered
                raise AirflowFailException(
                    f"{self.task_id}: on_deadline_risk spill_to={self.queue_name!r} is the task's own "
                    "queue_name; name another LocalQueue (e.g. one on on-demand nodes)"
                )
            self._check_local_queue(hook, self.on_deadline_risk.spill_to, "on_deadline_risk spill_to")
        plan = self._deadline_plan(context, hook)  # a bad deadline or priority class: nothing is created
        # 1. Reattach to a Job of this task instance that still runs (or completed) ...
        previous = hook.task_instance_jobs(self.resolved_namespace(), identity)
        plan = self._once_per_task_instance(plan, previous)
        submission = reattachable(previous, completed_counts=session is None)
        pod_sas: str | None = None
        if submission is None:
            # 2. ... or run what is left: every shard, or on a retry those the ledger has not seen finish.
            shards = IndexSet.range(0, self.completions)
            if session is not None:
                ledger = session.reconcile(previous)
                shards = ledger.remaining
                if ledger.attempts:
                    self.log.info("%s", ledger.retry_plan())
                if not shards:
                    self.log.info("every shard already finished in an earlier try; nothing to run")
                    return {**session.result(ledger, None), **self._totals(identity, None, ledger)}
                session.shape_job(manifest, shards)
                pod_sas = session.prepare_pod_access()  # before the Job: a bad connection creates nothing
            submission = create_or_adopt(hook, manifest, identity)
            if session is not None:  # also for an adopted Job: its worker may have died before recording it
                if pod_sas is not None:
                    self._hand_pods_their_sas(hook, session, submission.job, pod_sas)
                session.record_attempt(
                    submission.job["metadata"]["name"], session.job_shards(submission.job, shards)
                )
        job = submission.job
        self._job_name, self._job_uid = job["metadata"]["name"], job["metadata"].get("uid")
        if plan is not None:
            annotation = {DEADLINE_ANNOTATION: plan.deadline.isoformat()}
            hook.annotate_job(self.resolved_namespace(), self._job_name, annotation, uid=self._job_uid)
        verb = "reattached to" if submission.reattached else "submitted"
        self.log.info(
            "%s Job %s/%s (%s) in LocalQueue %s",
            verb,
            self.resolved_namespace(),
            self._job_name,
            submission.reason,
            self.queue_name,
        )
        # 3. Wait: deferred in the triggerer, or here with the same async logic.
        return self._wait(context, self._trigger_for(job, session, plan))

    def _trigger_for(
        self,
        job: dict[str, Any],
        session: CheckpointSession | None,
        plan: DeadlinePlan | None,
        queue_name: str | None = None,
        released_before: dict[str, Any] | None = None,
    ) -> KueueJobTrigger:
        return KueueJobTrigger(
            job_name=job["metadata"]["name"],
            namespace=self.resolved_namespace(),
            queue_name=queue_name or self.queue_name,
            kubernetes_conn_id=self.kubernetes_conn_id,
            max_failed_indexes=self.max_failed_indexes,
            queue_timeout=self.queue_timeout,
            submitted_at=created_epoch(job),
            ledger=session.trigger_ledger() if session else None,
            ramp=self._ramp_for(job),
            job_uid=job["metadata"].get("uid"),
            workload_timeout=self.workload_timeout,
            start_timeout=self.start_timeout,
            deadline=plan.to_dict() if plan else None,
            deferred_at=time.time(),
            released_before=released_before,
        )

    def _wait(self, context: Context, trigger: KueueJobTrigger) -> dict[str, Any]:
        if self.deferrable:
            self.defer(trigger=trigger, method_name="execute_complete")
        return self.execute_complete(context, asyncio.run(trigger.first_event()))

    def _deadline_plan(self, context: Context, hook: KueueHook) -> DeadlinePlan | None:
        """The rendered ``deadline`` against the DAG run's start; the escalation's priority class checked."""
        if self.deadline is None:
            return None
        dag_run = context.get("dag_run")
        started = getattr(dag_run, "start_date", None) or datetime.now(timezone.utc)
        try:
            at = resolve_deadline(self.deadline, started)
        except InvalidDeadline as exc:
            raise AirflowFailException(f"{self.task_id}: {exc}") from None
        escalation = self.on_deadline_risk
        raise_to = escalation.raise_priority if escalation is not None else None
        if raise_to and not self._priority_class_exists(hook, raise_to):
            raise AirflowFailException(
                f"{self.task_id}: on_deadline_risk raise_priority={raise_to!r}: no such "
                "WorkloadPriorityClass in the cluster; create it or name an existing one"
            )
        now = datetime.now(timezone.utc)
        margin = self.deadline_margin if self.deadline_margin is not None else default_margin(at, now)
        self.log.info("deadline %s UTC (margin %s)", f"{at:%Y-%m-%d %H:%M:%S}", margin)
        if warning := submit_warning(at, margin, now, escalates=escalation is not None):
            self.log.warning("%s", warning)
        return DeadlinePlan(at, margin, escalate=escalation is not None)

    def _once_per_task_instance(
        self, plan: DeadlinePlan | None, previous: list[dict[str, Any]]
    ) -> DeadlinePlan | None:
        """``on_deadline_risk`` is taken once per task instance: a retry (or a restarted worker) whose earlier
        Jobs record escalations keeps the ETA and the record, and takes no step again."""
        if plan is None or not plan.escalate or not (earlier := taken_before(previous)):
            return plan
        steps = ", ".join(sorted({s.get("step", "?") for s in earlier}))
        self.log.info(
            "on_deadline_risk was taken by an earlier try of this task instance (%s): not again", steps
        )
        return dataclasses.replace(plan, escalate=False, escalations=tuple(earlier))

    def _priority_class_exists(self, hook: KueueHook, name: str) -> bool:
        """WorkloadPriorityClasses are cluster-scoped; the workers' namespaced Role (deploy/rbac) may not read
        them, and then the name is used as given."""
        try:
            return hook.get_workload_priority_class(name) is not None
        except ApiException as exc:
            if exc.status != 403:
                raise
            self.log.warning(
                "cannot check that WorkloadPriorityClass %s exists (403: no cluster-scoped read); "
                "using it as given",
                name,
            )
            return True

    def _escalate(self, context: Context, event: dict[str, Any]) -> dict[str, Any]:
        """The ETA passed the deadline (less the margin): take each step of on_deadline_risk once (a spill
        that must wait, again when the trigger says the Job is back in its queue), then wait again with a
        trigger that only keeps the ETA."""
        self.log.warning("%s: escalating", event.get("message") or "deadline at risk")
        hook = KueueHook(self.kubernetes_conn_id)
        name, namespace = str(event["job_name"]), self.resolved_namespace()
        job = hook.get_job(namespace, name)
        if job is None:
            raise KueueJobFailed(f"Job {namespace}/{name} is gone (deleted while the task escalated)", event)
        identity = task_identity(context)
        session = self._checkpoint_session(identity, check=False)
        steps = list(event.get("escalations") or [])
        escalation, queue_name, spill_pending = self.on_deadline_risk, None, False
        if escalation is not None:
            if not event.get("spill_pending"):  # the first hand-back: every step; later: the spill alone
                steps = take_steps(escalation, hook, job, event, context)
            if escalation.spill_to and session is not None:
                spilled = self._spill(hook, job, session, identity, escalation.spill_to, event)
                steps = [s for s in steps if s.get("step") != "spill_to"] + [spilled.step]
                if spilled.job is not None:
                    job, queue_name = spilled.job, escalation.spill_to
                spill_pending = spilled.job is None
            recorded = {ESCALATIONS_ANNOTATION: json.dumps(steps)}
            if queue_name is not None:  # the spill Job: the deadline too, for the UI and kubectl
                recorded[DEADLINE_ANNOTATION] = str(event["deadline"])
            hook.annotate_job(namespace, job["metadata"]["name"], recorded, uid=job["metadata"].get("uid"))
        self._job_name, self._job_uid = job["metadata"]["name"], job["metadata"].get("uid")
        plan = DeadlinePlan(
            deadline=datetime.fromisoformat(str(event["deadline"])),
            margin=self._margin_of(event),
            escalate=False,
            escalations=tuple(steps),
            eta_history=tuple(event.get("eta_history") or ()),
            spill_pending=spill_pending,
        )
        released = released_so_far(event)  # the next trigger counts on from the quota released so far
        return self._wait(context, self._trigger_for(job, session, plan, queue_name, released))

    def _margin_of(self, event: dict[str, Any]) -> timedelta:
        """The margin the trigger used (a trigger of an earlier version did not send it)."""
        if event.get("deadline_margin_seconds") is not None:
            return timedelta(seconds=float(event["deadline_margin_seconds"]))
        if self.deadline_margin is not None:
            return self.deadline_margin
        return default_margin(datetime.fromisoformat(str(event["deadline"])), datetime.now(timezone.utc))

    def _spill(
        self,
        hook: KueueHook,
        job: dict[str, Any],
        session: CheckpointSession,
        identity: AirflowIdentity,
        queue_name: str,
        event: dict[str, Any],
    ) -> SpillOutcome:
        spill_name = deterministic_job_name(
            identity, self.job_name_prefix, per_try=True, variant=SPILL_NAME_VARIANT
        )
        return spill(
            hook,
            job,
            manifest=self.build_manifest(identity),
            spill_name=spill_name,
            queue_name=queue_name,
            identity=identity,
            session=session,
            hand_pods_their_sas=lambda made, token: self._hand_pods_their_sas(hook, session, made, token),
            why=str(event.get("message") or "deadline at risk"),
            figures=job_figures(
                job, self._cost_model(), self.spot, identity.try_number, now=datetime.now(timezone.utc)
            ),
        )

    def _hand_pods_their_sas(
        self, hook: KueueHook, session: CheckpointSession, job: dict[str, Any], token: str
    ) -> None:
        """The Secret with the pods' SAS, owned by the Job. The Job was created suspended, and a pod that
        starts before its Secret exists waits for it (the kubelet retries). If the Secret cannot be made,
        the Job goes too: its pods could never checkpoint."""
        try:
            if not hook.create_secret(session.sas_secret(job, token)):
                self.log.info(
                    "the Secret of Job %s exists already (this try's earlier worker)", job["metadata"]["name"]
                )
        except Exception:
            hook.delete_job(
                self.resolved_namespace(), job["metadata"]["name"], uid=job["metadata"].get("uid")
            )
            raise

    def _template(self) -> Mapping[str, Any] | None:
        """``job_template`` as a Job mapping: read (an unrendered file), parsed (YAML text) and checked."""
        template = self.job_template
        if isinstance(template, _TemplateFile):  # not rendered: build_manifest called outside a task run
            template = template.read(self.get_template_env())
        if isinstance(template, str):
            try:
                template = yaml.safe_load(template)
            except yaml.YAMLError as exc:
                raise AirflowFailException(f"{self.task_id}: job_template is not valid YAML: {exc}") from None
            if not isinstance(template, Mapping):
                raise AirflowFailException(
                    f"{self.task_id}: job_template must be a batch/v1 Job (a mapping), got "
                    f"{type(template).__name__}"
                )
        return template  # type: ignore[no-any-return]

    def resolved_namespace(self) -> str:
        """``namespace``, else the kubernetes connection's ``namespace`` extra, else ``default``."""
        if not self.namespace:
            self.namespace = KueueHook(self.kubernetes_conn_id).connection_namespace() or "default"
        return self.namespace

    def _target_parallelism(self) -> int:
        return min(self.parallelism or self.completions, self.completions)

    def _ramp_for(self, job: dict[str, Any]) -> dict[str, Any] | None:
        """The ramp the trigger drives, capped by what this Job runs (a retry may run fewer shards)."""
        if self.parallelism_ramp is None:
            return None
        target = min(self._target_parallelism(), int(job["spec"].get("completions") or self.completions))
        return self.parallelism_ramp.toward(target).to_dict()

    def _checkpoint_session(self, identity: AirflowIdentity, check: bool = True) -> CheckpointSession | None:
        """The try's checkpoint session; ``check`` fails fast on bad Blob configuration, before submitting."""
        config = Checkpointing.from_param(self.checkpointing)
        if config is None:
            return None
        session = CheckpointSession(config, identity, self.completions)
        if not check:
            return session
        if problem := config.pod_policy_problem(configured_pod_policy()):
            raise AirflowFailException(f"{self.task_id}: checkpointing: {problem}")
        try:
            session.check()
        except BlobConfigError as exc:
            raise AirflowFailException(f"{self.task_id}: checkpointing: {exc}") from None
        return session

    def _check_local_queue(self, hook: KueueHook, name: str, param: str) -> None:
        if hook.get_local_queue(self.resolved_namespace(), name) is not None:
            return
        existing = sorted(q["metadata"]["name"] for q in hook.list_local_queues(self.resolved_namespace()))
        have = (
            f"LocalQueues in {self.resolved_namespace()}: {', '.join(existing)}"
            if existing
            else f"there is no LocalQueue in namespace {self.resolved_namespace()}"
        )
        raise AirflowFailException(
            f"{self.task_id}: LocalQueue {name!r} does not exist in namespace "
            f"{self.resolved_namespace()!r} ({have}); set {param} to one of them or create it"
        )

    # --- 3. the final event -> result or failure --------------------------------------------------------
    def execute_complete(self, context: Context, event: dict[str, Any] | None = None) -> dict[str, Any]:
        if not event:
            raise KueueJobFailed("the trigger ended without an event", {})
        self.resolved_namespace()
        status, message = event.get("status"), event.get("message", "")
        if status == "deadline_risk":
            return self._escalate(context, event)
        result = {k: v for k, v in event.items() if k not in ("status", "message")}
        identity = task_identity(context)
        session = self._checkpoint_session(identity, check=False)
        spot = self.spot and not spill_taken(event.get("escalations") or ())  # a spill runs on-demand
        current = event_figures(
            event, self._cost_model(), self._target_parallelism(), spot, identity.try_number
        )
        ledger = None
        if session is not None and "completed_indexes" in result:
            outcome = attempt_status(status)
            result, ledger = self._record_in_ledger(session, result, outcome, current)
        if current is not None:
            result.update(self._totals(identity, current, ledger))
            message = shard_summary(message, result, ledger, current.job_name)
        if status == "success":
            self.log.info("%s; result: %s", message, json.dumps(result, sort_keys=True))
            if session is not None:
                session.clean_up_after_success()
            return result
        if status == "failed" and event.get("failed_indexes"):
            message += self._log_tails(event)
        message += self._stop_job_after_failure(event)
        raise KueueJobFailed(f"{status}: {message}", event)

    def _stop_job_after_failure(self, event: dict[str, Any]) -> str:
        """A failed task's Job must not keep holding quota: delete it unless it finished (or the user keeps
        it). Returns what to add to the failure message."""
        name = event.get("job_name")
        if self.keep_job_on_failure or not name or event.get("status") == "timeout":
            return ""
        try:
            what = KueueHook(self.kubernetes_conn_id).delete_job_unless_finished(
                event.get("namespace") or self.resolved_namespace(), name, uid=event.get("job_uid")
            )
        except Exception as exc:  # the failure itself matters more
            return f"\n(could not delete Job {name}: {exc}; delete it yourself to free its quota)"
        return "; its Job was still running and has been deleted" if what == "deleted" else ""

    def _totals(
        self, identity: AirflowIdentity, current: AttemptFigures | None, ledger: RunLedger | None
    ) -> dict[str, Any]:
        """The result's figures over every Job of the task instance (docs/results.md)."""
        spill_queue = self.on_deadline_risk.spill_to if self.on_deadline_risk else None
        hook = KueueHook(self.kubernetes_conn_id)
        jobs = JobLister(hook, self.resolved_namespace(), identity, self.spot, spill_queue)
        return task_instance_totals(current, ledger, self._cost_model(), jobs)

    def _cost_model(self) -> CostModel:
        template_resources = template_main_container(self._template()).get("resources")
        return CostModel((self.job_resources or template_resources or {}).get("requests"), self.vm_price)

    def _record_in_ledger(
        self, session: CheckpointSession, result: dict[str, Any], status: str, figures: AttemptFigures | None
    ) -> tuple[dict[str, Any], RunLedger | None]:
        """Write the attempt's end (and figures) to the ledger; Blob trouble costs the record, never the
        task's outcome. The result is over every attempt, and keeps the deadline's keys (JobResult is one
        Job's); the ledger is None when it could not be written."""
        deadline_keys = {k: result[k] for k in DEADLINE_RESULT_KEYS if k in result}
        job_result = JobResult.from_dict(result)
        try:
            ledger = session.finish(job_result.job_name, job_result, status, figures)
        except BlobStoreError as exc:
            self.log.warning(
                "could not update the ledger (%s); a rerun of this task catches it up from the Job", exc
            )
            job = KueueHook(self.kubernetes_conn_id).get_job(self.resolved_namespace(), job_result.job_name)
            written = session.result_without_ledger_write(job, job_result, status)
            return {**written, **deadline_keys}, None
        return {**session.result(ledger, job_result), **deadline_keys}, ledger

    def _log_tails(self, event: dict[str, Any]) -> str:
        indexes = list(IndexSet.parse(event["failed_indexes"]))[:LOG_TAIL_INDEXES]
        try:
            tails = KueueHook(self.kubernetes_conn_id).failed_index_log_tails(
                event["namespace"], event["job_name"], indexes
            )
        except Exception as exc:  # the failure itself matters more than its logs
            return f"\n(could not read the failed pods' logs: {exc})"
        return "".join(f"\n--- index {i}, last log lines ---\n{tail.rstrip()}" for i, tail in tails.items())

    def on_kill(self) -> None:
        """Blocking mode: the task was killed, so a Job still queued or running goes too; a finished one is
        kept, as in deferred mode (the trigger's on_kill)."""
        if self._job_name:
            what = KueueHook(self.kubernetes_conn_id).delete_job_unless_finished(
                self.resolved_namespace(), self._job_name, uid=self._job_uid
            )
            self.log.info("task killed; Job %s/%s: %s", self.resolved_namespace(), self._job_name, what)


def _env_items(env: Any) -> list[Any]:
    if env is None:
        return []
    if isinstance(env, Mapping):
        return [{"name": name, "value": value} for name, value in env.items()]
    return list(env)


def _joined(given: list[Any] | None, extra: list[Any]) -> list[Any] | None:
    return [*(given or []), *extra] if given is not None or extra else None


class _TemplateFile:
    """``job_template`` named as a ``.yaml``/``.yml`` file: Airflow renders a callable template field by
    calling it, so the file is found (DAG folder, ``template_searchpath``) and rendered for this field
    alone; the operator has no ``template_ext``, which would read every ``*.yaml`` string as a file."""

    SUFFIXES = (".yaml", ".yml")

    def __init__(self, path: str) -> None:
        self.path = path

    @classmethod
    def wrap(cls, value: Any) -> Any:
        if isinstance(value, str) and "\n" not in value and value.strip().endswith(cls.SUFFIXES):
            return cls(value.strip())
        return value

    def __call__(self, context: Any, jinja_env: Any) -> str:
        return str(jinja_env.get_template(self.path).render(**context))

    def read(self, jinja_env: Any) -> str:
        source, _, _ = jinja_env.loader.get_source(jinja_env, self.path)
        return str(source)

    def __str__(self) -> str:
        return self.path

    __repr__ = __str__
