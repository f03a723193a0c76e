"""What the forecast at submit reads of Kueue (kueue/progress/forecast): the task's ClusterQueue with its
cohort (one LIST of ClusterQueues), the LocalQueue's pending Workloads (one visibility call), the quota
the namespace's admitted Workloads hold and since when (one page of Workloads) and the task's priority (one
GET of its WorkloadPriorityClass), as typed values.

The reads go through ``KueueHook``'s retrying calls; anything that cannot be read raises
``ForecastInputsUnavailable`` naming what, and the forecast is left out (never the task)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from datetime import UTC, datetime
from typing import Any, Protocol

from kubernetes.client.rest import ApiException
from urllib3.exceptions import HTTPError

from ..kueue.api_fields import count
from ..kueue.errors import KueueProviderError
from ..kueue.identity.identity_seal import IdentitySeal
from ..kueue.names import PRIORITY_CLASS_LABEL
from ..kueue.progress.forecast import RESOURCES, FlavorRoom, QueueRoom
from ..kueue.progress.queue_place import own_admission, place_of, waiting_ahead, waiting_in
from ..kueue.progress.workload_conditions import COND_QUOTA_RESERVED, conditions_by_type
from .workload_quota import ForecastInputsUnavailable as ForecastInputsUnavailable
from .workload_quota import forecast_run_of as forecast_run_of
from .workload_quota import held_quota as held_quota
from .workload_quota import kind_of, quantity, resources_of, waiting_quota
from .workload_quota import pod_request as pod_request


class ForecastReads(Protocol):
    """The ``KueueHook`` calls the forecast reads with."""

    def get_local_queue(self, namespace: str, name: str) -> dict[str, Any] | None: ...

    def list_cluster_queues(self) -> list[dict[str, Any]]: ...

    def pending_workloads(self, namespace: str, local_queue: str) -> dict[str, Any] | None: ...

    def get_workload_priority_class(self, name: str) -> dict[str, Any] | None: ...

    def workloads_page(self, namespace: str, limit: int) -> list[dict[str, Any]]: ...

    def workload_changes(
        self, namespace: str, job_uid: str, quiet_seconds: float, seconds: float
    ) -> Iterator[dict[str, Any] | None]: ...


HELD_READ_LIMIT = 200
"""Workloads of the namespace read for the quota they hold (one page): past it, the quota is "not seen"."""
QUEUED_WAIT_SECONDS = 10.0
"""How long the worker waits, after the create, for the Job's Workload to be in Kueue's queue: the forecast
is then made again from its place there. Past it, the first one stands."""
QUEUED_SETTLE_SECONDS = 1.0
"""How long a Workload Kueue has not tried yet is read before it counts as queued: Kueue queues it as it
makes it, and Jobs created in the same second have theirs by then."""


def read_priority(hook: ForecastReads, manifest: Mapping[str, Any]) -> int:
    """The priority Kueue will give the Job's Workload: its ``kueue.x-k8s.io/priority-class`` label's
    WorkloadPriorityClass ``value`` (one cluster-scoped GET), 0 with no label and no pod PriorityClass.
    Raises ``ForecastInputsUnavailable`` when it cannot be known: the class unreadable (no read access:
    deploy/rbac/worker-forecast.yaml grants it) or missing, or only a pod ``priorityClassName`` (a Kubernetes
    PriorityClass, which the forecast does not read)."""
    name = str(((manifest.get("metadata") or {}).get("labels") or {}).get(PRIORITY_CLASS_LABEL) or "")
    if not name:
        pod = ((manifest.get("spec") or {}).get("template") or {}).get("spec") or {}
        if pod.get("priorityClassName"):
            raise ForecastInputsUnavailable(f"the pods' PriorityClass {pod['priorityClassName']} is not read")
        return 0
    what = f"WorkloadPriorityClass {name}"
    try:
        found = hook.get_workload_priority_class(name)
    except ApiException as exc:
        raise ForecastInputsUnavailable(f"{what}: {exc.status} {exc.reason}") from None
    except (HTTPError, OSError) as exc:  # the API server unreachable after the hook's retries
        raise ForecastInputsUnavailable(f"{what}: {type(exc).__name__}: {exc}") from None
    if found is None:
        raise ForecastInputsUnavailable(f"{what} not found")
    value = found.get("value")
    if not isinstance(value, int) or isinstance(value, bool):
        raise ForecastInputsUnavailable(f"{what}: value {value!r} is not a whole number")
    return value


def queued_workload(
    hook: ForecastReads,
    namespace: str,
    job_uid: str,
    wait_seconds: float | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> dict[str, Any] | None:
    """The Job's Workload once it is in Kueue's queue: tried (it has a QuotaReserved condition, true or
    not), or unchanged for ``QUEUED_SETTLE_SECONDS`` since seen (Kueue tries only the head of a
    ClusterQueue: one behind others stays untried, queued all the same). Followed on one WATCH
    (``workload_changes``) for at most ``wait_seconds`` (``QUEUED_WAIT_SECONDS``): the last one seen by
    then, None when none was made or it could not be read."""
    limit = QUEUED_WAIT_SECONDS if wait_seconds is None else wait_seconds
    seen: dict[str, Any] | None = None
    seen_at = 0.0
    try:
        for workload in hook.workload_changes(namespace, job_uid, QUEUED_SETTLE_SECONDS, limit):
            if workload is None:
                if seen is not None:
                    return seen  # quiet for the settle time since it was seen: queued
                continue
            conditions = conditions_by_type((workload.get("status") or {}).get("conditions"))
            if COND_QUOTA_RESERVED in conditions:
                return workload
            seen, seen_at = workload, seen_at if seen is not None else clock()
            if clock() - seen_at >= QUEUED_SETTLE_SECONDS:
                return workload
    except (ApiException, HTTPError, OSError, KueueProviderError):
        return None  # the first forecast stands: never the task
    return seen


def read_queue_room(
    hook: ForecastReads,
    namespace: str,
    local_queue: str,
    priority: int | None = None,
    now: datetime | None = None,
    seal: IdentitySeal | None = None,
    own: Mapping[str, Any] | None = None,
    *,
    queue: Mapping[str, Any] | None = None,
) -> QueueRoom:
    """The ClusterQueue behind ``namespace/local_queue``: its flavors' room, the workloads ahead of a new
    Workload of ``priority`` (None: unknown, every pending workload is ahead), what those of them waiting in
    the namespace ask for, and the quota the namespace's admitted Workloads hold (unreadable: none seen, the
    forecast's "not seen" rule covers it). ``queue``: the LocalQueue as the task already read it (else one
    GET); its ClusterQueue is all that is read of it.

    ``own``: the Job's Workload, queued (``queued_workload``): admitted, the room says so (Kueue's pending
    list is not read); else the workloads ahead are those before it in Kueue's order (its visibility
    position, else the page's)."""
    now = now or datetime.now(UTC)
    admitted = own_admission(own, now) if own is not None else None
    try:
        if queue is None:
            queue = hook.get_local_queue(namespace, local_queue)
        name = str(((queue or {}).get("spec") or {}).get("clusterQueue") or "")
        if not name:
            raise ForecastInputsUnavailable(f"LocalQueue {namespace}/{local_queue} names no ClusterQueue")
        everything = hook.list_cluster_queues()
        pending = None if admitted else hook.pending_workloads(namespace, local_queue)
    except ApiException as exc:
        raise ForecastInputsUnavailable(f"reading the queues: {exc.status} {exc.reason}") from None
    except (HTTPError, OSError) as exc:  # the API server unreachable after the hook's retries
        raise ForecastInputsUnavailable(f"reading the queues: {type(exc).__name__}: {exc}") from None
    mine = next((q for q in everything if (q.get("metadata") or {}).get("name") == name), None)
    if mine is None:
        raise ForecastInputsUnavailable(f"ClusterQueue {name} is not among those listed")
    try:
        page = hook.workloads_page(namespace, HELD_READ_LIMIT)
    except (ApiException, HTTPError, OSError):
        page = []
    held = held_quota(page, name, now, seal)
    rooms = flavor_rooms(mine, everything)
    waiting = tuple(waiting_quota(w, seal) for w in waiting_ahead(page, local_queue, priority, own))
    if admitted:
        return QueueRoom(rooms, 0, held, admitted)
    if own is not None:
        return QueueRoom(rooms, place_of(own, pending, page, priority), held, waiting=waiting)
    ahead = max(workloads_ahead(mine, pending, priority), pending_in_page(page, local_queue, priority))
    return QueueRoom(rooms, ahead, held, waiting=waiting)


