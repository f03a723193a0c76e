"""``KueueJobSetOperator``: several Job templates (e.g. a coordinator and N indexed workers) run as one
JobSet, admitted by Kueue as one Workload (all or nothing), waited for through the queue.

The JobSet kind of the operator template (``kueue_operator``): its parameters, its manifest (one Indexed Job
per replicated job, built and checked as the Job kind's), its trigger and its per-child-Job log tails.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any, ClassVar

from kubernetes.client.rest import ApiException

from ..airflow_compat import AirflowFailException
from ..hooks.identity_key import identity_seal
from ..hooks.kind_client import KindClient
from ..kueue.airflow_identity import AirflowIdentity
from ..kueue.attempt_figures import GangCostModel, PodSetPrice
from ..kueue.index_set import IndexSet
from ..kueue.job_manifest import build_indexed_job
from ..kueue.job_spec import MULTIKUEUE_CONTROLLER, IndexedJobSpec, InvalidJobSpec
from ..kueue.job_template import as_mapping, template_main_container
from ..kueue.job_validation import validate_untemplated
from ..kueue.jobset import ReplicatedJob, build_jobset, jobset_name_for, replicated_job_problems
from ..kueue.kinds.jobset import JOBSET
from ..kueue.ledger import RunLedger
from ..kueue.names import MANAGED_BY_LABEL, MANAGED_BY_VALUE, PRIORITY_CLASS_LABEL
from ..kueue.pod_policy import violations, with_restricted_defaults
from ..kueue.retry_policy import PER_INDEX_DEFAULT, PerIndexDefault, per_index_retries
from ..kueue.topology import InvalidTopology, TopologyRequest, with_topology
from ..kueue.trigger_event import KueueEvent
from ..triggers.kueue_jobset import KueueJobSetTrigger
from .failures import KueueTaskFailed
from .k8s_models import plain
from .kueue_operator import KueueOperator
from .operator_kind import Shards, WaitOn
from .run_figures import ObjectLister, task_instance_totals
from .settings import configured_pod_policy
from .task_facts import created_epoch


class KueueJobSetFailed(KueueTaskFailed):
    """The task's JobSet failed: ``jobset_name``; ``failed_indexes`` per child Job (``"<job>: 3,7"``)."""

    def __init__(self, message: str, event: Mapping[str, Any]) -> None:
        super().__init__(message, event)
        self.jobset_name: str | None = event.get("jobset_name")

    @staticmethod
    def _failed_indexes(event: Mapping[str, Any]) -> str:
        return "; ".join(
            rj["failed_indexes"] for rj in event.get("replicated_jobs") or () if rj.get("failed_indexes")
        )


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


