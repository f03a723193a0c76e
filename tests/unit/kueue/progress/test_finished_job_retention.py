"""Which finished Jobs the sweep may delete."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from airflow_kueue_provider.kueue.progress.finished_job_retention import (
    FinishedJob,
    finished_job,
    stale_finished_jobs,
)

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def job(
    name: str, *conditions: tuple[str, str, str], completion_time: str | None = None, **meta: Any
) -> dict:
    status: dict[str, Any] = {
        "conditions": [{"type": t, "status": s, "lastTransitionTime": at} for t, s, at in conditions]
    }
    if completion_time:
        status["completionTime"] = completion_time
    return {"metadata": {"namespace": "ns", "name": name, **meta}, "status": status}


def test_complete_uses_completion_time_and_failed_its_condition_time() -> None:
    complete = job("a", ("Complete", "True", "2026-11-30T10:00:05Z"), completion_time="2026-11-30T10:00:00Z")
    failed = job(
        "b", ("FailureTarget", "True", "2026-11-30T09:00:00Z"), ("Failed", "True", "2026-11-30T09:00:01Z")
    )
    assert finished_job(complete) == FinishedJob(
        "ns", "a", "Complete", datetime(2026, 11, 30, 10, tzinfo=UTC)
    )
    assert finished_job(failed) == FinishedJob(
        "ns", "b", "Failed", datetime(2026, 11, 30, 9, 0, 1, tzinfo=UTC)
    )


def test_unfinished_deleting_and_malformed_jobs_are_not_finished() -> None:
    assert finished_job(job("queued", ("Suspended", "True", "2026-01-01T00:00:00Z"))) is None
    assert finished_job(job("running")) is None
    assert finished_job({"metadata": {"name": "bare"}}) is None
    assert finished_job(job("was", ("Complete", "False", "2026-01-01T00:00:00Z"))) is None
    assert finished_job(job("bad-time", ("Failed", "True", "yesterday"))) is None
    deleting = job(
        "x", ("Complete", "True", "2026-01-01T00:00:00Z"), deletionTimestamp="2026-11-30T11:00:00Z"
    )
    assert finished_job(deleting) is None


def test_stale_means_finished_longer_ago_than_the_retention_oldest_first() -> None:
    jobs = [
        job("hour", ("Complete", "True", "2026-11-30T11:00:00Z")),
        job("week", ("Failed", "True", "2026-11-23T12:00:00Z")),
        job("day-and-a-bit", ("Complete", "True", "2026-11-29T11:00:00Z")),
        job("old-but-running", ("Suspended", "False", "2025-01-01T00:00:00Z")),
    ]
    assert [j.name for j in stale_finished_jobs(jobs, NOW, timedelta(days=1))] == ["week", "day-and-a-bit"]
    assert [j.name for j in stale_finished_jobs(jobs, NOW, timedelta(0))] == ["week", "day-and-a-bit", "hour"]
    assert stale_finished_jobs(jobs, NOW, timedelta(days=30)) == []
    assert str(stale_finished_jobs(jobs, NOW, timedelta(days=1))[0]) == "ns/week"


def test_a_jobsets_finished_job_is_left_to_its_jobset() -> None:
    """A JobSet that still runs would create its finished coordinator again (and run it twice)."""
    labels = {
        "jobset.sigs.k8s.io/jobset-name": "genomics",
        "jobset.sigs.k8s.io/replicatedjob-name": "coordinator",
    }
    coordinator = job("genomics-coordinator-0", ("Complete", "True", "2026-01-01T00:00:00Z"), labels=labels)
    assert finished_job(coordinator) is None
