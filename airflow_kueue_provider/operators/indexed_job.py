"""``KueueIndexedJobOperator``: one Kueue-queued IndexedJob per task, waited for through the queue.

The Job kind of the operator template (``kueue_operator``): its parameters, its manifest, its trigger, and
what only it has here (a ledger that retries only the unfinished shards, a parallelism ramp, partial
admission, spilling to another queue, cost figures per Job).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from typing import Any, ClassVar

import yaml

from ..airflow_compat import AirflowException, AirflowFailException
from ..hooks.kind_client import JobClient
from ..kueue.airflow_identity import AirflowIdentity, deterministic_job_name
from ..kueue.attempt_figures import AttemptFigures, CostModel, status_figures
from ..kueue.index_set import IndexSet
from ..kueue.job_manifest import build_indexed_job
from ..kueue.job_spec import IndexedJobSpec, InvalidJobSpec
from ..kueue.job_template import as_mapping, template_main_container
from ..kueue.job_validation import validate_untemplated
from ..kueue.ledger import RunLedger, attempt_status
from ..kueue.names import ELASTIC_JOB_ANNOTATION
from ..kueue.parallelism_ramp import ParallelismRamp
from ..kueue.pod_policy import violations, with_restricted_defaults
from ..kueue.retry_policy import PER_INDEX_DEFAULT, PerIndexDefault, per_index_retries
from ..kueue.spill import SPILL_NAME_VARIANT, spill_taken
from ..kueue.topology import InvalidTopology, TopologyRequest, with_topology
from ..kueue.trigger_event import KueueEvent
from ..triggers.kueue_job import KueueJobTrigger
from .checkpointing import CheckpointSession
from .deadline_handling import Spill
from .deadline_spill import SpillOutcome, spill
from .failures import KueueJobFailed
from .k8s_models import from_secrets, plain, secret_names
from .kueue_operator import KueueOperator, Shards, WaitOn
from .run_figures import JobLister, event_figures, shard_summary, task_instance_totals
from .settings import configured_pod_policy
from .task_facts import created_epoch, task_identity
from .template_file import TemplateFile, env_items, joined


class KueueIndexedJobOperator(KueueOperator):
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
    # "config.yaml" included). job_template alone is read as a file (see TemplateFile).
    template_ext: Sequence[str] = ()
    template_fields_renderers: ClassVar[dict[str, str]] = {"job_template": "yaml", "env": "json"}
    kind = "Job"

    def __init__(
        self,
        *,
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
        backoff_limit_per_index: int | PerIndexDefault | None = PER_INDEX_DEFAULT,
        max_failed_indexes: int | None = None,
        non_retriable_exit_codes: Sequence[int] | None = None,
        ttl_seconds_after_finished: int | None = 86400,
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
        parallelism_ramp: ParallelismRamp | dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(keep_on_failure=keep_job_on_failure, **kwargs)
        for name, value, alias, other in (
            ("env", env, "env_vars", env_vars),
            ("resources", resources, "container_resources", container_resources),
        ):
            if value is not None and other is not None:
                raise AirflowFailException(
                    f"{self.task_id}: set {name} or {alias} (the same thing), not both"
                )
        secret_env, secret_env_from, secret_volumes, secret_mounts = from_secrets(secrets)
        self.image = image
        self.cmds = cmds
        self.arguments = arguments
        env = plain(env if env is not None else env_vars)
        if secret_env:
            env = [*env_items(env), *secret_env]
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
        self.volumes = joined(plain(volumes), secret_volumes)
        self.volume_mounts = joined(plain(volume_mounts), secret_mounts)
        self.env_from = joined(plain(env_from), secret_env_from)
        self.image_pull_secrets = secret_names(image_pull_secrets)
        self.image_pull_policy = image_pull_policy
        self.security_context = plain(security_context)
        self.container_security_context = plain(container_security_context)
        self.backoff_limit_per_index = backoff_limit_per_index
        self.max_failed_indexes = max_failed_indexes
        self.non_retriable_exit_codes = non_retriable_exit_codes
        self.ttl_seconds_after_finished = ttl_seconds_after_finished
        self.keep_job_on_failure = keep_job_on_failure
        self.job_template = TemplateFile.wrap(plain(job_template))
        self.labels = labels
        self.annotations = annotations
        self.node_selector = node_selector
        self.service_account_name = service_account_name
        self.job_name_prefix = job_name_prefix
        self.parallelism_ramp = ParallelismRamp.from_param(parallelism_ramp)
        self._check_untemplated()

    def _check_untemplated(self) -> None:
        """Every check no template can change, when the DAG is parsed: a bad count, quantity, retry setting,
        ramp or timeout fails the DAG's import with the message, and no run ever starts. (The rest, and these
        again, are checked at run time, after rendering, before anything is created.)"""
        template = self.job_template if isinstance(self.job_template, Mapping) else None
        placeholder = "parse-time-check"
        spec = IndexedJobSpec(
            name=placeholder,
            namespace="default",
            queue_name=placeholder,
            image=placeholder,
            **self._untemplated_spec(template),
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

    # --- 1. build and validate (no cluster call before this passes) ---------------------------------------
    def build_manifest(self, identity: AirflowIdentity) -> dict[str, Any]:
        template = self._template()
        template_image = template_main_container(template).get("image")
        spec = IndexedJobSpec(
            name=deterministic_job_name(identity, self.job_name_prefix, per_try=True),
            namespace=self.resolved_namespace(),
            queue_name=self.queue_name,
            image=self.image or (str(template_image) if template_image else ""),
            cmds=self.cmds,
            arguments=self.arguments,
            env=self.env,
            priority_class=self.priority_class,
            labels=self.labels,
            annotations=self._pod_annotations(),
            node_selector=self.node_selector,
            service_account_name=self.service_account_name,
            volumes=self.volumes,
            volume_mounts=self.volume_mounts,
            env_from=self.env_from,
            job_template=template,
            identity=identity,
            job_annotations={ELASTIC_JOB_ANNOTATION: "true"} if self.parallelism_ramp else None,
            **self._untemplated_spec(template),
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

    def _untemplated_spec(self, template: Mapping[str, Any] | None) -> dict[str, Any]:
        """The spec fields no template changes: checked when the DAG is parsed, and built at run time."""
        return {
            "completions": self.completions,
            "parallelism": self.parallelism_ramp.start if self.parallelism_ramp else self.parallelism,
            "min_parallelism": self.min_parallelism,
            "resources": self.job_resources,
            "spot": self.spot,
            "backoff_limit_per_index": per_index_retries(
                self.backoff_limit_per_index, as_mapping((template or {}).get("spec"))
            ),
            "max_failed_indexes": self.max_failed_indexes,
            "non_retriable_exit_codes": self.non_retriable_exit_codes,
            "ttl_seconds_after_finished": self.ttl_seconds_after_finished,
            "tolerations": self.tolerations,
            "affinity": self.affinity,
            "image_pull_secrets": self.image_pull_secrets,
            "image_pull_policy": self.image_pull_policy,
            "security_context": self.security_context,
            "container_security_context": self.container_security_context,
        }

    def _pod_annotations(self) -> Mapping[str, str] | None:
        """``annotations``, with ``topology``'s Kueue annotation (set through ``topology=`` only)."""
        try:
            return with_topology(self.annotations, self.topology)
        except InvalidTopology as exc:
            raise AirflowFailException(f"{self.task_id}: {exc}") from None

    # --- 2. the Job kind's part of the operator template (kueue_operator) --------------------------------
    def _client(self) -> JobClient:
        return JobClient(self.kubernetes_conn_id)

    def _shard_count(self) -> int:
        return self.completions

    def _shards_to_run(
        self, shards: Shards, previous: list[dict[str, Any]]
    ) -> tuple[IndexSet, RunLedger | None]:
        return shards.remaining(previous)

    def _shape(self, manifest: dict[str, Any], shards: Shards, indexes: IndexSet) -> None:
        shards.shape_job(manifest, indexes)

    def _trigger_for(self, wait: WaitOn) -> KueueJobTrigger:
        return KueueJobTrigger(
            job_name=wait.obj["metadata"]["name"],
            namespace=self.resolved_namespace(),
            queue_name=wait.queue_name or self.queue_name,
            kubernetes_conn_id=self.kubernetes_conn_id,
            max_failed_indexes=self.max_failed_indexes,
            queue_timeout=self.queue_timeout,
            submitted_at=created_epoch(wait.obj),
            ledger=wait.shards.trigger_ledger(),
            ramp=self._ramp_for(wait.obj),
            job_uid=wait.obj["metadata"].get("uid"),
            workload_timeout=self.workload_timeout,
            start_timeout=self.start_timeout,
            deadline=wait.plan.to_dict() if wait.plan else None,
            deferred_at=time.time(),
            released_before=wait.released_before,
        )

    def _target_parallelism(self) -> int:
        return min(self.parallelism or self.completions, self.completions)

    def _ramp_for(self, job: dict[str, Any]) -> dict[str, Any] | None:
        """The ramp the trigger drives, capped by what this Job runs (a retry may run fewer shards)."""
        if self.parallelism_ramp is None:
            return None
        target = min(self._target_parallelism(), int(job["spec"].get("completions") or self.completions))
        return self.parallelism_ramp.toward(target).to_dict()

    def _nothing_left(
        self, identity: AirflowIdentity, shards: Shards, ledger: RunLedger | None
    ) -> dict[str, Any]:
        assert isinstance(shards, CheckpointSession) and ledger is not None  # only a ledger says so
        return {**shards.result(ledger, None), **self._totals(identity, None, ledger)}

    def _result(
        self, identity: AirflowIdentity, event: KueueEvent, shards: Shards
    ) -> tuple[dict[str, Any], str]:
        """Over every attempt: the ledger's shards (with checkpointing) and the figures of every Job."""
        result, message = event.result_keys(), event.message
        spot = self.spot and not spill_taken(event.escalations)  # a spill runs on-demand
        current = event_figures(
            event.to_dict(), self._cost_model(), self._target_parallelism(), spot, identity.try_number
        )
        client = self._client()
        read_job = functools.partial(client.get, self.resolved_namespace())
        result, ledger = shards.recorded_result(result, attempt_status(event.status), current, read_job)
        if current is not None:
            result.update(self._totals(identity, current, ledger))
            message = shard_summary(message, result, ledger, current.job_name)
        return result, message

    def _totals(
        self, identity: AirflowIdentity, current: AttemptFigures | None, ledger: RunLedger | None
    ) -> dict[str, Any]:
        """The result's figures over every Job of the task instance (docs/results.md)."""
        hook = self._client().hook
        jobs = JobLister(hook, self.resolved_namespace(), identity, self.spot, self._deadlines.spill_to)
        return task_instance_totals(current, ledger, self._cost_model(), jobs)

    def _cost_model(self) -> CostModel:
        template_resources = template_main_container(self._template()).get("resources")
        return CostModel((self.job_resources or template_resources or {}).get("requests"), self.vm_price)

    def _spill(self) -> Spill | None:
        return self._spill_job

    def _spill_job(self, job: dict[str, Any], event: KueueEvent, context: Any) -> SpillOutcome:
        """``spill_to``: the Job's unfinished shards to the spill queue, as this try's spill Job."""
        identity = task_identity(context)
        client = self._client()
        session = self._shards(identity, check=False)
        assert isinstance(session, CheckpointSession) and self._deadlines.spill_to  # spill_to needs both
        spill_name = deterministic_job_name(
            identity, self.job_name_prefix, per_try=True, variant=SPILL_NAME_VARIANT
        )
        return spill(
            client.hook,
            job,
            manifest=self.build_manifest(identity),
            spill_name=spill_name,
            queue_name=self._deadlines.spill_to,
            identity=identity,
            session=session,
            hand_pods_their_sas=lambda made, token: self._hand_pods_their_sas(client, session, made, token),
            why=event.message or "deadline at risk",
            figures=status_figures(
                job, self._cost_model(), self.spot, identity.try_number, now=datetime.now(timezone.utc)
            ),
        )

    def _failed_by_job(self, event: KueueEvent) -> dict[str, str]:
        failed = event.result.get("failed_indexes")
        return {event.name: str(failed)} if failed else {}

    def _tail_heading(self, job_name: str, index: int) -> str:
        return f"index {index}"  # the task's one Job

    def _failure(self, message: str, event: Mapping[str, Any]) -> AirflowException:
        return KueueJobFailed(message, dict(event))

    def _template(self) -> Mapping[str, Any] | None:
        """``job_template`` as a Job mapping: read (an unrendered file), parsed (YAML text) and checked."""
        template = self.job_template
        if isinstance(template, TemplateFile):  # not rendered: build_manifest called outside a task run
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
