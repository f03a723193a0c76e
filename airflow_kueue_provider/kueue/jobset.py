"""JobSets (``jobset.x-k8s.io/v1alpha2``): several Job templates run and admitted as one (pure).

A JobSet holds replicated jobs, e.g. a coordinator (1 Job of 1 pod) and workers (1 Indexed Job of N pods);
Kueue admits it as one Workload with one pod set per replicated job. Each replicated job's template is built
and validated as the provider's own Indexed Job is (``build_indexed_job``), so the same inputs, checks and
safety rules hold; the JobSet is created suspended, and only Kueue unsuspends it.

The JobSet controller names its Jobs ``<jobset>-<replicated job>-<replica>`` and labels them with both
names; their status (``completedIndexes``, ``failedIndexes``) is where per-index progress is read, the
JobSet's own status (``replicatedJobsStatus``, conditions ``Completed``/``Failed``) is where the outcome is.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .identity.airflow_identity import AirflowIdentity, deterministic_job_name
from .identity.identity_seal import IdentitySeal
from .index_set import IndexSet
from .job_progress import finished_condition
from .k8s_names import DNS1123_LABEL_MAX_LENGTH, MAX_JOB_NAME_LENGTH, is_dns1123_label
from .kinds.jobset import JOBSET, is_jobset_child
from .names import QUEUE_NAME_LABEL, REPLICATED_JOB_LABEL
from .progress.followed_view import ever_admitted, is_admitted
from .progress.workload_state import WorkloadState, workload_state_from_dict
from .spec.job_spec import InvalidJobSpec

JOBSET_GROUP, JOBSET_VERSION, JOBSET_PLURAL = JOBSET.api.group, JOBSET.api.version, JOBSET.api.plural
JOBSET_API_VERSION = f"{JOBSET_GROUP}/{JOBSET_VERSION}"
MAX_REPLICATED_JOB_NAME = 20
"""Child Job names are ``<jobset>-<replicated job>-<replica>``, pod names add more: keep this part short."""
POD_NAME_SUFFIX = len("-abcde")
"""The random part the Job controller appends to a pod name (the JobSet webhook counts it too)."""
NAME_PREFIX_FOR_DNS1035 = "js-"


@dataclass(frozen=True)
class ReplicatedJob:
    """One template of a JobSet: ``replicas`` copies of ``job`` (a batch/v1 Job as ``build_indexed_job``
    makes it; its metadata and queue label are dropped, the JobSet carries them)."""

    name: str
    job: Mapping[str, Any]
    replicas: int = 1


def longest_pod_name_part(rj: ReplicatedJob) -> int:
    """Characters a pod name of ``rj`` adds to its JobSet's name: ``-<rj>-<replica>-<index>-abcde``."""
    completions = int((rj.job.get("spec") or {}).get("completions") or 1)
    return len(f"-{rj.name}-{max(rj.replicas - 1, 0)}-{completions - 1}") + POD_NAME_SUFFIX


def jobset_name_budget(replicated_jobs: Sequence[ReplicatedJob]) -> int:
    """The longest JobSet name whose pod names all stay within 63 characters (the JobSet webhook's rule)."""
    longest = max((longest_pod_name_part(rj) for rj in replicated_jobs), default=0)
    return min(MAX_JOB_NAME_LENGTH, DNS1123_LABEL_MAX_LENGTH - longest)


def jobset_name_for(
    identity: AirflowIdentity,
    prefix: str | None,
    replicated_jobs: Sequence[ReplicatedJob],
    seal: IdentitySeal,
) -> str:
    """The try's deterministic JobSet name, short enough for its pod names and starting with a letter
    (JobSet names are DNS-1035 labels: a DAG id may start with a digit)."""
    budget = jobset_name_budget(replicated_jobs)
    name = deterministic_job_name(identity, prefix, seal=seal, per_try=True, max_length=budget)
    if not name[:1].isalpha():
        name = NAME_PREFIX_FOR_DNS1035 + deterministic_job_name(
            identity, prefix, seal=seal, per_try=True, max_length=budget - len(NAME_PREFIX_FOR_DNS1035)
        )
    if len(name) > budget:
        raise InvalidJobSpec(
            [
                (
                    "replicated_jobs",
                    f"the pod names of this JobSet would be longer than {DNS1123_LABEL_MAX_LENGTH} "
                    "characters even with the shortest JobSet name: shorten the replicated job names or "
                    "lower completions/replicas",
                )
            ]
        )
    return name


