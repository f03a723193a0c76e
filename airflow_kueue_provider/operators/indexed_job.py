"""``KueueIndexedJobOperator``: one Kueue-queued IndexedJob per task, waited for through the queue.

The Job kind of the operator template (``kueue_operator``): its parameters, its manifest, its trigger, and
what only it has here (a ledger that retries only the unfinished shards, a parallelism ramp, partial
admission, spilling to another queue, cost figures per Job). ``IndexedJobKind`` is the kind's part of the
template; ``KueueIndexedJobOperator`` adds the parameters (documented on it), their templating and their
parse-time checks (``job_inputs``, ``IndexedJobManifest``).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from ..hooks.identity_key import identity_seal
from ..kueue.checkpoints.ledger import RunLedger, attempt_status
from ..kueue.checkpoints.packing_choice import ShardDurationParam
from ..kueue.figures.attempt_figures import AttemptFigures, CostModel
from ..kueue.identity.airflow_identity import AirflowIdentity, deterministic_job_name
from ..kueue.index_set import IndexSet
from ..kueue.kinds.job import JOB
from ..kueue.progress.spill import SPILL_NAME_VARIANT, spill_taken
from ..kueue.progress.trigger_event import KueueEvent
from ..kueue.spec.job_template import template_main_container
from ..kueue.spec.parallelism_ramp import ParallelismRamp
from ..kueue.spec.retry_policy import PER_INDEX_DEFAULT, PerIndexDefault
from ..kueue.spec.topology import TopologyRequest
from ..triggers.kueue_job import KueueJobTrigger
from .checkpointing import CheckpointSession
from .deadline_handling import Spill
from .deadline_spill import JobSpill
from .failures import KueueTaskFailed
from .indexed_job_manifest import IndexedJobManifest
from .job_inputs import PodInputs, shard_duration_param, topology_param
from .job_submission import Submission
from .k8s_models import plain, secret_names
from .kueue_operator import KueueOperator
from .operator_kind import Shards, TaskEntry, WaitOn
from .run_figures import ObjectLister, event_figures, shard_summary, task_instance_totals
from .template_file import TemplateFile
from .templated import as_count


class KueueJobFailed(KueueTaskFailed):
    """The task's Job failed: ``job_name``; ``failed_indexes`` is an interval string."""

    def __init__(self, message: str, event: Mapping[str, Any]) -> None:
        super().__init__(message, event)
        self.job_name: str | None = event.get("job_name")


