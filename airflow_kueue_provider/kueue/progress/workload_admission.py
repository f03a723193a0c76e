"""What a Workload asks for and what its admission holds: pods, flavors, CPU, and the checks it waits for.

Read from ``spec.podSets`` and ``status.admission.podSetAssignments`` (a Job has one pod set, a JobSet one per
replicated job), summed or merged over the pod sets.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..api_fields import count, items, mapping, text
from ..quantity import parse_quantity


def _assignments(status: Mapping[str, Any]) -> list[Any]:
    return items(mapping(status.get("admission")).get("podSetAssignments"))


def pods_requested(spec: Mapping[str, Any]) -> int:
    """Pods the Workload asks for (``spec.podSets[].count``: the Job's parallelism)."""
    return sum(count(mapping(p).get("count")) for p in items(spec.get("podSets")))


def min_pods(spec: Mapping[str, Any]) -> int | None:
    """``spec.podSets[0].minCount`` (partial admission); None when every pod must fit at once."""
    pod_sets = items(spec.get("podSets"))
    found = mapping(pod_sets[0]).get("minCount") if pod_sets else None
    return count(found) if found is not None else None


def admitted_pods(status: Mapping[str, Any]) -> int | None:
    """Pods the admission holds quota for; None without an admission or with a count that is no int."""
    assignments = _assignments(status)
    total = 0
    for assignment in assignments:
        pods = mapping(assignment).get("count")
        if not isinstance(pods, int):
            return None
        total += pods
    return total if assignments else None


def flavors(status: Mapping[str, Any]) -> dict[str, str]:
    """Resource name -> ResourceFlavor, merged over all pod sets of the admission."""
    merged: dict[str, str] = {}
    for assignment in _assignments(status):
        for resource, flavor in mapping(mapping(assignment).get("flavors")).items():
            merged[str(resource)] = str(flavor)
    return merged


def cpu_per_pod(status: Mapping[str, Any]) -> float | None:
    """CPU cores the admission counts per pod (``resourceUsage.cpu`` over its pods); None without an
    admission, without CPU in it, or with a quantity that does not parse."""
    cpu, pods = 0.0, 0
    for assignment in _assignments(status):
        assignment = mapping(assignment)
        usage = mapping(assignment.get("resourceUsage")).get("cpu")
        assigned = assignment.get("count")
        if usage is None or not isinstance(assigned, int) or assigned <= 0:
            continue
        try:
            cpu += float(parse_quantity(usage))
        except ValueError:
            return None
        pods += assigned
    return cpu / pods if pods else None


def reclaimable_pods(status: Mapping[str, Any]) -> int:
    """Pods of the admission Kueue no longer counts (``status.reclaimablePods``)."""
    return sum(count(mapping(p).get("count")) for p in items(status.get("reclaimablePods")))


def pending_checks(status: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    """AdmissionChecks not ``Ready`` yet, as (name, state[: message])."""
    pending = []
    for check in items(status.get("admissionChecks")):
        check = mapping(check)
        state = str(check.get("state") or "Pending")
        if state != "Ready":
            message = text(check, "message")
            pending.append((str(check.get("name") or "?"), f"{state}: {message}" if message else state))
    return tuple(pending)
