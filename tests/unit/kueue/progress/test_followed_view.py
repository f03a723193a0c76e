"""The rules every kind's view shares: admitted now, and ever admitted (what ``queue_timeout`` reads)."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_kueue_provider.kueue.job_progress import view_of
from airflow_kueue_provider.kueue.jobset import jobset_view
from airflow_kueue_provider.kueue.progress.followed_view import FollowedView

QUEUED: dict[str, Any] = {"metadata": {"name": "wl"}, "status": {"conditions": []}}
REQUEUED: dict[str, Any] = {
    "metadata": {"name": "wl"},
    "status": {
        "conditions": [
            {
                "type": "Evicted",
                "status": "True",
                "reason": "Preempted",
                "lastTransitionTime": "2026-12-02T01:00:00Z",
            },
            {
                "type": "Requeued",
                "status": "True",
                "reason": "Preempted",
                "lastTransitionTime": "2026-12-02T01:00:00Z",
            },
        ],
        "requeueState": {"count": 1},
        "schedulingStats": {"evictions": [{"reason": "Preempted", "count": 1}]},
    },
}


def _job_view(workload: dict[str, Any] | None) -> FollowedView:
    job = {
        "metadata": {"name": "j", "namespace": "ns"},
        "spec": {"completions": 2, "suspend": True},
        "status": {},
    }
    return view_of(job, workload)


def _jobset_view(workload: dict[str, Any] | None) -> FollowedView:
    jobset = {
        "metadata": {"name": "js", "namespace": "ns"},
        "spec": {"suspend": True, "replicatedJobs": [{"name": "workers", "replicas": 1}]},
    }
    return jobset_view(jobset, [], workload)


@pytest.mark.parametrize("view", [_job_view, _jobset_view], ids=["job", "jobset"])
def test_a_requeue_after_an_eviction_is_not_never_admitted_for_either_kind(view: Any) -> None:
    assert not view(None).started
    assert not view(QUEUED).started and not view(QUEUED).admitted
    requeued = view(REQUEUED)
    assert requeued.started and not requeued.admitted
