"""``KueueJobSetOperator``: several Job templates (e.g. a coordinator and N indexed workers) run as one
JobSet, admitted by Kueue as one Workload (all or nothing), waited for through the queue.

The JobSet kind of the operator template (``kueue_operator``): its parameters, its manifest (one Indexed Job
per replicated job, built and checked as the Job kind's), its trigger and its per-child-Job log tails.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from ..airflow_compat import AirflowFailException
from ..hooks.identity_key import identity_seal
from ..hooks.kind_client import KindClient
from ..kueue.checkpoints.ledger import RunLedger
from ..kueue.identity.airflow_identity import AirflowIdentity
from ..kueue.index_set import IndexSet
from ..kueue.jobset import ReplicatedJob, build_jobset, jobset_name_for
from ..kueue.kinds.jobset import JOBSET
from ..kueue.names import MANAGED_BY_LABEL, MANAGED_BY_VALUE, PRIORITY_CLASS_LABEL
from ..kueue.progress.trigger_event import KueueEvent
from ..kueue.spec.job_spec import MULTIKUEUE_CONTROLLER, InvalidJobSpec
from ..triggers.kueue_jobset import KueueJobSetTrigger
from .failures import KueueTaskFailed
from .kueue_operator import KueueOperator
from .operator_kind import Shards
from .replicated_job import KueueReplicatedJob, ReplicatedJobBuilder, gang_cost_model, parse_replicated_jobs
from .run_figures import ObjectLister, task_instance_totals

__all__ = ["KueueJobSetFailed", "KueueJobSetOperator", "KueueReplicatedJob"]
"""``KueueReplicatedJob`` lives in ``replicated_job``; DAGs import it from here."""


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


class KueueJobSetOperator(KueueOperator):
    """Run ``replicated_jobs`` as one JobSet in a Kueue LocalQueue and wait until every one of them finished.

    Kueue admits the JobSet as one Workload with a pod set per replicated job: a coordinator and its 8
    workers start together or wait together, never half of them. The JobSet is created suspended, so no pod
    runs before Kueue admits it. The task defers while it waits; a long queue wait is not a failure unless
    ``queue_timeout`` is set. Its log has a line per replicated job (``coordinator 1/1 done, 0 active;
    workers 5/8 done, 3 active``), its result (XCom) the same per replicated job, and a failure names the
    failing index by its Job (``genomics-workers-0: 3``) with that pod's last log lines. A retry reattaches
    to a JobSet of the task that still runs (or completed); one that failed is replaced by a new one.
    The parameters every kind shares (``queue_name``, ``namespace``, ``workload_priority_class``, ``spot``,
    the timeouts, ``checkpointing``, ``deadline`` and its escalation, ``deferrable``, ...) are documented on
    ``KueueOperator``; for a JobSet, ``checkpointing`` goes to the replicated job with ``checkpoint=True``,
    and ``start_timeout`` names the child Job that cannot start.

    :param replicated_jobs: ``KueueReplicatedJob``\\ s (or their dicts), at least one; names unique, short
        DNS labels (they are part of every Job and pod name). Templated, in each its ``image``, ``cmds``,
        ``arguments`` and ``env``.
    :param ttl_seconds_after_finished: the JobSet controller deletes the finished JobSet (its Jobs and pods
        with it) after this many seconds (default one day); ``None``: kept.
    :param labels: the JobSet's labels (templated), beside the task instance's own.
    :param annotations: the JobSet's annotations (templated), beside the task instance's own.
    :param jobset_name_prefix: the readable part of the JobSet's name (default ``<dag>-<task>``), cut to fit
        the pod names; the rest is a hash of the task instance and its try.
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
    trigger = KueueJobSetTrigger
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
        checkpointing = self._checkpointing is not None
        self.replicated_jobs = parse_replicated_jobs(self.task_id, replicated_jobs, checkpointing)
        self.ttl_seconds_after_finished = ttl_seconds_after_finished
        self.keep_jobset_on_failure = keep_jobset_on_failure
        self.labels = labels
        self.annotations = annotations
        self.jobset_name_prefix = jobset_name_prefix
        self._replicated_job_builder().check_untemplated(self.replicated_jobs)

    # --- 1. build and validate (no cluster call before this passes) ---------------------------------------
    def build_manifest(self, identity: AirflowIdentity) -> dict[str, Any]:
        namespace, builder = self.resolved_namespace(), self._replicated_job_builder()
        replicated = [
            ReplicatedJob(rj.name, builder.job(rj, namespace, identity), rj.replicas)
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

    def _replicated_job_builder(self) -> ReplicatedJobBuilder:
        """Reads ``queue_name`` when called: at parse time the literal one, at run time the rendered one."""
        return ReplicatedJobBuilder(self.task_id, self.queue_name, self.spot)

    # --- 2. the JobSet kind's part of the operator template (kueue_operator) -----------------------------
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
            model = gang_cost_model(self.replicated_jobs, self.vm_price)
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
