"""The Job kind's manifest from its operator's parameters: the Job built and checked against the cluster's
pod policy, and the checks no template changes, run when the DAG is parsed (``KueueIndexedJobOperator``)."""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import yaml

from ..airflow_compat import AirflowFailException
from ..hooks.identity_key import identity_seal
from ..kueue.checkpoints.packing_choice import PackingChoice, ShardDuration
from ..kueue.checkpoints.shard_packing import InvalidPacking
from ..kueue.identity.airflow_identity import AirflowIdentity, deterministic_job_name
from ..kueue.names import ELASTIC_JOB_ANNOTATION
from ..kueue.pods.pod_policy import violations, with_restricted_defaults
from ..kueue.spec.job_manifest import build_indexed_job
from ..kueue.spec.job_spec import MAX_COMPLETIONS, IndexedJobSpec, InvalidJobSpec
from ..kueue.spec.job_template import as_mapping, template_main_container, values_turned_structure
from ..kueue.spec.job_validation import validate_untemplated
from ..kueue.spec.parallelism_ramp import ParallelismRamp, with_slice_gate
from ..kueue.spec.retry_policy import per_index_retries
from ..kueue.spec.topology import InvalidTopology, TopologyRequest, with_topology
from .settings import configured_pod_policy
from .shard_history_step import ShardHistoryStep
from .shard_items_param import ShardItemsParam, literal_items
from .template_file import TemplateFile
from .templated import is_templated


