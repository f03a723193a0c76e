"""How often a Workload was evicted and why, from its scheduling stats and its Preempted condition."""

from __future__ import annotations

from typing import Any

from airflow_kueue_provider.kueue.progress.workload_evictions import (
    eviction_causes,
    eviction_count,
    last_preemption_reason,
)


def _stats(*evictions: dict[str, Any]) -> dict[str, Any]:
    return {"schedulingStats": {"evictions": list(evictions)}}


def test_every_eviction_counts_whatever_its_reason() -> None:
    status = _stats({"reason": "Preempted", "count": 2}, {"reason": "PodsReadyTimeout", "count": 1}, {})
    assert eviction_count(status) == 3
    assert eviction_count({"schedulingStats": {"evictions": "garbage"}}) == 0


def test_the_last_preemption_reason_comes_from_the_condition_or_else_its_message() -> None:
    assert last_preemption_reason(None) is None
    assert last_preemption_reason({"status": "True", "reason": "InClusterQueue"}) == "InClusterQueue"
    kept = {
        "status": "False",
        "reason": "",
        "message": "Previously: Preempted to accommodate a workload due to reclamation within the cohort; x",
    }
    assert last_preemption_reason(kept) == "InCohortReclamation"
    assert last_preemption_reason({"status": "False", "message": "no words we know"}) is None


def test_a_single_preemption_is_named_by_its_reason_several_by_the_last() -> None:
    once = _stats(
        {"reason": "Preempted", "count": 1}, {"reason": "Evicted", "underlyingCause": "Deactivated"}
    )
    # a count-less entry counts nothing and is left out
    assert eviction_causes(once, "InCohortFairSharing") == (("Preempted/InCohortFairSharing", 1),)
    twice = _stats({"reason": "Preempted", "count": 2}, {"reason": "PodsReadyTimeout", "count": 1})
    assert eviction_causes(twice, "InClusterQueue") == (
        ("PodsReadyTimeout", 1),
        ("Preempted (last InClusterQueue)", 2),
    )
    assert eviction_causes(twice, None) == (("PodsReadyTimeout", 1), ("Preempted", 2))