def build_jobset(
    name: str,
    queue_name: str,
    replicated_jobs: Sequence[ReplicatedJob],
    labels: Mapping[str, str],
    *,
    namespace: str | None = None,
    annotations: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The JobSet, suspended and labelled for ``queue_name``; a success needs every replicated job."""
    problems = replicated_job_problems(replicated_jobs)
    if not problems and len(name) > jobset_name_budget(replicated_jobs):
        problems.append(
            f"JobSet name {name!r} is too long: its pod names would exceed {DNS1123_LABEL_MAX_LENGTH} "
            f"characters (at most {jobset_name_budget(replicated_jobs)} for these replicated jobs)"
        )
    if problems:
        raise InvalidJobSpec([("replicated_jobs", problem) for problem in problems])
    return {
        "apiVersion": JOBSET_API_VERSION,
        "kind": "JobSet",
        "metadata": _metadata(name, namespace, {**labels, QUEUE_NAME_LABEL: queue_name}, annotations),
        "spec": {
            "suspend": True,
            "replicatedJobs": [_replicated(rj) for rj in replicated_jobs],
            "successPolicy": {"operator": "All"},
            "failurePolicy": {"maxRestarts": 0},
        },
    }


def _metadata(
    name: str, namespace: str | None, labels: Mapping[str, str], annotations: Mapping[str, str] | None
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": dict(labels)}
    if namespace:
        meta["namespace"] = namespace
    if annotations:
        meta["annotations"] = dict(annotations)
    return meta


def replicated_job_problems(replicated_jobs: Sequence[ReplicatedJob]) -> list[str]:
    problems = []
    if not replicated_jobs:
        problems.append("replicated_jobs is empty: give at least one ReplicatedJob")
    names = [rj.name for rj in replicated_jobs]
    for duplicate in sorted({n for n in names if names.count(n) > 1}):
        problems.append(f"replicated job name {duplicate!r} is used twice: names must be unique")
    for rj in replicated_jobs:
        if not is_dns1123_label(rj.name) or len(rj.name) > MAX_REPLICATED_JOB_NAME:
            problems.append(
                f"replicated job name {rj.name!r} must be a lowercase DNS label of at most "
                f"{MAX_REPLICATED_JOB_NAME} characters (it is part of every Job and pod name)"
            )
        if rj.replicas < 1:
            problems.append(f"replicated job {rj.name!r}: replicas={rj.replicas} must be at least 1")
    return problems


def _replicated(rj: ReplicatedJob) -> dict[str, Any]:
    """The Job's spec (Kueue suspends the JobSet, not its Jobs) and its labels and annotations, without the
    queue label (Kueue queues the JobSet as a whole)."""
    meta = rj.job.get("metadata") or {}
    spec = {k: v for k, v in (rj.job.get("spec") or {}).items() if k != "suspend"}
    template_meta: dict[str, Any] = {
        "labels": {k: v for k, v in (meta.get("labels") or {}).items() if k != QUEUE_NAME_LABEL}
    }
    if meta.get("annotations"):
        template_meta["annotations"] = meta["annotations"]
    return {"name": rj.name, "replicas": rj.replicas, "template": {"metadata": template_meta, "spec": spec}}


@dataclass(frozen=True)
class ChildJob:
    """One Job of a replicated job, as its status says now."""

    name: str
    completions: int
    completed: IndexSet
    failed: IndexSet
    active: int
    ready: int = 0
    """``status.ready``: pods that passed their readiness (running, for a pod without a probe)."""
    uid: str | None = None
    """Its uid: its pods are the ones it controls, not the ones carrying its name in a label."""


@dataclass(frozen=True)
class ReplicatedJobProgress:
    name: str
    replicas: int
    jobs: tuple[ChildJob, ...] = field(default_factory=tuple)

    @property
    def completions(self) -> int:
        return sum(j.completions for j in self.jobs)

    @property
    def completed(self) -> int:
        return sum(len(j.completed) for j in self.jobs)

    @property
    def active(self) -> int:
        return sum(j.active for j in self.jobs)

    @property
    def failed(self) -> int:
        return sum(len(j.failed) for j in self.jobs)

    def failed_indexes(self) -> list[str]:
        """``"workers-0: 3,7"`` per child Job with failed indexes."""
        return [f"{j.name}: {j.failed}" for j in self.jobs if j.failed]

    def describe(self) -> str:
        failed = "; ".join(self.failed_indexes())
        return f"{self.name} {self.completed}/{self.completions} done, {self.active} active" + (
            f", failed indexes {failed}" if failed else ""
        )


@dataclass(frozen=True)
class JobSetView:
    name: str
    namespace: str
    suspended: bool
    replicated: tuple[ReplicatedJobProgress, ...]
    finished: Mapping[str, Any] | None
    """The JobSet's ``Completed`` or ``Failed`` condition when it is true."""
    workload: WorkloadState | None = None
    """Kueue's one Workload for the whole JobSet."""

    @property
    def finished_condition(self) -> Mapping[str, Any] | None:
        return self.finished

    @property
    def admitted(self) -> bool:
        return is_admitted(self.workload)

    @property
    def started(self) -> bool:
        """Ever admitted (``followed_view.ever_admitted``), from the Workload and the child Jobs."""
        ran = any(job.active or job.completed or job.failed for job in self.jobs)
        return ever_admitted(self.workload, ran=ran)

    @property
    def completions(self) -> int:
        return sum(rj.completions for rj in self.replicated)

    @property
    def done(self) -> int:
        return sum(rj.completed + rj.failed for rj in self.replicated)

    @property
    def active(self) -> int:
        return sum(rj.active for rj in self.replicated)

    def progress_line(self) -> str:
        return "; ".join(rj.describe() for rj in self.replicated)

    @property
    def jobs(self) -> tuple[ChildJob, ...]:
        """Every child Job, replicated job by replicated job."""
        return tuple(job for rj in self.replicated for job in rj.jobs)

    @property
    def unstarted_jobs(self) -> tuple[ChildJob, ...]:
        """Child Jobs with no pod ready and no index finished: in a gang, one such Job (workers whose image
        never pulls) holds the whole JobSet's quota while the others run."""
        return tuple(job for job in self.jobs if not (job.ready or job.completed or job.failed))

    def outcome(self) -> tuple[str, str] | None:
        """``("success" | "failed", message)`` once the JobSet finished; None while it runs."""
        if self.finished is None:
            return None
        where = f"JobSet {self.namespace}/{self.name}"
        if self.finished.get("type") == "Completed":
            return "success", f"{where} completed: {self.progress_line()}"
        failed = [f for rj in self.replicated for f in rj.failed_indexes()]
        named = f"; failed indexes: {'; '.join(failed)}" if failed else ""
        why = f"{self.finished.get('reason')}: {self.finished.get('message')}"
        return "failed", f"{where} failed ({why}){named}"


def jobset_view(
    jobset: Mapping[str, Any],
    child_jobs: Iterable[Mapping[str, Any]],
    workload: Mapping[str, Any] | None = None,
) -> JobSetView:
    """The JobSet, its Jobs per replicated job (those ``is_jobset_child`` proves, of the ones listed by
    ``JOBSET_NAME_LABEL``), and its Workload."""
    meta, spec = jobset.get("metadata") or {}, jobset.get("spec") or {}
    by_replicated: dict[str, list[ChildJob]] = {}
    for job in (j for j in child_jobs if is_jobset_child(j, jobset)):
        labels = (job.get("metadata") or {}).get("labels") or {}
        by_replicated.setdefault(str(labels.get(REPLICATED_JOB_LABEL)), []).append(_child(job))
    replicated = tuple(
        ReplicatedJobProgress(
            name=str(rj.get("name")),
            replicas=int(rj.get("replicas") or 1),
            jobs=tuple(sorted(by_replicated.get(str(rj.get("name")), []), key=lambda j: j.name)),
        )
        for rj in spec.get("replicatedJobs") or []
    )
    return JobSetView(
        name=str(meta.get("name") or ""),
        namespace=str(meta.get("namespace") or ""),
        suspended=bool(spec.get("suspend")),
        replicated=replicated,
        finished=finished_condition(jobset),  # a JobSet's Completed or Failed condition
        workload=workload_state_from_dict(workload) if workload else None,
    )


def _child(job: Mapping[str, Any]) -> ChildJob:
    meta, spec, status = job.get("metadata") or {}, job.get("spec") or {}, job.get("status") or {}
    return ChildJob(
        name=str(meta.get("name") or ""),
        completions=int(spec.get("completions") or 1),
        completed=IndexSet.parse(status.get("completedIndexes")),
        failed=IndexSet.parse(status.get("failedIndexes")),
        active=int(status.get("active") or 0),
        ready=int(status.get("ready") or 0),
        uid=str(meta["uid"]) if meta.get("uid") else None,
    )