class KueueJobSetOperator(KueueOperator):
    """Run ``replicated_jobs`` as one JobSet in a Kueue LocalQueue and wait until every one of them finished.

    Kueue admits the JobSet as one Workload with a pod set per replicated job: a coordinator and its 8
    workers start together or wait together, never half of them. The JobSet is created suspended, so no pod
    runs before Kueue admits it. The task defers while it waits; a long queue wait is not a failure unless
    ``queue_timeout`` is set. Its log has a line per replicated job (``coordinator 1/1 done, 0 active;
    workers 5/8 done, 3 active``), its result (XCom) the same per replicated job, and a failure names the
    failing index by its Job (``genomics-workers-0: 3``) with that pod's last log lines. A retry reattaches
    to a JobSet of the task that still runs (or completed); one that failed is replaced by a new one.
    The parameters every kind shares (``queue_name``, ``namespace``, ``priority_class``, ``spot``, the
    timeouts, ``checkpointing``, ``deadline`` and its escalation, ``deferrable``, ...) are documented in
    ``airflow_kueue_provider.operators.kueue_operator``; for a JobSet, ``checkpointing`` goes to the
    replicated job with ``checkpoint=True``, and ``start_timeout`` names the child Job that cannot start.

    :param replicated_jobs: ``KueueReplicatedJob``\\ s (or their dicts), at least one; names unique, short
        DNS labels (they are part of every Job and pod name).
    :param keep_jobset_on_failure: keep a JobSet that still runs when the task fails (default: delete it).
    :param on_deadline_risk: ``DeadlineEscalation(raise_priority=..., notify=...)``, taken once per task
        instance (``raise_priority`` relabels the JobSet while Kueue still queues it). ``spill_to`` is
        refused: a JobSet is one gang, it has no unfinished shards to move on their own.
    :param vm_price: for ``estimated_cost_usd``: each replicated job's pods (replicas x parallelism) at its
        own requests, for as long as the JobSet ran, over every JobSet of the task instance (docs/results.md).
    :param parallelism_ramp: refused (see ``KueueJobSetOperator.REFUSED``).
    :param min_parallelism: refused (see ``KueueJobSetOperator.REFUSED``).
    :param shards_per_pod: refused (see ``KueueJobSetOperator.REFUSED``).
    :param expected_shard_duration: refused (see ``KueueJobSetOperator.REFUSED``).
    """

    template_fields: Sequence[str] = (
        "queue_name",
        "namespace",
        "replicated_jobs",
        "labels",
        "annotations",
        "deadline",
    )
    description = JOBSET
    failure = KueueJobSetFailed
    log_tail_indexes = 3  # per failed child Job
    REFUSED: ClassVar[dict[str, str]] = {
        "parallelism_ramp": (
            "Kueue resizes a running Workload (ElasticJobsViaWorkloadSlices) only for batch/v1 Jobs, and a "
            "JobSet is admitted as one Workload for all its replicated jobs: set each one's parallelism"
        ),
        "min_parallelism": (
            "Kueue's partial admission (kueue.x-k8s.io/job-min-parallelism) applies to batch/v1 Jobs only; a "
            "JobSet is admitted whole or not at all"
        ),
        "spill_to": (
            "a JobSet runs its replicated jobs as one gang: it has no unfinished shards that could move to "
            "another queue on their own; use raise_priority or notify"
        ),
        "shards_per_pod": (
            "a JobSet's checkpointed replicated job runs one shard per index, and a retry reruns the gang "
            "whole: several shards per pod are KueueIndexedJobOperator's (raise the replicated job's "
            "completions for more shards)"
        ),
        "expected_shard_duration": (
            "it chooses how shards pack into pods, which a JobSet does not do (one shard per index)"
        ),
    }

    def __init__(
        self,
        *,
        replicated_jobs: Sequence[KueueReplicatedJob | Mapping[str, Any]],
        ttl_seconds_after_finished: int | None = 86400,
        keep_jobset_on_failure: bool = False,
        labels: Mapping[str, str] | None = None,
        annotations: Mapping[str, str] | None = None,
        jobset_name_prefix: str | None = None,
        parallelism_ramp: Any = None,
        min_parallelism: int | None = None,
        shards_per_pod: int | None = None,
        expected_shard_duration: Any = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(keep_on_failure=keep_jobset_on_failure, **kwargs)
        given = {
            "parallelism_ramp": parallelism_ramp,
            "min_parallelism": min_parallelism,
            "shards_per_pod": shards_per_pod,
            "expected_shard_duration": expected_shard_duration,
        }
        given["spill_to"] = self._deadlines.spill_to
        for name, value in given.items():
            if value is not None:
                raise AirflowFailException(
                    f"{self.task_id}: {name} is not available for a JobSet: {self.REFUSED[name]}"
                )
        try:
            self.replicated_jobs = [KueueReplicatedJob.from_param(rj) for rj in replicated_jobs]
        except (TypeError, ValueError) as exc:
            raise AirflowFailException(f"{self.task_id}: {exc}") from None
        if problems := replicated_job_problems(
            [ReplicatedJob(rj.name, {}, rj.replicas) for rj in self.replicated_jobs]
        ):
            raise AirflowFailException(f"{self.task_id}: replicated_jobs: {'; '.join(problems)}")
        checkpointed = [rj.name for rj in self.replicated_jobs if rj.checkpoint]
        if len(checkpointed) > 1:
            raise AirflowFailException(
                f"{self.task_id}: checkpoint=True on {', '.join(checkpointed)}: set it on one replicated job "
                "(its indexes are the shards the checkpoint location is for)"
            )
        for rj in self.replicated_jobs:
            if rj.checkpoint and rj.replicas > 1:
                raise AirflowFailException(
                    f"{self.task_id}: replicated job {rj.name!r} has checkpoint=True and "
                    f"replicas={rj.replicas}: "
                    "every replica would run each of its shards again. Set replicas=1 on it (raise its "
                    "completions for more shards), or checkpoint=False"
                )
        if bool(checkpointed) != (self._checkpointing is not None):
            raise AirflowFailException(
                f"{self.task_id}: checkpointing= and a replicated job with checkpoint=True go together: "
                "set both or neither"
            )
        self.ttl_seconds_after_finished = ttl_seconds_after_finished
        self.keep_jobset_on_failure = keep_jobset_on_failure
        self.labels = labels
        self.annotations = annotations
        self.jobset_name_prefix = jobset_name_prefix
        self._check_untemplated()

    # --- 1. build and validate (no cluster call before this passes) ---------------------------------------
    def build_manifest(self, identity: AirflowIdentity) -> dict[str, Any]:
        namespace = self.resolved_namespace()
        replicated = [
            ReplicatedJob(rj.name, self._job(rj, namespace, identity), rj.replicas)
            for rj in self.replicated_jobs
        ]
        try:
            name = jobset_name_for(identity, self.jobset_name_prefix, replicated, identity_seal())
            labels = {**(self.labels or {}), **identity.labels(), MANAGED_BY_LABEL: MANAGED_BY_VALUE}
            if self.priority_class:
                labels[PRIORITY_CLASS_LABEL] = self.priority_class
            manifest = build_jobset(
                name,
                self.queue_name,
                replicated,
                labels,
                namespace=namespace,
                annotations={**(self.annotations or {}), **identity.annotations()},
            )
        except InvalidJobSpec as exc:
            raise AirflowFailException(f"{self.task_id}: {exc}") from None
        if self.ttl_seconds_after_finished is not None:
            manifest["spec"]["ttlSecondsAfterFinished"] = self.ttl_seconds_after_finished
        return manifest

    def _check_untemplated(self) -> None:
        """What no template changes, per replicated job, when the DAG is parsed (as the Job operator)."""
        for rj in self.replicated_jobs:
            try:
                validate_untemplated(self._spec(rj, "default", None))
            except InvalidJobSpec as exc:
                raise AirflowFailException(f"{self.task_id}: replicated job {rj.name!r}: {exc}") from None

    def _job(self, rj: KueueReplicatedJob, namespace: str, identity: AirflowIdentity) -> dict[str, Any]:
        """The replicated job's Job, built and checked as ``KueueIndexedJobOperator``'s is; it carries the
        task instance's labels and annotations, so its Jobs are the task's (UI, sweepers, ownership)."""
        spec = self._spec(rj, namespace, identity)
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

    def _spec(
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

    # --- 2. the JobSet kind's part of the operator template (kueue_operator) -----------------------------
    def _previous(self, client: Any, identity: AirflowIdentity) -> list[dict[str, Any]]:
        """This task instance's JobSets; a cluster without JobSets (404) or a Role without them (403) fails
        the task with what to do, and nothing is created."""
        namespace = self.resolved_namespace()
        try:
            return super()._previous(client, identity)
        except ApiException as exc:
            if exc.status not in (403, 404):
                raise
            raise AirflowFailException(
                f"{self.task_id}: cannot list JobSets in namespace {namespace} (HTTP {exc.status}): "
                + (
                    "the cluster does not serve jobset.x-k8s.io/v1alpha2; install the JobSet controller and "
                    "enable Kueue's jobset.x-k8s.io/jobset integration"
                    if exc.status == 404
                    else "the kubernetes connection's identity may not; apply the jobsets rule of "
                    "deploy/rbac/worker-triggerer.yaml"
                )
                + ". Nothing was created."
            ) from None

    def _shard_count(self) -> int:
        """The checkpointed replicated job's indexes (each is a shard)."""
        return next((rj.completions for rj in self.replicated_jobs if rj.checkpoint), 1)

    def _shards_to_run(
        self, shards: Shards, previous: list[dict[str, Any]]
    ) -> tuple[IndexSet, RunLedger | None]:
        """Every shard: a JobSet runs as one gang, a retry runs it whole."""
        return IndexSet.range(0, self._shard_count()), None

    def _nothing_left(
        self, identity: AirflowIdentity, shards: Shards, ledger: RunLedger | None
    ) -> dict[str, Any]:
        raise AssertionError("a JobSet always runs its shards")  # _shards_to_run never returns none

    def _result(
        self, identity: AirflowIdentity, event: KueueEvent, shards: Shards
    ) -> tuple[dict[str, Any], str]:
        """The JobSet's result, with its cost and the task instance's figures over every JobSet it ran."""
        result = event.result_keys()
        if "running_seconds" in event.result:
            model = self._cost_model()
            current = model.figures(
                event.name,
                _seconds(result.get("queued_seconds")),
                _seconds(result.get("running_seconds")),
                self.spot,
                identity.try_number,
            )
            jobsets = ObjectLister(self._client(), self.resolved_namespace(), identity, self.spot)
            result.update(task_instance_totals(current, None, model, jobsets))
        return result, event.message

    def _cost_model(self) -> GangCostModel:
        """Each replicated job's pods (replicas x parallelism) at its own requests."""
        return GangCostModel(
            tuple(
                PodSetPrice(
                    rj.name,
                    rj.replicas * min(rj.parallelism or rj.completions, rj.completions),
                    (
                        plain(rj.resources) or template_main_container(rj.job_template).get("resources") or {}
                    ).get("requests"),
                )
                for rj in self.replicated_jobs
            ),
            self.vm_price,
        )

    def _before_create(self, client: KindClient, manifest: dict[str, Any]) -> None:
        """Refuse a MultiKueue queue before anything is created: Kueue would dispatch the JobSet to a worker
        cluster (its webhook sets ``spec.managedBy``, seen here in a server-side dry run), where its child
        Jobs and pods then run, while this task follows, checks and tails the child Jobs on this cluster,
        where there are none. Jobs run through MultiKueue unchanged (Kueue copies their status back)."""
        defaulted = client.dry_run(manifest)
        if defaulted is not None and (defaulted.get("spec") or {}).get("managedBy") == MULTIKUEUE_CONTROLLER:
            raise AirflowFailException(
                f"{self.task_id}: LocalQueue {self.queue_name!r} dispatches through MultiKueue (its "
                "ClusterQueue has a MultiKueue admission check), which this operator does not support for "
                "JobSets: the task follows the JobSet's child Jobs on this cluster, and MultiKueue runs them "
                "on a worker cluster. Nothing was created. Use a queue without MultiKueue, or "
                "KueueIndexedJobOperator, which runs through MultiKueue unchanged"
            )

    def _submitted_line(self) -> str:
        return ": " + ", ".join(f"{rj.name} {rj.replicas}x{rj.completions}" for rj in self.replicated_jobs)

    def _trigger_for(self, wait: WaitOn) -> KueueJobSetTrigger:
        return KueueJobSetTrigger(
            jobset_name=wait.obj["metadata"]["name"],
            namespace=self.resolved_namespace(),
            queue_name=wait.queue_name or self.queue_name,
            kubernetes_conn_id=self.kubernetes_conn_id,
            **self.cluster_target().overrides(),
            jobset_uid=wait.obj["metadata"].get("uid"),
            queue_timeout=self.queue_timeout,
            submitted_at=created_epoch(wait.obj),
            workload_timeout=self.workload_timeout,
            start_timeout=self.start_timeout,
            deadline=wait.plan.to_dict() if wait.plan else None,
            deferred_at=time.time(),
            released_before=wait.released_before,
            credential=wait.shards.trigger_credential(wait.obj["metadata"]["name"]),
        )

    def _shape(self, manifest: dict[str, Any], shards: Shards, indexes: IndexSet) -> None:
        """The checkpointed replicated job's pods learn where (and with which SAS Secret, named after the
        JobSet) to checkpoint: its Job template is shaped as an Indexed Job of the provider is."""
        checkpointed = {rj.name for rj in self.replicated_jobs if rj.checkpoint}  # one, with checkpointing=
        for template in manifest["spec"]["replicatedJobs"]:
            if template["name"] in checkpointed:
                as_job = {  # shaped as a Job, but its SAS Secret is the JobSet's (named for the kind)
                    "kind": "JobSet",
                    "metadata": {"name": manifest["metadata"]["name"]},
                    "spec": template["template"]["spec"],
                }
                shards.shape_job(as_job, indexes)

    def _failed_by_job(self, event: KueueEvent) -> dict[str, str]:
        return dict(event.failed_jobs)


def _seconds(value: object) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None
