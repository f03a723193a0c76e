"""One template of a ``KueueJobSetOperator``'s gang (``KueueReplicatedJob``), its inputs' parse-time checks,
and the Indexed Job it becomes: built and checked as ``KueueIndexedJobOperator``'s Job is, against the same
pod policy, so a replicated job meets the Job kind's rules and error messages."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any, ClassVar

from ..airflow_compat import AirflowFailException
from ..kueue.figures.attempt_figures import GangCostModel, PodSetPrice
from ..kueue.figures.cost import VmPrice
from ..kueue.identity.airflow_identity import AirflowIdentity
from ..kueue.jobset import ReplicatedJob, replicated_job_problems
from ..kueue.pods.pod_policy import violations, with_restricted_defaults
from ..kueue.spec.job_manifest import build_indexed_job
from ..kueue.spec.job_spec import IndexedJobSpec, InvalidJobSpec
from ..kueue.spec.job_template import as_mapping, template_main_container
from ..kueue.spec.job_validation import validate_untemplated
from ..kueue.spec.retry_policy import PER_INDEX_DEFAULT, PerIndexDefault, per_index_retries
from ..kueue.spec.topology import InvalidTopology, TopologyRequest, with_topology
from .k8s_models import plain
from .settings import configured_pod_policy


@dataclass
class KueueReplicatedJob:
    """One template of a ``KueueJobSetOperator``'s JobSet: ``replicas`` Indexed Jobs of ``completions`` pods.

    The fields mean what ``KueueIndexedJobOperator``'s parameters of the same names mean (``resources``
    are the container's requests/limits; ``job_template`` a batch/v1 Job mapping to start from), and go
    through the same checks and the cluster's pod policy. ``checkpoint=True`` (on at most one replicated
    job, with the operator's ``checkpointing=``) gives its pods the worker SDK's checkpoint location: each
    index is a shard. ``topology`` (as the Job operator's ``topology=``: a node label key, required, or
    ``{"preferred": key}``) has Kueue's topology-aware scheduling put this replicated job's pods in one
    domain of the flavor's Topology; the log and the result's ``topology_placement`` say where.
    ``image``, ``cmds``, ``arguments`` and ``env`` are templated.
    """

    template_fields: ClassVar[Sequence[str]] = ("image", "cmds", "arguments", "env")

    name: str
    image: str | None = None
    completions: int = 1
    parallelism: int | None = None
    replicas: int = 1
    cmds: list[str] | None = None
    arguments: list[str] | None = None
    env: Mapping[str, str] | list[Any] | None = None
    resources: Mapping[str, Any] | Any | None = None
    backoff_limit_per_index: int | PerIndexDefault | None = PER_INDEX_DEFAULT
    max_failed_indexes: int | None = None
    non_retriable_exit_codes: Sequence[int] | None = None
    labels: Mapping[str, str] | None = None
    annotations: Mapping[str, str] | None = None
    node_selector: Mapping[str, str] | None = None
    tolerations: list[Any] | None = None
    affinity: Mapping[str, Any] | Any | None = None
    volumes: list[Any] | None = None
    volume_mounts: list[Any] | None = None
    env_from: list[Any] | None = None
    service_account_name: str | None = None
    security_context: Mapping[str, Any] | Any | None = None
    container_security_context: Mapping[str, Any] | Any | None = None
    image_pull_policy: str | None = None
    job_template: Mapping[str, Any] | None = None
    checkpoint: bool = False
    topology: TopologyRequest | str | Mapping[str, Any] | None = None

    def __post_init__(self) -> None:
        try:
            self.topology = TopologyRequest.from_param(self.topology)
            with_topology(self.annotations, self.topology)
        except InvalidTopology as exc:
            raise InvalidTopology(f"replicated job {self.name!r}: {exc}") from None

    @property
    def topology_request(self) -> TopologyRequest | None:
        return TopologyRequest.from_param(self.topology)

    @classmethod
    def from_param(cls, value: KueueReplicatedJob | Mapping[str, Any]) -> KueueReplicatedJob:
        if isinstance(value, KueueReplicatedJob):
            return value
        if not isinstance(value, Mapping):
            raise TypeError(
                f"a replicated job is a KueueReplicatedJob or its dict, got {type(value).__name__}"
            )
        unknown = sorted(set(value) - {f.name for f in fields(cls)})
        if unknown:
            raise TypeError(f"replicated job {value.get('name')!r}: unknown field(s) {', '.join(unknown)}")
        return cls(**value)


def parse_replicated_jobs(
    task_id: str, given: Sequence[KueueReplicatedJob | Mapping[str, Any]], checkpointing: bool
) -> list[KueueReplicatedJob]:
    """``replicated_jobs`` as ``KueueReplicatedJob``\\ s, checked together when the DAG is parsed: names, and
    ``checkpoint=True`` on at most one of them, with ``replicas=1``, exactly when ``checkpointing`` is set."""
    try:
        replicated = [KueueReplicatedJob.from_param(rj) for rj in given]
    except (TypeError, ValueError) as exc:
        raise AirflowFailException(f"{task_id}: {exc}") from None
    if problems := replicated_job_problems([ReplicatedJob(rj.name, {}, rj.replicas) for rj in replicated]):
        raise AirflowFailException(f"{task_id}: replicated_jobs: {'; '.join(problems)}")
    checkpointed = [rj.name for rj in replicated if rj.checkpoint]
    if len(checkpointed) > 1:
        raise AirflowFailException(
            f"{task_id}: checkpoint=True on {', '.join(checkpointed)}: set it on one replicated job "
            "(its indexes are the shards the checkpoint location is for)"
        )
    for rj in replicated:
        if rj.checkpoint and rj.replicas > 1:
            raise AirflowFailException(
                f"{task_id}: replicated job {rj.name!r} has checkpoint=True and replicas={rj.replicas}: "
                "every replica would run each of its shards again. Set replicas=1 on it (raise its "
                "completions for more shards), or checkpoint=False"
            )
    if bool(checkpointed) != checkpointing:
        raise AirflowFailException(
            f"{task_id}: checkpointing= and a replicated job with checkpoint=True go together: "
            "set both or neither"
        )
    return replicated


def gang_cost_model(replicated: Sequence[KueueReplicatedJob], vm_price: VmPrice) -> GangCostModel:
    """Each replicated job's pods (replicas x parallelism) at its own requests."""
    return GangCostModel(tuple(PodSetPrice(rj.name, _pods(rj), _requests(rj)) for rj in replicated), vm_price)


