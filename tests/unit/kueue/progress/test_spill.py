"""When a waiting run may be spilled to another LocalQueue, and what the spill Job is."""

from __future__ import annotations

from typing import Any

from airflow_kueue_provider.kueue.index_set import IndexSet
from airflow_kueue_provider.kueue.names import QUEUE_NAME_LABEL
from airflow_kueue_provider.kueue.progress.spill import (
    not_spillable_because,
    spill_manifest,
    spill_taken,
    spilled_detail,
)


def _job(suspend: bool = True, **status: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "j", "namespace": "ns", "labels": {QUEUE_NAME_LABEL: "spot"}},
        "spec": {"suspend": suspend, "completions": 10},
        "status": status,
    }


def _pod(phase: str) -> dict[str, Any]:
    return {"status": {"phase": phase}}


def test_only_a_job_without_quota_and_without_pods_can_be_spilled() -> None:
    assert not_spillable_because(_job(), []) is None
    assert not_spillable_because(_job(completedIndexes="0-3"), [_pod("Succeeded"), _pod("Failed")]) is None
    assert "holds quota and runs" in str(not_spillable_because(_job(suspend=False, active=4), []))
    # Evicted: suspended again, but its pods are still stopping (one of them may still finish).
    assert "2 pod(s)" in str(not_spillable_because(_job(terminating=2), []))
    assert "1 pod(s)" in str(not_spillable_because(_job(), [_pod("Running")]))
    uncounted = _job(uncountedTerminatedPods={"succeeded": ["u"]})
    assert "not counted" in str(not_spillable_because(uncounted, []))
    assert "finished" in str(not_spillable_because(_job(completedIndexes="0-9"), []))
    done = {**_job(), "status": {"conditions": [{"type": "Complete", "status": "True"}]}}
    assert "finished" in str(not_spillable_because(done, []))


def test_the_spill_job_is_the_first_renamed_and_queued_elsewhere_and_the_first_is_untouched() -> None:
    first = _job()
    second = spill_manifest(first, "j-spill", "on-demand")
    assert second["metadata"]["name"] == "j-spill"
    assert second["metadata"]["labels"][QUEUE_NAME_LABEL] == "on-demand"
    assert first["metadata"]["name"] == "j" and first["metadata"]["labels"][QUEUE_NAME_LABEL] == "spot"


def test_the_detail_is_short_and_says_what_moved_where() -> None:
    many = IndexSet.parse(",".join(str(i) for i in range(0, 400, 2)))
    detail = spilled_detail(many, "j-spill", "on-demand", "j")
    assert detail.startswith("moved 200 unfinished shard(s) (0,2,4") and ",...)" in detail
    assert "Job j-spill in LocalQueue on-demand; Job j deleted" in detail and len(detail) < 260
    assert spill_taken([{"step": "spill_to", "detail": detail}])
    assert not spill_taken([{"step": "spill_to", "detail": "waiting: the Job holds quota"}])
    assert not spill_taken([{"step": "notify", "detail": "sent"}])