def pending_in_page(workloads: Iterable[Mapping[str, Any]], local_queue: str, priority: int | None) -> int:
    """This LocalQueue's Workloads of the page that wait for quota at ``priority`` or above (None: all):
    ahead of a new one. Fresher than the visibility list when Jobs were created in the same second (a
    mapped task's instances start together): a Workload is in the page as soon as Kueue made it."""
    return sum(
        1
        for workload in workloads
        if waiting_in(workload, local_queue)
        and (priority is None or count((workload.get("spec") or {}).get("priority")) >= priority)
    )


def flavor_rooms(queue: Mapping[str, Any], everything: Iterable[Mapping[str, Any]]) -> tuple[FlavorRoom, ...]:
    """The flavors of the resource group that covers CPU (else the first), in order: nominal quota, what the
    cohort can lend (at most the borrowing limit, at most what the others have free within their lending
    limits), what is reserved now."""
    groups = (queue.get("spec") or {}).get("resourceGroups") or []
    group = next(
        (g for g in groups if "cpu" in (g.get("coveredResources") or [])), groups[0] if groups else {}
    )
    covered = frozenset(r for r in (kind_of(n) for n in group.get("coveredResources") or []) if r)
    used = _usage(queue)
    cohort = _cohort(queue)
    others = [q for q in everything if cohort and _cohort(q) == cohort and q is not queue]
    rooms = []
    for flavor in group.get("flavors") or []:
        name = str(flavor.get("name"))
        nominal, limit = {}, {}
        for res in flavor.get("resources") or []:
            if kind := kind_of(str(res.get("name"))):
                nominal[kind] = quantity(res.get("nominalQuota"))
                if res.get("borrowingLimit") is not None:
                    limit[kind] = quantity(res.get("borrowingLimit"))
        free = _lendable(others, name) if cohort else {}
        lend = {k: min(free.get(k, 0.0), limit.get(k, float("inf"))) for k in RESOURCES}
        rooms.append(
            FlavorRoom(
                name, resources_of(nominal), resources_of(lend), resources_of(used.get(name, {})), covered
            )
        )
    return tuple(rooms)


