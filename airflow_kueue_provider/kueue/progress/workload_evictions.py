"""How often a Workload was evicted, and why: ``status.schedulingStats.evictions`` and the ``Preempted``
condition.

A preemption's own reason (``InCohortFairSharing`` ...) is not in the scheduling stats; the last one is known
from the ``Preempted`` condition, or from its message once the Workload is admitted again.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..api_fields import count, items, mapping
from .workload_conditions import REASON_PREEMPTED, is_true

# Kueue's preemption messages name the reason in words ("... due to Fair Sharing within the cohort; ..."), and
# keep them ("Previously: ...") once the Workload is admitted again and the condition's reason is gone.
_PREEMPTION_WORDS = (
    ("reclamation within the cohort while borrowing", "InCohortReclaimWhileBorrowing"),
    ("reclamation within the cohort", "InCohortReclamation"),
    ("Fair Sharing within the cohort", "InCohortFairSharing"),
    ("prioritization in the ClusterQueue", "InClusterQueue"),
)


def _stats_evictions(status: Mapping[str, Any]) -> list[Any]:
    return items(mapping(status.get("schedulingStats")).get("evictions"))


def eviction_count(status: Mapping[str, Any]) -> int:
    """Every eviction, for any reason (the sum of ``schedulingStats.evictions[].count``)."""
    return sum(count(mapping(e).get("count")) for e in _stats_evictions(status))


def last_preemption_reason(condition: Mapping[str, Any] | None) -> str | None:
    """The reason of the ``Preempted`` condition while true, else the one its message names, if any."""
    if condition is None:
        return None
    if is_true(condition) and condition.get("reason"):
        return str(condition["reason"])
    message = str(condition.get("message") or "")
    return next((reason for words, reason in _PREEMPTION_WORDS if f"due to {words};" in message), None)


def eviction_causes(status: Mapping[str, Any], last_preemption: str | None) -> tuple[tuple[str, int], ...]:
    """``reason/underlyingCause`` -> count. The last preemption's reason is named when it is the only one
    (``Preempted/InCohortFairSharing``) or as the last of several (``Preempted (last ...)``)."""
    causes: dict[str, int] = {}
    for eviction in _stats_evictions(status):
        entry = mapping(eviction)
        reason, cause = str(entry.get("reason") or "Evicted"), entry.get("underlyingCause")
        key = f"{reason}/{cause}" if cause else reason
        causes[key] = causes.get(key, 0) + count(entry.get("count"))
    preempted = causes.pop(REASON_PREEMPTED, 0)
    if preempted and last_preemption:
        key = f"Preempted/{last_preemption}" if preempted == 1 else f"Preempted (last {last_preemption})"
        causes[key] = causes.get(key, 0) + preempted
    elif preempted:
        causes[REASON_PREEMPTED] = preempted
    return tuple(sorted((k, n) for k, n in causes.items() if n))
