"""Where the Job's own Workload stands once Kueue has tried it (pure): admitted (in which flavor, since
when), or how many workloads Kueue orders before it. The forecast at submit is made again from here
(``operators.forecast_step``): Jobs created in the same second as this one exist by then."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from ..api_fields import count
from ..api_time import parse_api_time
from .forecast import OwnAdmission
from .workload_admission import flavors
from .workload_conditions import COND_FINISHED, COND_QUOTA_RESERVED, conditions_by_type, true_condition


def own_admission(own: Mapping[str, Any], now: datetime) -> OwnAdmission | None:
    """The Job's own Workload's admission (the flavor of its CPU, else of its first resource, and how long
    ago), None while it waits."""
    status = own.get("status") or {}
    reserved = true_condition(conditions_by_type(status.get("conditions")), COND_QUOTA_RESERVED)
    since = parse_api_time((reserved or {}).get("lastTransitionTime"))
    if reserved is None or since is None:
        return None
    given = flavors(status)
    flavor = given.get("cpu") or next(iter(given.values()), "")
    return OwnAdmission(flavor, max(0.0, (now - since).total_seconds()))


def waiting_in(workload: Mapping[str, Any], local_queue: str) -> bool:
    """Whether the Workload waits for quota in ``local_queue``: neither holding quota nor finished."""
    if (workload.get("spec") or {}).get("queueName") != local_queue:
        return False
    conditions = conditions_by_type((workload.get("status") or {}).get("conditions"))
    return not (true_condition(conditions, COND_QUOTA_RESERVED) or true_condition(conditions, COND_FINISHED))


def place_of(
    own: Mapping[str, Any],
    pending: Mapping[str, Any] | None,
    page: Iterable[Mapping[str, Any]],
    priority: int | None,
) -> int:
    """The workloads ahead of the Job's own pending Workload: its position in the ClusterQueue (the
    visibility API), else those of the page that Kueue orders before it (higher priority, or the same and
    created earlier; ``priority`` None: its own). Kueue leaves the order of equal timestamps (whole seconds)
    open; the page's count breaks such ties by name, a guess."""
    meta = own.get("metadata") or {}
    for item in (pending or {}).get("items") or []:
        if isinstance(item, Mapping) and (item.get("metadata") or {}).get("name") == meta.get("name"):
            return count(item.get("positionInClusterQueue"))
    mine = priority if priority is not None else count((own.get("spec") or {}).get("priority"))
    key = (str(meta.get("creationTimestamp") or ""), str(meta.get("name") or ""))
    queue, ahead = str((own.get("spec") or {}).get("queueName") or ""), 0
    for workload in page:
        other = workload.get("metadata") or {}
        if other.get("uid") == meta.get("uid") or not waiting_in(workload, queue):
            continue
        theirs = count((workload.get("spec") or {}).get("priority"))
        before = (str(other.get("creationTimestamp") or ""), str(other.get("name") or "")) < key
        ahead += theirs > mine or (theirs == mine and before)
    return ahead


def waiting_ahead(
    page: Iterable[Mapping[str, Any]],
    local_queue: str,
    priority: int | None,
    own: Mapping[str, Any] | None = None,
) -> list[Mapping[str, Any]]:
    """This LocalQueue's Workloads of the page that wait ahead, in Kueue's order (higher priority, then the
    earlier created; equal timestamps by name, as ``place_of`` guesses): of a new Workload of ``priority``,
    every one at ``priority`` or above (None: every one waiting); of ``own``, those ordered before it."""
    waiting = [w for w in page if waiting_in(w, local_queue)]
    if own is not None:
        meta = own.get("metadata") or {}
        mine = priority if priority is not None else count((own.get("spec") or {}).get("priority"))
        key = (-mine, str(meta.get("creationTimestamp") or ""), str(meta.get("name") or ""))
        waiting = [
            w for w in waiting if (w.get("metadata") or {}).get("uid") != meta.get("uid") and _order(w) < key
        ]
    elif priority is not None:
        waiting = [w for w in waiting if count((w.get("spec") or {}).get("priority")) >= priority]
    return sorted(waiting, key=_order)


def _order(workload: Mapping[str, Any]) -> tuple[int, str, str]:
    meta = workload.get("metadata") or {}
    created, name = str(meta.get("creationTimestamp") or ""), str(meta.get("name") or "")
    return (-count((workload.get("spec") or {}).get("priority")), created, name)
