"""What the Workloads of the task's namespace hold and ask for, as the forecast counts them (read from one
page of Workloads, ``forecast_inputs``): the quota an admitted one holds (less the pods Kueue reclaimed),
what a waiting one asks for, and the run a sealed forecast gave its Job; Kubernetes quantities as
``Resources``."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from ..kueue.api_fields import count
from ..kueue.api_time import parse_api_time
from ..kueue.errors import KueueProviderError
from ..kueue.identity.identity_seal import IdentitySeal
from ..kueue.kinds import child_kind
from ..kueue.names import FORECAST_RUN_ANNOTATION
from ..kueue.progress.forecast import RESOURCES, HeldQuota, Resources, WaitingQuota
from ..kueue.progress.workload_conditions import (
    COND_FINISHED,
    COND_QUOTA_RESERVED,
    conditions_by_type,
    true_condition,
)
from ..kueue.quantity import parse_quantity


class ForecastInputsUnavailable(KueueProviderError):
    """The queue could not be read for a forecast; the message says which read and why."""


def held_quota(
    workloads: Iterable[Mapping[str, Any]],
    cluster_queue: str,
    now: datetime,
    seal: IdentitySeal | None = None,
) -> tuple[HeldQuota, ...]:
    """What each Workload admitted to ``cluster_queue`` and not finished holds, per flavor (its admission's
    ``resourceUsage``, less its pods Kueue counts as reclaimable), for how long (since its QuotaReserved
    condition) and, for a Job of this provider whose forecast is sealed under ``seal``'s key, how long it
    runs (``forecast_run_of``)."""
    held = []
    for workload in workloads:
        status = workload.get("status") or {}
        admission = status.get("admission") or {}
        if admission.get("clusterQueue") != cluster_queue:
            continue
        conditions = conditions_by_type(status.get("conditions"))
        reserved = true_condition(conditions, COND_QUOTA_RESERVED)
        if reserved is None or true_condition(conditions, COND_FINISHED):
            continue
        since = parse_api_time(reserved.get("lastTransitionTime"))
        if since is None:
            continue
        try:
            usage = _assigned(admission, _left_after_reclaim(workload))
        except ForecastInputsUnavailable:
            continue  # a quantity this reader cannot parse: the quota counts as not seen
        seconds = max(0.0, (now - since).total_seconds())
        runs = forecast_run_of(workload, seal)
        held += [HeldQuota(flavor, resources_of(amounts), seconds, runs) for flavor, amounts in usage.items()]
    return tuple(held)


def forecast_run_of(workload: Mapping[str, Any], seal: IdentitySeal | None) -> float | None:
    """The run its Job's forecast said, from the Workload's pod template (Kueue copies the Job's), if sealed
    for the Job that owns the Workload; None otherwise (no key, no forecast, or not this provider's seal)."""
    if seal is None:
        return None
    metadata, job = workload.get("metadata") or {}, child_kind().kind  # the kind whose forecast is written
    owner = next(
        (r for r in metadata.get("ownerReferences") or [] if r.get("controller") and r.get("kind") == job),
        None,
    )
    pod_sets = (workload.get("spec") or {}).get("podSets") or []
    if owner is None or not pod_sets:
        return None
    annotations = ((pod_sets[0].get("template") or {}).get("metadata") or {}).get("annotations") or {}
    value = annotations.get(FORECAST_RUN_ANNOTATION)
    seconds = seal.read_forecast_run(str(metadata.get("namespace")), str(owner.get("name")), value)
    return float(seconds) if seconds is not None else None


def _assigned(
    admission: Mapping[str, Any], left: Mapping[str, float] | None = None
) -> dict[str, dict[str, float]]:
    """flavor -> resource -> amount an admission holds (its pod sets' ``resourceUsage``, each times its
    share ``left`` after reclaim: 1 when not given)."""
    usage: dict[str, dict[str, float]] = {}
    for pod_set in admission.get("podSetAssignments") or []:
        flavors, share = pod_set.get("flavors") or {}, (left or {}).get(str(pod_set.get("name")), 1.0)
        for name, amount in (pod_set.get("resourceUsage") or {}).items():
            kind, flavor = kind_of(str(name)), flavors.get(name)
            if kind and flavor:
                per = usage.setdefault(str(flavor), {})
                per[kind] = per.get(kind, 0.0) + quantity(amount) * share
    return usage


def _left_after_reclaim(workload: Mapping[str, Any]) -> dict[str, float]:
    """pod set -> the share of its admitted quota still held: Kueue counts a pod set's reclaimable pods (its
    Job's finished indexes) as freed and admits others into them while the Workload stays admitted, so its
    usage is its admission's scaled to the pods left (as Kueue's ``totalRequestsFromAdmission`` does).
    Pod sets without reclaimable pods are left out (all held)."""
    status = workload.get("status") or {}
    reclaimable = {
        str(r.get("name")): count(r.get("count"))
        for r in status.get("reclaimablePods") or []
        if isinstance(r, Mapping)
    }
    if not reclaimable:
        return {}
    counts = {
        str(p.get("name")): count(p.get("count"))
        for p in (workload.get("spec") or {}).get("podSets") or []
        if isinstance(p, Mapping)
    }
    left: dict[str, float] = {}
    for assignment in (status.get("admission") or {}).get("podSetAssignments") or []:
        name = str(assignment.get("name"))
        total = counts.get(name, 0)
        admitted = count(assignment.get("count")) or total
        after = total - min(reclaimable.get(name, 0), total)
        if admitted > 0 and after < admitted:
            left[name] = after / admitted
    return left


def pod_request(pod_spec: Mapping[str, Any]) -> Resources:
    """One pod's requests as Kueue counts them (the containers' requests, else their limits), one pod."""
    total = dict.fromkeys(RESOURCES, 0.0)
    for container in pod_spec.get("containers") or []:
        resources = container.get("resources") or {}
        asked = {**(resources.get("limits") or {}), **(resources.get("requests") or {})}
        for name, value in asked.items():
            if kind := kind_of(str(name)):
                total[kind] += quantity(value)
    total["pods"] = 1.0
    return resources_of(total)


def kind_of(name: str) -> str | None:
    """The forecast's name for a Kubernetes resource (GPUs of any vendor are ``gpu``); None: not counted."""
    if name in ("cpu", "memory", "pods"):
        return name
    return "gpu" if name.endswith("/gpu") else None


def quantity(value: object) -> float:
    try:
        return float(parse_quantity(value))
    except ValueError:
        raise ForecastInputsUnavailable(f"{value!r} is not a quantity") from None


def resources_of(amounts: Mapping[str, float]) -> Resources:
    return Resources(*(float(amounts.get(r, 0.0)) for r in RESOURCES))


def waiting_quota(workload: Mapping[str, Any], seal: IdentitySeal | None = None) -> WaitingQuota:
    """What a waiting Workload asks for (each pod set's pods times its template's requests, as Kueue counts
    them) and the run its sealed forecast gave (``forecast_run_of``). One with a quantity this reader cannot
    parse asks for what is not known: the forecast takes it as a Job like its own."""
    total = dict.fromkeys(RESOURCES, 0.0)
    for pod_set in (workload.get("spec") or {}).get("podSets") or []:
        if not isinstance(pod_set, Mapping):
            continue
        try:
            one = pod_request((pod_set.get("template") or {}).get("spec") or {})
        except ForecastInputsUnavailable:
            return WaitingQuota(None, forecast_run_of(workload, seal))
        pods = count(pod_set.get("count"))
        for name in RESOURCES:
            total[name] += one.amount(name) * pods
    return WaitingQuota(resources_of(total), forecast_run_of(workload, seal))
