"""Which object a Kueue Workload belongs to (pure).

Kueue labels a Workload with its object's uid (``kueue.x-k8s.io/job-uid``) and makes that object its
controller owner. The label selects on the server; it is public, so anyone who may create Workloads in the
namespace can copy it onto one of theirs. A Workload counts as an object's only when its controller owner
reference carries the same uid, the way Kueue itself finds a Job's Workload (by owner).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ..names import JOB_UID_LABEL


def workload_job_uid(workload: Mapping[str, Any]) -> str | None:
    """The uid of the object the Workload belongs to: its ``job-uid`` label when its controller owner
    reference has that uid; None otherwise (no label, no controller, or a label copied onto another's)."""
    meta = workload.get("metadata") or {}
    uid = (meta.get("labels") or {}).get(JOB_UID_LABEL)
    if not uid:
        return None
    controlled = any(
        ref.get("controller") and ref.get("uid") == uid for ref in meta.get("ownerReferences") or []
    )
    return str(uid) if controlled else None


def workloads_of(workloads: Iterable[Mapping[str, Any]], job_uid: str) -> list[Mapping[str, Any]]:
    """Those of ``workloads`` that belong to the object of ``job_uid`` (``workload_job_uid``)."""
    return [w for w in workloads if workload_job_uid(w) == job_uid]