def _pods(rj: KueueReplicatedJob) -> int:
    return rj.replicas * min(rj.parallelism or rj.completions, rj.completions)


def _requests(rj: KueueReplicatedJob) -> Any:
    """The container's requests: the replicated job's ``resources``, else its ``job_template``'s."""
    resources = plain(rj.resources) or template_main_container(rj.job_template).get("resources") or {}
    return resources.get("requests")


@dataclass(frozen=True)
class ReplicatedJobBuilder:
    """Builds each replicated job's Indexed Job for the operator's task: its queue and ``spot``."""

    task_id: str
    queue_name: str
    spot: bool

    def check_untemplated(self, replicated: Sequence[KueueReplicatedJob]) -> None:
        """What no template changes, per replicated job, when the DAG is parsed (as the Job operator)."""
        for rj in replicated:
            try:
                validate_untemplated(self.spec(rj, "default", None))
            except InvalidJobSpec as exc:
                raise AirflowFailException(f"{self.task_id}: replicated job {rj.name!r}: {exc}") from None

    def job(self, rj: KueueReplicatedJob, namespace: str, identity: AirflowIdentity) -> dict[str, Any]:
        """The replicated job's Job, built and checked as ``KueueIndexedJobOperator``'s is; it carries the
        task instance's labels and annotations, so its Jobs are the task's (UI, sweepers, ownership)."""
        spec = self.spec(rj, namespace, identity)
        try:  # validates the spec first (job_validation)
            job = with_restricted_defaults(build_indexed_job(spec))
        except InvalidJobSpec as exc:
            raise AirflowFailException(f"{self.task_id}: replicated job {rj.name!r}: {exc}") from None
        if problems := violations(job, configured_pod_policy()):
            raise AirflowFailException(
                f"{self.task_id}: replicated job {rj.name!r} breaks the cluster's pod policy "
                "([kueue] config):\n- " + "\n- ".join(problems)
            )
        return job

    def spec(
        self, rj: KueueReplicatedJob, namespace: str, identity: AirflowIdentity | None
    ) -> IndexedJobSpec:
        return IndexedJobSpec(
            name=rj.name,
            namespace=namespace,
            queue_name=self.queue_name,
            image=rj.image or "",
            completions=rj.completions,
            parallelism=rj.parallelism,
            cmds=rj.cmds,
            arguments=rj.arguments,
            env=plain(rj.env),
            resources=plain(rj.resources),
            spot=self.spot,
            backoff_limit_per_index=per_index_retries(
                rj.backoff_limit_per_index, as_mapping((rj.job_template or {}).get("spec"))
            ),
            max_failed_indexes=rj.max_failed_indexes,
            non_retriable_exit_codes=rj.non_retriable_exit_codes,
            ttl_seconds_after_finished=None,
            labels=rj.labels,
            annotations=with_topology(rj.annotations, rj.topology_request),
            node_selector=rj.node_selector,
            service_account_name=rj.service_account_name,
            tolerations=plain(rj.tolerations),
            affinity=plain(rj.affinity),
            volumes=plain(rj.volumes),
            volume_mounts=plain(rj.volume_mounts),
            env_from=plain(rj.env_from),
            image_pull_policy=rj.image_pull_policy,
            security_context=plain(rj.security_context),
            container_security_context=plain(rj.container_security_context),
            job_template=rj.job_template,
            identity=identity,
        )