class IndexedJobKind(IndexedJobManifest, KueueOperator):
    """The Job kind's part of the operator template (``operator_kind``): which shards a try runs and how its
    pods get them, its trigger, its result over every Job of the task instance, its spill. Its parameters
    are ``KueueIndexedJobOperator``'s (``IndexedJobManifest`` reads them)."""

    description = JOB
    failure = KueueJobFailed
    trigger = KueueJobTrigger

    def _shard_count(self) -> int:
        return int(self.completions)  # rendered and checked by build_manifest

    def _shards_to_run(
        self, shards: Shards, previous: list[dict[str, Any]]
    ) -> tuple[IndexSet, RunLedger | None]:
        return shards.remaining(previous)

    def _shape(self, manifest: dict[str, Any], shards: Shards, indexes: IndexSet) -> None:
        shards.shape_job(manifest, indexes)
        if (packs := shards.job_packs(manifest, indexes)).is_packed:  # as shaped, not chosen again
            self.log.info("packing: %s", packs.describe())

    def _reattaches_to_completed(self, shards: Shards) -> bool:
        return not shards.keeps_ledger  # with checkpointing, the ledger decides what is left

    def _record_attempt(self, shards: Shards, obj: dict[str, Any], indexes: IndexSet) -> None:
        shards.record_attempt(obj["metadata"]["name"], shards.job_packs(obj, indexes))

    def _trigger_kwargs(self, wait: WaitOn) -> dict[str, Any]:
        return {
            "max_failed_indexes": self.max_failed_indexes,
            "ledger": wait.shards.trigger_ledger(),
            "ramp": self._ramp_for(wait.obj),
        }

    def _ramp_for(self, job: dict[str, Any]) -> dict[str, Any] | None:
        """The ramp the trigger drives, capped by what this Job runs (a retry may run fewer shards)."""
        if self.parallelism_ramp is None:
            return None
        target = min(self._target_parallelism(), int(job["spec"].get("completions") or self._shard_count()))
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
        result.update(self._history_result(self._shard_count()))  # what packed it, before this night
        self._record_history(identity, shards, ledger, event)
        if current is not None:
            result.update(self._totals(identity, current, ledger))
            message = shard_summary(message, result, ledger, current.job_name)
        return result, message

    def _totals(
        self, identity: AirflowIdentity, current: AttemptFigures | None, ledger: RunLedger | None
    ) -> dict[str, Any]:
        """The result's figures over every Job of the task instance (docs/results.md)."""
        jobs = ObjectLister(
            self._client(), self.resolved_namespace(), identity, self.spot, self._deadlines.spill_to
        )
        return task_instance_totals(current, ledger, self._cost_model(), jobs)

    def _cost_model(self) -> CostModel:
        template_resources = template_main_container(self._template()).get("resources")
        return CostModel((self.job_resources or template_resources or {}).get("requests"), self.vm_price)

    def _spill(self, entry: TaskEntry) -> Spill | None:
        """``spill_to``: the Job's unfinished shards to the spill queue, as this try's spill Job, submitted
        through the template's submit."""
        session, spill_to, identity = entry.shards, self._deadlines.spill_to, entry.identity
        if not isinstance(session, CheckpointSession) or spill_to is None:
            return None  # spill_to goes with checkpointing= (checked when the DAG is parsed)
        name = deterministic_job_name(
            identity, self.job_name_prefix, seal=identity_seal(), per_try=True, variant=SPILL_NAME_VARIANT
        )

        def submit(manifest: dict[str, Any], indexes: IndexSet) -> Submission:
            return self._submit(entry.client, manifest, identity, session, indexes)

        manifest = self.build_manifest(identity)
        model = self._cost_model()
        return JobSpill(entry.client, session, identity, manifest, name, spill_to, model, self.spot, submit)

    def _failed_by_job(self, event: KueueEvent) -> dict[str, str]:
        failed = event.result.get("failed_indexes")
        return {event.name: str(failed)} if failed else {}

    def _tail_heading(self, job_name: str, index: int) -> str:
        return f"index {index}"  # the task's one Job


