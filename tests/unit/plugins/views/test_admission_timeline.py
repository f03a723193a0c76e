"""A Job's way through Kueue, merged from events and conditions."""

from __future__ import annotations

from typing import Any

from airflow_kueue_provider.plugins.views.admission_timeline import admission_timeline

JOB: dict[str, Any] = {
    "metadata": {"namespace": "ns", "name": "shards", "creationTimestamp": "2026-11-30T10:00:00Z"},
    "status": {
        "conditions": [
            {"type": "Suspended", "status": "False", "lastTransitionTime": "2026-11-30T10:00:05Z"},
            {"type": "Complete", "status": "True", "lastTransitionTime": "2026-11-30T10:09:00Z"},
        ]
    },
}
WORKLOAD: dict[str, Any] = {
    "metadata": {"name": "job-shards-1", "creationTimestamp": "2026-11-30T10:00:01Z"},
    "spec": {"queueName": "lq"},
    "status": {
        "conditions": [
            {
                "type": "QuotaReserved",
                "status": "True",
                "reason": "QuotaReserved",
                "message": "Quota reserved in ClusterQueue cq",
                "lastTransitionTime": "2026-11-30T10:05:00Z",
            },
            {"type": "Evicted", "status": "False", "lastTransitionTime": "2026-11-30T10:05:00Z"},
            {
                "type": "Admitted",
                "status": "True",
                "reason": "Admitted",
                "message": "The workload is admitted",
                "lastTransitionTime": "2026-11-30T10:05:00Z",
            },
        ]
    },
}


def event(kind: str, reason: str, at: str, message: str = "", **extra: Any) -> dict[str, Any]:
    return {
        "involvedObject": {"kind": kind},
        "reason": reason,
        "message": message,
        "lastTimestamp": at,
        **extra,
    }


def test_conditions_alone_give_the_last_transitions_in_time_order() -> None:
    steps = admission_timeline(JOB, WORKLOAD)
    assert [(s.at.strftime("%H:%M:%S"), s.what, s.source) for s in steps] == [
        ("10:00:00", "submitted", "Job"),
        ("10:00:01", "queued", "Workload"),
        ("10:05:00", "quota reserved", "Workload"),
        ("10:05:00", "admitted", "Workload"),
        ("10:09:00", "complete", "Job"),
    ]
    assert steps[1].detail == "in LocalQueue lq"
    assert steps[2].detail == "QuotaReserved: Quota reserved in ClusterQueue cq"


def test_events_add_history_and_replace_the_conditions_they_repeat() -> None:
    events = [
        event("Workload", "QuotaReserved", "2026-11-30T10:01:00Z", "Quota reserved in ClusterQueue cq"),
        event(
            "Workload",
            "Preempted",
            "2026-11-30T10:03:00Z",
            "Preempted to accommodate a higher priority",
            type="Warning",
        ),
        event("Workload", "QuotaReserved", "2026-11-30T10:04:59Z", "Quota reserved in ClusterQueue cq"),
        event("Job", "SuccessfulCreate", "2026-11-30T10:05:02Z", "Created pod: shards-0", count=40),
        event("Job", "Completed", "2026-11-30T10:09:00Z", "Job completed"),
    ]
    steps = admission_timeline(JOB, WORKLOAD, events)
    assert [s.what for s in steps] == [
        "submitted",
        "queued",
        "quota reserved",
        "preempted",
        "quota reserved",  # the event within 2 s stands for the condition ...
        "admitted",
        "completed",  # ... as "Completed" does for the Job's Complete condition
    ]
    assert [s.what for s in steps if s.warning] == ["preempted"]
    assert "SuccessfulCreate" not in {s.what for s in steps}, "per-pod events stay out"


def test_a_job_without_workload_or_times() -> None:
    steps = admission_timeline({"metadata": {"name": "x"}}, None, [event("Job", "Suspended", "not a time")])
    assert steps == []
