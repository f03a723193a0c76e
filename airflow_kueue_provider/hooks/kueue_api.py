"""Names, paths and response readers shared by the sync and async Kueue hooks (no I/O here)."""

from __future__ import annotations

import json
from typing import Any

from ..kueue.errors import KueueProviderError
from ..kueue.identity.workload_owner import workload_job_uid
from ..kueue.kinds import child_kind
from ..kueue.names import INDEX_ANNOTATION

KUEUE_GROUP = "kueue.x-k8s.io"
SUPPORTED_VERSIONS = ("v1beta2", "v1beta1")  # newest first; v1beta1 is served up to Kueue 0.19
VISIBILITY_GROUP = "visibility.kueue.x-k8s.io"


class UnsupportedKueueVersion(RuntimeError, KueueProviderError):
    """The cluster's Kueue serves none of the API versions this provider speaks."""


def pick_version(group_doc: dict[str, Any]) -> str:
    """From ``GET /apis/kueue.x-k8s.io``, the newest version this provider speaks."""
    served = {v.get("version") for v in group_doc.get("versions", [])}
    for version in SUPPORTED_VERSIONS:
        if version in served:
            return version
    raise UnsupportedKueueVersion(
        f"Kueue serves {sorted(v for v in served if v)} but this provider speaks {list(SUPPORTED_VERSIONS)}; "
        "install Kueue v0.9 or newer"
    )


def version_not_served(body: object, name: str) -> bool:
    """Whether a 404 to ``GET .../<plural>/<name>`` says the resource's group version is not served, rather
    than that the object is missing: the apiserver names a missing object in the Status's ``details``."""
    try:
        status = json.loads(body) if isinstance(body, (str, bytes)) else body
    except ValueError:
        return True  # "404 page not found": the path itself is unknown
    details = status.get("details") if isinstance(status, dict) else None
    return not (isinstance(details, dict) and details.get("name") == name)


def pending_workloads_path(version: str, namespace: str, local_queue: str) -> str:
    lq = f"namespaces/{namespace}/localqueues/{local_queue}"
    return f"/apis/{VISIBILITY_GROUP}/{version}/{lq}/pendingworkloads"


def position_of(pending: dict[str, Any], workload_name: str) -> tuple[int, int] | None:
    """(position in LocalQueue, position in ClusterQueue) of ``workload_name``, 0-based, if it is listed."""
    for item in pending.get("items", []):
        if item.get("metadata", {}).get("name") == workload_name:
            return int(item.get("positionInLocalQueue", 0)), int(item.get("positionInClusterQueue", 0))
    return None


def first_owned_by(workloads: list[dict[str, Any]], job_uid: str) -> dict[str, Any] | None:
    """The Job's current Workload (the newest, for an elastic Job's slices): of those the job-uid label
    selected, only one whose controller owner is the Job (``workload_job_uid``); None without one."""
    owned = [w for w in workloads if workload_job_uid(w) == job_uid]
    return max(owned, key=lambda w: str(w["metadata"].get("creationTimestamp", "")), default=None)


def label_selector(labels: dict[str, str]) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(labels.items()))


def controlled_by_job(pod: dict[str, Any], job_name: str, job_uid: str | None = None) -> bool:
    """Whether the Job ``job_name`` (of uid ``job_uid``, when given) is the pod's controller. The job-name
    label alone proves nothing: anyone who may create pods in the namespace can set it."""
    return any(
        ref.get("controller")
        and ref.get("kind") == child_kind().kind
        and ref.get("name") == job_name
        and (job_uid is None or ref.get("uid") == job_uid)
        for ref in pod.get("metadata", {}).get("ownerReferences") or []
    )


def pods_by_index(
    pods: list[dict[str, Any]], job_name: str, job_uid: str | None = None
) -> dict[int, list[dict[str, Any]]]:
    """The pods the Job controls, grouped by completion index, newest first within an index."""
    grouped: dict[int, list[dict[str, Any]]] = {}
    for pod in (p for p in pods if controlled_by_job(p, job_name, job_uid)):
        raw = pod.get("metadata", {}).get("annotations", {}).get(INDEX_ANNOTATION)
        if raw is not None and raw.isdigit():
            grouped.setdefault(int(raw), []).append(pod)
    for items in grouped.values():
        items.sort(key=lambda p: p.get("metadata", {}).get("creationTimestamp") or "", reverse=True)
    return grouped