class KueueIndexedJobOperator(IndexedJobKind):
    """Run ``completions`` shards as a batch/v1 Indexed Job in a Kueue LocalQueue and wait for every index.

    Each pod gets ``JOB_COMPLETION_INDEX`` (its shard). The task defers while Kueue queues, admits, evicts
    and requeues the Job: a long queue wait is not a failure unless ``queue_timeout`` is set. It returns a
    result whose times and cost cover every Job of the task instance (retries, a spill) and whose other keys
    say which are per attempt (docs/results.md), and fails only when the Job fails or more indexes fail
    than ``max_failed_indexes``. Bad input that no template changes fails when the DAG is parsed.
    A retry reattaches to a Job that still runs (or already completed) instead of creating another one.
    The parameters every kind shares (``queue_name``, ``namespace``, ``spot``, the timeouts,
    ``checkpointing``, ``deadline`` and its escalation, ``vm_price``, ``deferrable``, ...) are documented on
    ``KueueOperator``. Pod-spec parameters take KubernetesPodOperator's names and meanings, as Kubernetes
    client models (``V1EnvVar``, ``V1ResourceRequirements``, ``V1Toleration``, ...) or their dicts; container
    settings apply to the shard container (the template's container named ``main``, else its first).

    :param image: the shard container's image (templated; default: ``job_template``'s).
    :param cmds: its entrypoint (templated).
    :param arguments: its arguments (templated).
    :param env: its environment (templated): a dict, or ``V1EnvVar``\\ s or their dicts.
    :param env_vars: KubernetesPodOperator's name for ``env`` (set one of them).
    :param completions: how many shards (indexes) the Job runs (templated; at most 100,000; default 1).
    :param parallelism: how many of them run at once (templated; at most 10,000; default: ``completions``).
    :param min_parallelism: Kueue's partial admission: when ``parallelism`` pods do not fit the queue's free
        quota, Kueue may start the Job with fewer, down to this many (it lowers the Job's parallelism for the
        run; the shards are the same, they take longer). Between 1 and ``parallelism`` - 1. The log and the
        result's ``admitted_parallelism`` say what it got.
    :param topology: Kueue's topology-aware scheduling: ``"topology.kubernetes.io/zone"`` (the pods must share
        one domain of that level), ``{"preferred": "kubernetes.io/hostname"}`` (as few domains as fit) or
        ``TopologyRequest(level, required=...)``. The level must be one of the ResourceFlavor's Topology. The
        log and the result's ``topology_placement`` say where Kueue put the pods.
    :param resources: the container's ``V1ResourceRequirements`` or ``{"requests": ..., "limits": ...}``
        (templated): what Kueue counts against the queue's quota.
    :param container_resources: KubernetesPodOperator's name for ``resources`` (set one of them).
    :param backoff_limit_per_index: retries of each index (default 1, or what ``job_template`` sets): an
        index that fails more often fails alone, the others go on, and the task fails only by
        ``max_failed_indexes`` (or at the end when any index failed). ``None``: Kubernetes' whole-Job
        ``backoffLimit`` (6 pod failures anywhere fail every shard).
    :param max_failed_indexes: how many indexes may fail for good with the task still succeeding (the Job's
        ``maxFailedIndexes``; needs per-index retries); more fail the task at once, naming them. With
        ``retries``, a try that has retries left fails when any index failed, so the retry runs those shards
        again; only the last try accepts up to this many.
    :param non_retriable_exit_codes: exit codes that end their index at once, without a retry (a bad
        input): a ``podFailurePolicy`` rule with ``action: FailIndex``.
    :param ttl_seconds_after_finished: the TTL controller deletes the finished Job (and Kueue its Workload)
        after this many seconds (default one day); ``None``: kept.
    :param keep_job_on_failure: keep a Job that still runs when the task fails (default: delete it, so it
        stops holding quota).
    :param job_template: a batch/v1 Job (dict, ``V1Job``, YAML text or a ``.yaml``/``.yml`` file path, found
        and rendered like any template file) to start from; the other parameters are applied on top of it.
        Only this parameter is read as a file: ``arguments=["--config", "config.yaml"]`` stays a string.
    :param labels: the pod template's labels (templated).
    :param annotations: the pod template's annotations (templated).
    :param node_selector: the pods' node selector (templated).
    :param service_account_name: the pods' service account.
    :param tolerations: the pods' tolerations (with ``spot``, the Spot one is added).
    :param affinity: the pods' affinity.
    :param volumes: the pods' volumes (templated).
    :param volume_mounts: the container's volume mounts (templated).
    :param env_from: the container's ``envFrom`` sources (templated).
    :param secrets: the cncf provider's ``Secret`` objects, attached as KubernetesPodOperator does (as
        variables, ``envFrom`` or a mounted volume).
    :param image_pull_secrets: the pods' image pull secrets: names (``"a,b"`` too) or references.
    :param image_pull_policy: the container's image pull policy.
    :param security_context: the pod's security context.
    :param container_security_context: the container's security context.
    :param init_containers: the pods' init containers.
    :param termination_grace_period: the pod's ``terminationGracePeriodSeconds``: a SIGTERM'd shard's time
        to flush its checkpoint.
    :param active_deadline_seconds: the pod's: a pod running longer fails and its index is retried.
    :param priority_class_name: the pods' Kubernetes PriorityClass (Kueue's WorkloadPriorityClass is
        ``workload_priority_class``).
    :param job_name_prefix: the readable part of the Job's name (default ``<dag>-<task>``); the rest is a hash
        of the task instance and its try.
    :param parallelism_ramp: ``ParallelismRamp(start, step, every_seconds)``: start with ``start`` pods and
        add ``step`` more every ``every_seconds`` up to ``parallelism``, so a large Job does not pull its
        image on every node at once (the Job is elastic: Kueue admits each raise as a Workload slice).
    :param shards_per_pod: run this many shards one after the other in each pod (Job index ``i`` runs the
        ``i``-th group of them), so a pod's start stops dominating short shards. Needs ``checkpointing=``
        and a shard program that loops with ``Shard.each_from_env()``. Everything else stays per shard (the
        ledger, a retry of only the unfinished shards, the result); ``parallelism``, ``max_failed_indexes``
        and ``backoff_limit_per_index`` count pods. Unset: chosen from ``expected_shard_duration``.
    :param expected_shard_duration: how long one shard runs (``timedelta`` or seconds), or a
        ``(shortest, longest)`` pair when lengths differ. With it (and ``shards_per_pod`` unset) the operator
        packs about a minute of shards per pod, keeping at least two pods' worth per parallel slot, in whole
        waves of ``parallelism`` pods; for a range whose longest is at least twice its shortest, in
        decreasing sizes (the last pods run single shards, so a skewed tail does not end on one long pack).
        Without either, each pod runs one shard.
    """

    template_fields: Sequence[str] = (
        "queue_name",
        "namespace",
        "kubernetes_conn_id",
        "image",
        "cmds",
        "arguments",
        "env",
        "completions",
        "parallelism",
        "job_resources",
        "job_template",
        "labels",
        "annotations",
        "node_selector",
        "volumes",
        "volume_mounts",
        "env_from",
        "deadline",
        "shard_items",
    )
    # No template_ext: it would read *every* templated string ending in .yaml as a file (an argument
    # "config.yaml" included). job_template alone is read as a file (see TemplateFile).
    template_ext: Sequence[str] = ()
    template_fields_renderers: ClassVar[dict[str, str]] = {
        "job_template": "yaml",
        "env": "json",
        "job_resources": "json",
    }

    def __init__(
        self,
        *,
        image: str | None = None,
        cmds: list[str] | None = None,
        arguments: list[str] | None = None,
        env: Mapping[str, str] | list[Any] | None = None,
        env_vars: Mapping[str, str] | list[Any] | None = None,
        completions: int | str = 1,
        parallelism: int | str | None = None,
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
        init_containers: list[Any] | None = None,
        termination_grace_period: int | None = None,
        active_deadline_seconds: int | None = None,
        priority_class_name: str | None = None,
        job_name_prefix: str | None = None,
        parallelism_ramp: ParallelismRamp | dict[str, Any] | None = None,
        shards_per_pod: int | None = None,
        expected_shard_duration: ShardDurationParam = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(keep_on_failure=keep_job_on_failure, **kwargs)
        pod = PodInputs.parse(
            self.task_id,
            env=env,
            env_vars=env_vars,
            resources=resources,
            container_resources=container_resources,
            secrets=secrets,
            volumes=volumes,
            volume_mounts=volume_mounts,
            env_from=env_from,
        )
        pod.keep_on(self)  # env, job_resources, volumes, volume_mounts, env_from
        self.image, self.cmds, self.arguments = image, cmds, arguments
        self.completions, self.parallelism, self.min_parallelism = completions, parallelism, min_parallelism
        self.topology = topology_param(self.task_id, topology)
        self.tolerations, self.affinity = plain(tolerations), plain(affinity)
        self.image_pull_secrets, self.image_pull_policy = secret_names(image_pull_secrets), image_pull_policy
        self.security_context = plain(security_context)
        self.container_security_context = plain(container_security_context)
        self.init_containers = plain(init_containers)
        self.termination_grace_period = termination_grace_period
        self.active_deadline_seconds = active_deadline_seconds
        self.service_account_name, self.priority_class_name = service_account_name, priority_class_name
        self.backoff_limit_per_index = backoff_limit_per_index
        self.max_failed_indexes, self.non_retriable_exit_codes = max_failed_indexes, non_retriable_exit_codes
        self.ttl_seconds_after_finished = ttl_seconds_after_finished
        self.keep_job_on_failure = keep_job_on_failure
        self.job_template = TemplateFile.wrap(plain(job_template))
        self.labels, self.annotations, self.node_selector = labels, annotations, node_selector
        self.job_name_prefix, self.shards_per_pod = job_name_prefix, shards_per_pod
        self.parallelism_ramp = ParallelismRamp.from_param(parallelism_ramp)
        self.expected_shard_duration = shard_duration_param(self.task_id, expected_shard_duration)
        self._check_untemplated()

    def render_template_fields(self, context: Any, jinja_env: Any = None) -> None:
        """Jinja renders text: the rendered counts become integers again (then checked, before anything is
        created, as literal ones are when the DAG is parsed). ``job_template`` (YAML text or a file) is parsed
        *before* it is rendered, and Jinja renders its string values one by one: a rendered value (a
        ``dag_run.conf`` one with a newline and ``volumes:``) stays a value, never YAML structure."""
        unrendered = self._parse_template_before_rendering()
        super().render_template_fields(context, jinja_env)
        self._check_rendered_template(unrendered)
        self.completions = as_count(self.completions)
        self.parallelism = as_count(self.parallelism)