class IndexedJobManifest(ShardItemsParam, ShardHistoryStep):
    """Mixed into ``KueueIndexedJobOperator``: reads its parameters (its attributes), builds its Job; its
    ``shard_items=`` is ``ShardItemsParam``'s, its shard history ``ShardHistoryStep``'s."""

    # What this reads of the operator (its parameters, after rendering).
    task_id: str
    queue_name: str
    image: str | None
    cmds: list[str] | None
    arguments: list[str] | None
    env: Any
    completions: int | str
    parallelism: int | str | None
    min_parallelism: int | None
    parallelism_ramp: ParallelismRamp | None
    shards_per_pod: int | None
    expected_shard_duration: ShardDuration | None
    topology: TopologyRequest | None
    job_resources: Any
    priority_class: str | None
    spot: bool
    backoff_limit_per_index: Any
    max_failed_indexes: int | None
    non_retriable_exit_codes: Sequence[int] | None
    ttl_seconds_after_finished: int | None
    labels: Mapping[str, str] | None
    annotations: Mapping[str, str] | None
    node_selector: Mapping[str, str] | None
    service_account_name: str | None
    tolerations: Any
    affinity: Any
    volumes: Any
    volume_mounts: Any
    env_from: Any
    image_pull_secrets: Any
    image_pull_policy: str | None
    security_context: Any
    container_security_context: Any
    init_containers: Any
    termination_grace_period: int | None
    active_deadline_seconds: int | None
    priority_class_name: str | None
    job_template: Any
    job_name_prefix: str | None

    if TYPE_CHECKING:  # the operator's (KueueOperator's, BaseOperator's); not defined here at run time

        def resolved_namespace(self) -> str: ...
        def get_template_env(self, dag: Any = None) -> Any: ...

    def _counts_templated(self) -> bool:
        """``completions`` or ``parallelism`` is Jinja, or ``shard_items`` (which may set ``completions``) is
        Jinja or an XCom: their checks wait for the run (``build_manifest``)."""
        counts = (self.completions, self.parallelism)
        return any(is_templated(c) for c in counts) or not literal_items(self.shard_items)

    def _target_parallelism(self) -> int:
        """After ``build_manifest`` checked the counts (at parse time too when they are literal)."""
        completions = int(self.completions)
        return min(int(self.parallelism or completions), completions)

    def _packing(self) -> PackingChoice:
        """As the DAG says, from the shard history at run time when there is one for these shards."""
        choice = PackingChoice(self.shards_per_pod, self.expected_shard_duration, self._target_parallelism())
        return self._with_history(choice, int(self.completions))

    def _check_packing(self) -> None:
        """Several shards per pod need checkpointing (the done markers say which of a pack's shards
        finished) and a count that fits the shards."""
        if self.shards_per_pod is None and self.expected_shard_duration is None:
            return
        if self._checkpointing is None:
            which = "shards_per_pod" if self.shards_per_pod is not None else "expected_shard_duration"
            raise AirflowFailException(
                f"{self.task_id}: {which} packs several shards into one pod, which needs checkpointing= "
                "(each shard's done marker is what says which of a pod's shards finished): set "
                "checkpointing=Checkpointing(...), or leave shards_per_pod and expected_shard_duration unset"
            )
        try:
            self._packing().check(int(self.completions))
        except InvalidPacking as exc:
            raise AirflowFailException(f"{self.task_id}: {exc}") from None

    def _check_untemplated(self) -> None:
        """Every check no template can change, when the DAG is parsed: a bad count, quantity, retry setting,
        ramp or timeout fails the DAG's import with the message, and no run ever starts. (The rest, and these
        again, are checked at run time, after rendering, before anything is created.)"""
        self._check_literal_items()
        template = self.job_template if isinstance(self.job_template, Mapping) else None
        placeholder = "parse-time-check"
        fields = self._untemplated_spec(template)
        if self._counts_templated():  # checked once rendered, with the packing and the ramp
            fields.update(completions=MAX_COMPLETIONS, parallelism=None, min_parallelism=None)
        if is_templated(self.job_resources):
            fields.update(resources=None)
        spec = IndexedJobSpec(
            name=placeholder, namespace="default", queue_name=placeholder, image=placeholder, **fields
        )
        try:
            validate_untemplated(spec)
        except InvalidJobSpec as exc:
            raise AirflowFailException(f"{self.task_id}: {exc}") from None
        if not self._counts_templated():
            self._check_counted()

    def _check_counted(self) -> None:
        """The checks that need the counts: the packing and the ramp."""
        self._check_packing()
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
        if self._counts_templated():
            raise AirflowFailException(
                f"{self.task_id}: completions={self.completions!r}, parallelism={self.parallelism!r} are not "
                "rendered: build the Job in a task run (or from a rendered task instance)"
            )
        template = self._template()
        template_image = template_main_container(template).get("image")
        spec = IndexedJobSpec(
            name=deterministic_job_name(identity, self.job_name_prefix, seal=identity_seal(), per_try=True),
            namespace=self.resolved_namespace(),
            queue_name=self.queue_name,
            image=self.image or (str(template_image) if template_image else ""),
            cmds=self.cmds,
            arguments=self.arguments,
            env=self._container_env(),
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
        if self.parallelism_ramp:  # a raise's pods wait for their slice, with or without Kueue's webhook
            built = with_slice_gate(built)
        self._check_counted()  # again: templated counts meet these checks only now
        # The merged Job (template included) against the platform's pod policy, with safe defaults.
        job = with_restricted_defaults(built)
        if problems := violations(job, configured_pod_policy()):
            raise AirflowFailException(
                f"{self.task_id}: the Job breaks the cluster's pod policy ([kueue] config):\n- "
                + "\n- ".join(problems)
            )
        return job

    def _container_env(self) -> Any:
        """The shard container's ``env``, with ``shard_items``' (``@task.kueue`` adds its function)."""
        return self._with_items_env(self.env)

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
            "init_containers": self.init_containers,
            "termination_grace_period": self.termination_grace_period,
            "active_deadline_seconds": self.active_deadline_seconds,
            "priority_class_name": self.priority_class_name,
        }

    def _pod_annotations(self) -> Mapping[str, str] | None:
        """``annotations``, with ``topology``'s Kueue annotation (set through ``topology=`` only)."""
        try:
            return with_topology(self.annotations, self.topology)
        except InvalidTopology as exc:
            raise AirflowFailException(f"{self.task_id}: {exc}") from None

    def _parse_template_before_rendering(self) -> Mapping[str, Any] | None:
        """``job_template`` as YAML text or a file becomes its parsed, unrendered Job: Airflow then renders
        the mapping's string values, so what a value renders to cannot become structure. Returns a copy."""
        if isinstance(self.job_template, (str, TemplateFile)):
            self.job_template = self._template()
        return copy.deepcopy(self.job_template) if isinstance(self.job_template, Mapping) else None

    def _check_rendered_template(self, unrendered: Mapping[str, Any] | None) -> None:
        if unrendered is not None and (paths := values_turned_structure(unrendered, self.job_template)):
            raise AirflowFailException(
                f"{self.task_id}: job_template values {', '.join(paths)} rendered to a mapping or a list (a "
                "native Jinja environment): a rendered value may not add structure to the Job; render strings"
            )

    def _template(self) -> Mapping[str, Any] | None:
        """``job_template`` as a Job mapping: read (an unrendered file), parsed (YAML text) and checked."""
        template = self.job_template
        if isinstance(template, TemplateFile):  # not rendered: build_manifest called outside a task run
            template = template.read(self.get_template_env())
        if isinstance(template, str):
            try:
                template = yaml.safe_load(template)
            except yaml.YAMLError as exc:
                raise AirflowFailException(
                    f"{self.task_id}: job_template is not valid YAML (it is parsed before Jinja renders its "
                    'values: write Jinja inside quoted strings, key: "{{ ... }}", and no {% ... %} blocks '
                    f"around YAML): {exc}"
                ) from None
            if not isinstance(template, Mapping):
                raise AirflowFailException(
                    f"{self.task_id}: job_template must be a batch/v1 Job (a mapping), got "
                    f"{type(template).__name__}"
                )
        return template  # type: ignore[no-any-return]
