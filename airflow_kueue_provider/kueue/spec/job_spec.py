"""What the provider needs to build an Indexed Job: the inputs, the labels it sets, and its limits.

Pure data. ``job_validation`` checks an ``IndexedJobSpec``; ``job_manifest`` turns it into a Job dict.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

from airflow_kueue_provider.kueue.identity.airflow_identity import AirflowIdentity

from ..errors import KueueProviderError

# -- label keys and limits --------------------------------------------------------------------------

MULTIKUEUE_CONTROLLER = "kueue.x-k8s.io/multikueue"
"""A Job's ``spec.managedBy`` on a MultiKueue manager: Kueue's webhook sets it when the Job's ClusterQueue
dispatches through MultiKueue; the Job controller leaves such a Job alone and its pods run on a worker."""

SPOT_TOLERATION: Mapping[str, str] = {
    "key": "kubernetes.azure.com/scalesetpriority",
    "operator": "Equal",
    "value": "spot",
    "effect": "NoSchedule",
}
IGNORE_DISRUPTIONS_RULE: Mapping[str, Any] = {
    "action": "Ignore",
    "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}],
}
"""A spot eviction (or node drain / pod GC) marks pods ``DisruptionTarget``; ignoring it keeps it from
counting against ``backoffLimit`` / ``backoffLimitPerIndex``."""

CONTAINER_NAME = "main"
MAX_COMPLETIONS = 100_000
MAX_PARALLELISM = 10_000
DEFAULT_TTL_SECONDS_AFTER_FINISHED = 86_400


# -- the inputs ---------------------------------------------------------------------------------------

EnvInput: TypeAlias = Mapping[str, str] | Sequence[Mapping[str, Any]]


@dataclass(frozen=True)
class IndexedJobSpec:
    """Everything the provider needs to build an Indexed Job. Field names follow the operator parameters."""

    name: str
    namespace: str
    queue_name: str
    image: str
    completions: int
    cmds: Sequence[str] | None = None
    """The container ``command`` (entrypoint), as in KubernetesPodOperator."""
    arguments: Sequence[str] | None = None
    """The container ``args``."""
    env: EnvInput | None = None
    """``{"NAME": "value"}`` or a list of Kubernetes EnvVar dicts (for ``valueFrom``)."""
    parallelism: int | None = None
    """Defaults to ``completions``."""
    min_parallelism: int | None = None
    """Partial admission: Kueue may admit the Job with as few pods as this when its full parallelism does
    not fit (``MIN_PARALLELISM_ANNOTATION``); below ``parallelism``."""
    resources: Mapping[str, Any] | None = None
    """``{"requests": {"cpu": "1", "memory": "2Gi"}, "limits": {...}}``."""
    priority_class: str | None = None
    """A Kueue WorkloadPriorityClass name."""
    spot: bool = False
    backoff_limit_per_index: int | None = None
    max_failed_indexes: int | None = None
    non_retriable_exit_codes: Sequence[int] | None = None
    """Exit codes that end their index at once (a ``FailIndex`` podFailurePolicy rule), with no retry."""
    ttl_seconds_after_finished: int | None = DEFAULT_TTL_SECONDS_AFTER_FINISHED
    labels: Mapping[str, str] | None = None
    """Pod template labels."""
    annotations: Mapping[str, str] | None = None
    """Pod template annotations."""
    job_labels: Mapping[str, str] | None = None
    """Extra labels on the Job object itself."""
    job_annotations: Mapping[str, str] | None = None
    """Extra annotations on the Job object itself."""
    service_account_name: str | None = None
    node_selector: Mapping[str, str] | None = None
    # Pod-spec inputs with KubernetesPodOperator's names and meanings, as Kubernetes API dicts.
    tolerations: Sequence[Mapping[str, Any]] | None = None
    """Added to the template's (and to the Spot toleration with ``spot``)."""
    affinity: Mapping[str, Any] | None = None
    volumes: Sequence[Mapping[str, Any]] | None = None
    volume_mounts: Sequence[Mapping[str, Any]] | None = None
    """Of the shard container."""
    env_from: Sequence[Mapping[str, Any]] | None = None
    image_pull_secrets: Sequence[str] | None = None
    """Secret names."""
    image_pull_policy: str | None = None
    security_context: Mapping[str, Any] | None = None
    """The pod's ``securityContext``."""
    container_security_context: Mapping[str, Any] | None = None
    """The shard container's ``securityContext``."""
    init_containers: Sequence[Mapping[str, Any]] | None = None
    """Containers run in order before the shard container (Kubernetes Container dicts)."""
    termination_grace_period: int | None = None
    """The pod's ``terminationGracePeriodSeconds``: the time a shard has from SIGTERM (an eviction, a
    preemption) to flush its checkpoint before SIGKILL."""
    active_deadline_seconds: int | None = None
    """The pod's ``activeDeadlineSeconds`` (KubernetesPodOperator's meaning): a pod running longer fails,
    and its index is retried as for any failure."""
    priority_class_name: str | None = None
    """The pods' Kubernetes PriorityClass (``priorityClassName``), as in KubernetesPodOperator. Kueue takes
    the Workload's priority from it when no WorkloadPriorityClass is set."""
    job_template: Mapping[str, Any] | None = None
    """A base batch/v1 Job; the parameters above are merged over it and win."""
    identity: AirflowIdentity | None = None

    @property
    def effective_parallelism(self) -> int:
        return self.completions if self.parallelism is None else self.parallelism


class InvalidJobSpec(ValueError, KueueProviderError):
    """The parameters cannot make a valid Indexed Job. ``problems`` lists (parameter, what to change)."""

    def __init__(self, problems: Sequence[tuple[str, str]]) -> None:
        self.problems: tuple[tuple[str, str], ...] = tuple(problems)
        lines = "\n".join(f"  - {parameter}: {text}" for parameter, text in self.problems)
        super().__init__(f"invalid KueueIndexedJob parameters:\n{lines}")

    @property
    def parameters(self) -> tuple[str, ...]:
        return tuple(parameter for parameter, _ in self.problems)
