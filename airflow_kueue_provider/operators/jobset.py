"""``KueueJobSetOperator``: several Job templates (e.g. a coordinator and N indexed workers) run as one
JobSet, admitted by Kueue as one Workload (all or nothing), waited for through the queue."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from datetime import timedelta
from typing import TYPE_CHECKING, Any, ClassVar

from airflow.sdk import BaseOperator
from kubernetes.client.rest import ApiException

from ..airflow_compat import AirflowException, AirflowFailException
from ..hooks.blob_store import BlobConfigError
from ..hooks.jobset_hook import JobSetHook
from ..kueue.airflow_identity import AirflowIdentity
from ..kueue.index_set import IndexSet
from ..kueue.job_manifest import build_indexed_job
from ..kueue.job_spec import IndexedJobSpec, InvalidJobSpec
from ..kueue.job_template import as_mapping
from ..kueue.job_validation import validate_untemplated
from ..kueue.jobset import ReplicatedJob, build_jobset, jobset_name_for, replicated_job_problems
from ..kueue.k8s_names import is_dns1123_subdomain, is_valid_label_value
from ..kueue.names import MANAGED_BY_LABEL, MANAGED_BY_VALUE, PRIORITY_CLASS_LABEL
from ..kueue.pod_policy import violations, with_restricted_defaults
from ..kueue.quota_guard import DEFAULT_WORKLOAD_TIMEOUT
from ..kueue.retry_policy import PER_INDEX_DEFAULT, PerIndexDefault, per_index_retries
from ..kueue.start_guard import DEFAULT_START_TIMEOUT
from ..kueue.topology import InvalidTopology, TopologyRequest, with_topology
from ..triggers.kueue_jobset import KueueJobSetTrigger
from .checkpointing import Checkpointing, CheckpointSession
from .job_submission import create_or_adopt_object, reattachable
from .k8s_models import plain
from .kueue_link import KueueJobLink
from .settings import configured_pod_policy
from .task_facts import check_positive_seconds, created_epoch, seconds, task_identity

if TYPE_CHECKING:
    from airflow.sdk import Context

LOG_TAIL_INDEXES = 3  # per failed child Job


class KueueJobSetFailed(AirflowException):
    """The task's JobSet failed, timed out in the queue, or could not run: ``status``, ``jobset_name``,
    ``namespace`` and ``failed_indexes`` (per child Job, ``"<job>: 3,7"``) say which and where."""

    def __init__(self, message: str, event: Mapping[str, Any]) -> None:
        super().__init__(message)
        self.status: str | None = event.get("status")
        self.jobset_name: str | None = event.get("jobset_name")
        self.namespace: str | None = event.get("namespace")
        self.failed_indexes = "; ".join(
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


class KueueJobSetOperator(BaseOperator):
    """Run ``replicated_jobs`` as one JobSet in a Kueue LocalQueue and wait until every one of them finished.

    Kueue admits the JobSet as one Workload with a pod set per replicated job: a coordinator and its 8
    workers start together or wait together, never half of them. The JobSet is created suspended, so no pod
    runs before Kueue admits it. The task defers while it waits; a long queue wait is not a failure unless
    ``queue_timeout`` is set. Its log has a line per replicated job (``coordinator 1/1 done, 0 active;
    workers 5/8 done, 3 active``), its result (XCom) the same per replicated job, and a failure names the
    failing index by its Job (``genomics-workers-0: 3``) with that pod's last log lines. A retry reattaches
    to a JobSet of the task that still runs (or completed); one that failed is replaced by a new one.

    :param replicated_jobs: ``KueueReplicatedJob``\\ s (or their dicts), at least one; names unique, short
        DNS labels (they are part of every Job and pod name).
    :param priority_class: a Kueue WorkloadPriorityClass for the whole JobSet.
    :param spot: every replicated job tolerates AKS Spot nodes and does not count Spot evictions as failures.
    :param checkpointing: a Blob connection id or ``Checkpointing(...)``: the replicated job with
        ``checkpoint=True`` gets a checkpoint location (a SAS Secret owned by the JobSet, or workload
        identity).
    :param start_timeout: once admitted, how long the JobSet's pods may take to start (default 600 s). After
        that, pods that cannot start (an image that never pulls, a container config error, no node that fits)
        fail the task with that reason, named by child Job and pod, and the JobSet is deleted to free its
        quota.
    :param keep_jobset_on_failure: keep a JobSet that still runs when the task fails (default: delete it).
    """

    template_fields: Sequence[str] = ("queue_name", "namespace", "replicated_jobs", "labels", "annotations")
    ui_color = "#d4e9f7"
    operator_extra_links = (KueueJobLink(),)

    def __init__(
        self,
        *,
        queue_name: str,
        replicated_jobs: Sequence[KueueReplicatedJob | Mapping[str, Any]],
        namespace: str | None = None,
        priority_class: str | None = None,
        spot: bool = False,
        ttl_seconds_after_finished: int | None = 86400,
        queue_timeout: timedelta | float | None = None,
        workload_timeout: timedelta | float = DEFAULT_WORKLOAD_TIMEOUT,
        start_timeout: timedelta | float = DEFAULT_START_TIMEOUT,
        keep_jobset_on_failure: bool = False,
        labels: Mapping[str, str] | None = None,
        annotations: Mapping[str, str] | None = None,
        jobset_name_prefix: str | None = None,
        checkpointing: Checkpointing | dict[str, Any] | str | None = None,
        kubernetes_conn_id: str = "kubernetes_default",
        deferrable: bool = True,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        try:
            self.replicated_jobs = [KueueReplicatedJob.from_param(rj) for rj in replicated_jobs]
            self.checkpointing = Checkpointing.from_param(checkpointing)
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
        if bool(checkpointed) != (self.checkpointing is not None):
            raise AirflowFailException(
                f"{self.task_id}: checkpointing= and a replicated job with checkpoint=True go together: "
                "set both or neither"
            )
        if priority_class is not None and not (
            is_dns1123_subdomain(priority_class) and is_valid_label_value(priority_class)
        ):
            raise AirflowFailException(
                f"{self.task_id}: priority_class {priority_class!r} is not a valid WorkloadPriorityClass "
                "name: use at most 63 lowercase letters, digits, '-' and '.'"
            )
        self.queue_name = queue_name
        self.namespace = namespace
        self.priority_class = priority_class
        self.spot = spot
        self.ttl_seconds_after_finished = ttl_seconds_after_finished
        self.queue_timeout = None if queue_timeout is None else seconds(queue_timeout)
        self.workload_timeout = seconds(workload_timeout)
        self.start_timeout = seconds(start_timeout)
        if self.queue_timeout is not None and self.queue_timeout <= 0:
            raise AirflowFailException(f"{self.task_id}: queue_timeout must be positive, got {queue_timeout}")
        check_positive_seconds(
            self.task_id, workload_timeout=self.workload_timeout, start_timeout=self.start_timeout
        )
        self.keep_jobset_on_failure = keep_jobset_on_failure
        self.labels = labels
        self.annotations = annotations
        self.jobset_name_prefix = jobset_name_prefix
        self.kubernetes_conn_id = kubernetes_conn_id
        self.deferrable = deferrable
        self._jobset_name: str | None = None
        self._jobset_uid: str | None = None
        self._check_untemplated()

    # --- 1. build and validate (no cluster call before this passes) ---------------------------------------
    def build_manifest(self, identity: AirflowIdentity) -> dict[str, Any]:
        namespace = self.resolved_namespace()
        replicated = [
            ReplicatedJob(rj.name, self._job(rj, namespace, identity), rj.replicas)
            for rj in self.replicated_jobs
        ]
        try:
            name = jobset_name_for(identity, self.jobset_name_prefix, replicated)
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

    # --- 2. submit or reattach, then wait -------------------------------------------------------------------
    def execute(self, context: Context) -> dict[str, Any]:
        identity = task_identity(context)
        manifest = self.build_manifest(identity)
        session = self._checkpoint_session(identity)
        hook = JobSetHook(self.kubernetes_conn_id)
        self._check_local_queue(hook)
        namespace = self.resolved_namespace()
        # 1. Reattach to a JobSet of this task instance that still runs (or completed) ...
        try:
            previous = hook.task_instance_jobsets(namespace, identity)
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
        submission = reattachable(previous)
        if submission is None:
            # 2. ... or create this try's (a worker that died after creating it adopts it through the 409).
            token = session.prepare_pod_access() if session is not None else None
            if session is not None:
                self._give_checkpoint_env(manifest, session)
            submission = create_or_adopt_object(
                hook.create_jobset, hook.get_jobset, manifest, identity, "JobSet"
            )
            if session is not None and token is not None:
                self._hand_pods_their_sas(hook, session, submission.job, token)
        jobset = submission.job
        self._jobset_name, self._jobset_uid = jobset["metadata"]["name"], jobset["metadata"].get("uid")
        self.log.info(
            "%s JobSet %s/%s (%s) in LocalQueue %s: %s",
            "reattached to" if submission.reattached else "submitted",
            namespace,
            self._jobset_name,
            submission.reason,
            self.queue_name,
            ", ".join(f"{rj.name} {rj.replicas}x{rj.completions}" for rj in self.replicated_jobs),
        )
        trigger = KueueJobSetTrigger(
            jobset_name=self._jobset_name,
            namespace=namespace,
            queue_name=self.queue_name,
            kubernetes_conn_id=self.kubernetes_conn_id,
            jobset_uid=self._jobset_uid,
            queue_timeout=self.queue_timeout,
            submitted_at=created_epoch(jobset),
            workload_timeout=self.workload_timeout,
            start_timeout=self.start_timeout,
            deferred_at=time.time(),
        )
        if self.deferrable:
            self.defer(trigger=trigger, method_name="execute_complete")
        return self.execute_complete(context, asyncio.run(trigger.first_event()))

    def _give_checkpoint_env(self, manifest: dict[str, Any], session: CheckpointSession) -> None:
        """The checkpointed replicated job's pods learn where (and with which SAS Secret, named after the
        JobSet) to checkpoint: its Job template is shaped as an Indexed Job of the provider is."""
        rj = next(rj for rj in self.replicated_jobs if rj.checkpoint)
        template = next(t for t in manifest["spec"]["replicatedJobs"] if t["name"] == rj.name)
        as_job = {"metadata": {"name": manifest["metadata"]["name"]}, "spec": template["template"]["spec"]}
        session.shape_job(as_job, IndexSet.range(0, rj.completions))

    def _hand_pods_their_sas(
        self, hook: JobSetHook, session: CheckpointSession, jobset: dict[str, Any], token: str
    ) -> None:
        """The SAS Secret, owned by the JobSet (it goes with it). The JobSet is suspended until Kueue admits
        it; if the Secret cannot be made, the JobSet goes too: its pods could never checkpoint."""
        try:
            hook.create_secret(session.sas_secret(jobset, token))
        except Exception:
            hook.delete_jobset_unless_finished(
                self.resolved_namespace(), jobset["metadata"]["name"], uid=jobset["metadata"].get("uid")
            )
            raise

    def _checkpoint_session(self, identity: AirflowIdentity) -> CheckpointSession | None:
        if self.checkpointing is None:
            return None
        if problem := self.checkpointing.pod_policy_problem(configured_pod_policy()):
            raise AirflowFailException(f"{self.task_id}: checkpointing: {problem}")
        rj = next(rj for rj in self.replicated_jobs if rj.checkpoint)
        session = CheckpointSession(self.checkpointing, identity, rj.completions)
        try:
            session.check()
        except BlobConfigError as exc:
            raise AirflowFailException(f"{self.task_id}: checkpointing: {exc}") from None
        return session

    def _check_local_queue(self, hook: JobSetHook) -> None:
        namespace = self.resolved_namespace()
        if hook.get_local_queue(namespace, self.queue_name) is not None:
            return
        existing = sorted(q["metadata"]["name"] for q in hook.list_local_queues(namespace))
        raise AirflowFailException(
            f"{self.task_id}: LocalQueue {self.queue_name!r} does not exist in namespace {namespace!r} "
            f"(LocalQueues there: {', '.join(existing) or 'none'}); set queue_name to one of them or "
            "create it"
        )

    def resolved_namespace(self) -> str:
        """``namespace``, else the kubernetes connection's ``namespace`` extra, else ``default``."""
        if not self.namespace:
            self.namespace = JobSetHook(self.kubernetes_conn_id).connection_namespace() or "default"
        return self.namespace

    # --- 3. the final event -> result or failure --------------------------------------------------------
    def execute_complete(self, context: Context, event: dict[str, Any] | None = None) -> dict[str, Any]:
        if not event:
            raise KueueJobSetFailed("the trigger ended without an event", {})
        status, message = event.get("status"), str(event.get("message") or "")
        result = {k: v for k, v in event.items() if k not in ("status", "message", "failed_jobs")}
        if status == "success":
            self.log.info("%s; result: %s", message, json.dumps(result, sort_keys=True))
            if self.checkpointing is not None and not self.checkpointing.keep_after_success:
                rj = next(rj for rj in self.replicated_jobs if rj.checkpoint)
                CheckpointSession(
                    self.checkpointing, task_identity(context), rj.completions
                ).clean_up_after_success()
            return result
        message += self._log_tails(event) + self._stop_after_failure(event)
        raise KueueJobSetFailed(f"{status}: {message}", event)

    def _log_tails(self, event: Mapping[str, Any]) -> str:
        """The last log lines of the first failed indexes of each failed child Job."""
        namespace = str(event.get("namespace") or self.resolved_namespace())
        failed = dict(event.get("failed_jobs") or {})
        if not failed:
            return ""
        try:
            hook = JobSetHook(self.kubernetes_conn_id)
            parts = []
            for job_name, indexes in failed.items():
                first = list(IndexSet.parse(indexes))[:LOG_TAIL_INDEXES]
                for index, tail in hook.failed_index_log_tails(namespace, job_name, first).items():
                    parts.append(f"\n--- {job_name} index {index}, last log lines ---\n{tail.rstrip()}")
        except Exception as exc:  # the failure itself matters more than its logs
            return f"\n(could not read the failed pods' logs: {exc})"
        return "".join(parts)

    def _stop_after_failure(self, event: Mapping[str, Any]) -> str:
        """A failed task's JobSet must not keep holding quota: delete it unless it finished (or is kept)."""
        name = event.get("jobset_name")
        if self.keep_jobset_on_failure or not name or event.get("status") == "timeout":
            return ""
        try:
            what = JobSetHook(self.kubernetes_conn_id).delete_jobset_unless_finished(
                str(event.get("namespace") or self.resolved_namespace()),
                str(name),
                uid=event.get("jobset_uid"),
            )
        except Exception as exc:
            return f"\n(could not delete JobSet {name}: {exc}; delete it yourself to free its quota)"
        return "; its JobSet was still running and has been deleted" if what == "deleted" else ""

    def on_kill(self) -> None:
        """Blocking mode: the task was killed, so a JobSet still queued or running goes too."""
        if self._jobset_name:
            what = JobSetHook(self.kubernetes_conn_id).delete_jobset_unless_finished(
                self.resolved_namespace(), self._jobset_name, uid=self._jobset_uid
            )
            self.log.info("task killed; JobSet %s/%s: %s", self.resolved_namespace(), self._jobset_name, what)
