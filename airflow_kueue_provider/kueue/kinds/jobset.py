"""The JobSet kind (``jobset.x-k8s.io/v1alpha2``): replicated Job templates admitted as one Workload."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..names import JOBSET_NAME_LABEL, REPLICATED_JOB_LABEL
from .description import ApiCoordinates, ConditionEnd, KindDescription
from .registry import register


def replicated_job_templates(manifest: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Each replicated job's Job template in a JobSet manifest (created where missing)."""
    return [rj.setdefault("template", {}) for rj in (manifest.get("spec") or {}).get("replicatedJobs") or []]


def jobset_membership(job: Mapping[str, Any]) -> tuple[str, str] | None:
    """(JobSet, replicated job) of a JobSet's Job, from the JobSet controller's labels; else None."""
    labels = (job.get("metadata") or {}).get("labels") or {}
    jobset, replicated = labels.get(JOBSET_NAME_LABEL), labels.get(REPLICATED_JOB_LABEL)
    return (str(jobset), str(replicated)) if jobset and replicated else None


def is_jobset_child(job: Mapping[str, Any], jobset: Mapping[str, Any]) -> bool:
    """Whether ``job`` is one the JobSet controller made for ``jobset``: its controller is this JobSet (by
    uid), and its name is ``<jobset>-<replicated job>-<replica>`` for a replicated job and replica the
    JobSet has. The JobSet controller's labels alone prove nothing: anyone who may create Jobs in the
    namespace can copy them, and an ownerReference too (``deploy/policy`` ``jobset-children`` refuses both
    for anyone but the JobSet controller; this check is what holds where that policy is not bound)."""
    meta, js_meta = job.get("metadata") or {}, jobset.get("metadata") or {}
    uid = js_meta.get("uid")
    controlled = any(
        ref.get("controller") and ref.get("kind") == "JobSet" and (uid is None or ref.get("uid") == uid)
        for ref in meta.get("ownerReferences") or []
    )
    membership = jobset_membership(job)
    if not controlled or membership is None or membership[0] != js_meta.get("name"):
        return False
    replicas = {
        str(rj.get("name")): int(rj.get("replicas") or 1)
        for rj in (jobset.get("spec") or {}).get("replicatedJobs") or []
    }
    name, replicated = str(meta.get("name") or ""), membership[1]
    stem = f"{membership[0]}-{replicated}-"
    replica = name[len(stem) :] if name.startswith(stem) else ""
    return (
        replicated in replicas
        and replica.isdigit()
        and str(int(replica)) == replica
        and (int(replica) < replicas[replicated])
    )


JOBSET = register(
    KindDescription(
        kind="JobSet",
        api=ApiCoordinates("jobset.x-k8s.io", "v1alpha2", "jobsets"),
        key_prefix="jobset",
        end=ConditionEnd(success="Completed"),
        secret_tag="jobset-",
        uid_sealed=False,  # the worker's Role may not patch JobSets (it could unsuspend one)
        child_label=JOBSET_NAME_LABEL,
        child_part_label=REPLICATED_JOB_LABEL,
        child_part_noun="replicated job",
        owns_child=is_jobset_child,
        child_templates=replicated_job_templates,
        operator_names=("KueueJobSetOperator",),
        served_by="the JobSet controller, and Kueue's jobset.x-k8s.io/jobset integration",
    )
)