def workloads_ahead(
    queue: Mapping[str, Any], pending: Mapping[str, Any] | None, priority: int | None = None
) -> int:
    """The pending Workloads of the ClusterQueue a new one of ``priority`` queues behind. Kueue orders them
    by priority, then creation: every one pending now at ``priority`` or above is ahead.

    ``priority`` None (unknown): all of them, the ClusterQueue's pending count (its status), at least as
    many as the visibility API places before the last of this LocalQueue's. Known: of this LocalQueue's
    Workloads (the visibility list, with their priorities) those at ``priority`` or above; the others
    pending in the ClusterQueue (the status count less the list: other LocalQueues', whose priority a
    namespaced reader cannot see, or this one's past the list's limit) all count. Two bounds from the
    ClusterQueue positions the list gives: everything before one of this LocalQueue's at ``priority`` or
    above is ahead too; nothing after one below ``priority`` is (the order puts there only what would come
    after the new one too: lower, or with usage-based admission fair sharing of a LocalQueue that used more),
    which also keeps a truncated list's unlisted tail and a stale status count out."""
    in_queue = int((queue.get("status") or {}).get("pendingWorkloads") or 0)
    items = [i for i in (pending or {}).get("items") or [] if isinstance(i, Mapping)]
    placed = [(count(i.get("priority")), count(i.get("positionInClusterQueue"))) for i in items]
    if priority is None:
        return max([in_queue, *(p + 1 for _, p in placed)])
    ahead = max(
        [
            sum(1 for q, _ in placed if q >= priority) + max(0, in_queue - len(items)),
            *(p + 1 for q, p in placed if q >= priority),
        ]
    )
    below = [p for q, p in placed if q < priority]
    return min([ahead, *below])


def _cohort(queue: Mapping[str, Any]) -> str:
    spec = queue.get("spec") or {}
    return str(spec.get("cohortName") or spec.get("cohort") or "")  # v1beta2 renamed it


def _usage(queue: Mapping[str, Any]) -> dict[str, dict[str, float]]:
    """flavor -> resource -> reserved now (``flavorsReservation``; older Kueue: ``flavorsUsage``)."""
    status = queue.get("status") or {}
    usage: dict[str, dict[str, float]] = {}
    for flavor in status.get("flavorsReservation") or status.get("flavorsUsage") or []:
        per = usage.setdefault(str(flavor.get("name")), {})
        for res in flavor.get("resources") or []:
            if kind := kind_of(str(res.get("name"))):
                per[kind] = per.get(kind, 0.0) + quantity(res.get("total") or 0)
    return usage


def _lendable(others: Iterable[Mapping[str, Any]], flavor: str) -> dict[str, float]:
    """What the other ClusterQueues of the cohort have free in ``flavor``, within their lending limits."""
    free: dict[str, float] = {}
    for other in others:
        used = _usage(other).get(flavor, {})
        for group in (other.get("spec") or {}).get("resourceGroups") or []:
            for fl in group.get("flavors") or []:
                if fl.get("name") != flavor:
                    continue
                for res in fl.get("resources") or []:
                    if not (kind := kind_of(str(res.get("name")))):
                        continue
                    spare = max(0.0, quantity(res.get("nominalQuota")) - used.get(kind, 0.0))
                    if res.get("lendingLimit") is not None:
                        spare = min(spare, quantity(res.get("lendingLimit")))
                    free[kind] = free.get(kind, 0.0) + spare
    return free
