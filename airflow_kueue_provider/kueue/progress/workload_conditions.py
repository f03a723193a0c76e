"""The conditions of a Kueue Workload, looked up by type.

Kueue updates them in place and their order in ``status.conditions`` means nothing, so they are always looked
up by type, never by position (reading ``conditions[-1]`` is a known Kueue pitfall).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..api_fields import items, mapping

# Condition types and reasons, as in apis/kueue/v1beta2/workload_types.go.
COND_QUOTA_RESERVED = "QuotaReserved"
COND_ADMITTED = "Admitted"
COND_EVICTED = "Evicted"
COND_PREEMPTED = "Preempted"
COND_REQUEUED = "Requeued"
COND_PODS_READY = "PodsReady"
COND_FINISHED = "Finished"

REASON_INADMISSIBLE = "Inadmissible"
REASON_PREEMPTED = "Preempted"
REASON_SUCCEEDED = "Succeeded"

Conditions = Mapping[str, Mapping[str, Any]]


def conditions_by_type(raw: object) -> dict[str, Mapping[str, Any]]:
    """Conditions keyed by type. ``conditions`` is a list-map keyed by type, so each type appears once."""
    by_type: dict[str, Mapping[str, Any]] = {}
    for item in items(raw):
        condition = mapping(item)
        condition_type = condition.get("type")
        if isinstance(condition_type, str):
            by_type[condition_type] = condition
    return by_type


def true_condition(conditions: Conditions, condition_type: str) -> Mapping[str, Any] | None:
    """The condition of ``condition_type`` when it is there and true, else None."""
    condition = conditions.get(condition_type)
    return condition if condition is not None and is_true(condition) else None


def is_true(condition: Mapping[str, Any]) -> bool:
    return condition.get("status") == "True"
