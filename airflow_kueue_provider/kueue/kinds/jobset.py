"""The JobSet kind (``jobset.x-k8s.io/v1alpha2``): replicated Job templates admitted as one Workload."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..names import JOBSET_NAME_LABEL
from .description import ApiCoordinates, ConditionEnd, KindDescription
from .registry import register


def replicated_job_templates(manifest: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Each replicated job's Job template in a JobSet manifest (created where missing)."""
    return [rj.setdefault("template", {}) for rj in (manifest.get("spec") or {}).get("replicatedJobs") or []]


JOBSET = register(
    KindDescription(
        kind="JobSet",
        api=ApiCoordinates("jobset.x-k8s.io", "v1alpha2", "jobsets"),
        name_key="jobset_name",
        uid_key="jobset_uid",
        end=ConditionEnd(success="Completed"),
        secret_tag="jobset-",
        uid_sealed=False,  # the worker's Role may not patch JobSets (it could unsuspend one)
        child_label=JOBSET_NAME_LABEL,
        child_templates=replicated_job_templates,
    )
)
