"""LocalQueues with their ClusterQueue's quota and usage, for the UI's queue dashboard (pure)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class ResourceUse:
    flavor: str
    resource: str
    nominal: str | None
    """The ClusterQueue's nominal quota (a Kubernetes quantity), None when the flavor does not list it."""
    reserved: str
    """Quota reserved by admitted Workloads (``status.flavorsReservation``)."""
    borrowed: str


@dataclass(frozen=True)
class QueueRow:
    namespace: str
    local_queue: str
    cluster_queue: str
    cohort: str | None
    active: bool
    pending: int
    reserving: int
    admitted: int
    cluster_queue_pending: int | None
    """Pending across the whole ClusterQueue (every namespace); None when it could not be read."""
    usage: tuple[ResourceUse, ...]
    fair_share: int | None = None
    """The ClusterQueue's ``status.fairSharing.weightedShare`` with Kueue's fair sharing on: 0 while it uses
    no more than its nominal quota, more the more it borrows (divided by its weight); None when off."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def queue_rows(
    local_queues: Iterable[Mapping[str, Any]], cluster_queues: Iterable[Mapping[str, Any]]
) -> list[QueueRow]:
    """One row per LocalQueue, sorted by namespace and name, joined with its ClusterQueue."""
    by_name = {str((cq.get("metadata") or {}).get("name")): cq for cq in cluster_queues}
    rows = [_row(lq, by_name.get(str((lq.get("spec") or {}).get("clusterQueue")))) for lq in local_queues]
    return sorted(rows, key=lambda row: (row.namespace, row.local_queue))


def _row(lq: Mapping[str, Any], cq: Mapping[str, Any] | None) -> QueueRow:
    metadata, spec, status = (lq.get(key) or {} for key in ("metadata", "spec", "status"))
    cq_spec = (cq or {}).get("spec") or {}
    cq_status = (cq or {}).get("status") or {}
    return QueueRow(
        namespace=str(metadata.get("namespace")),
        local_queue=str(metadata.get("name")),
        cluster_queue=str(spec.get("clusterQueue")),
        cohort=cq_spec.get("cohortName") or cq_spec.get("cohort"),
        active=_is_active(status) and (cq is None or _is_active(cq_status)),
        pending=int(status.get("pendingWorkloads") or 0),
        reserving=int(status.get("reservingWorkloads") or 0),
        admitted=int(status.get("admittedWorkloads") or 0),
        cluster_queue_pending=int(cq_status.get("pendingWorkloads") or 0) if cq is not None else None,
        usage=_usage(cq_spec, cq_status),
        fair_share=_fair_share(cq_status),
    )


def _fair_share(status: Mapping[str, Any]) -> int | None:
    share = (status.get("fairSharing") or {}).get("weightedShare")
    return int(share) if isinstance(share, int) else None


def _is_active(status: Mapping[str, Any]) -> bool:
    for cond in status.get("conditions") or []:
        if cond.get("type") == "Active":
            return bool(cond.get("status") == "True")
    return False


def _usage(spec: Mapping[str, Any], status: Mapping[str, Any]) -> tuple[ResourceUse, ...]:
    nominal: dict[tuple[str, str], str] = {}
    for group in spec.get("resourceGroups") or []:
        for flavor in group.get("flavors") or []:
            for res in flavor.get("resources") or []:
                nominal[(str(flavor.get("name")), str(res.get("name")))] = str(res.get("nominalQuota"))
    reserved: dict[tuple[str, str], tuple[str, str]] = {}
    for flavor in status.get("flavorsReservation") or []:
        for res in flavor.get("resources") or []:
            key = (str(flavor.get("name")), str(res.get("name")))
            reserved[key] = (str(res.get("total") or "0"), str(res.get("borrowed") or "0"))
    keys = list(nominal) + [key for key in reserved if key not in nominal]
    uses = []
    for flavor, resource in keys:
        total, borrowed = reserved.get((flavor, resource), ("0", "0"))
        uses.append(ResourceUse(flavor, resource, nominal.get((flavor, resource)), total, borrowed))
    return tuple(uses)
