"""The trigger keeps when Kueue admitted its object, as last seen: an inline wait reads it at its limit
(``operators/waiting.py``) to tell a Job about to end from one that has just started."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from airflow_kueue_provider.kueue.job_progress import view_of
from airflow_kueue_provider.triggers.kueue_job import KueueJobTrigger

JOB: dict[str, Any] = {"metadata": {"name": "j", "namespace": "ns"}, "spec": {"completions": 2}, "status": {}}
ADMITTED_AT = "2026-12-07T01:02:03Z"
CONDITIONS = [
    {"type": t, "status": "True", "reason": t, "lastTransitionTime": ADMITTED_AT}
    for t in ("QuotaReserved", "Admitted")
]
ADMITTED: dict[str, Any] = {"metadata": {"name": "wl"}, "status": {"conditions": CONDITIONS}}
QUEUED: dict[str, Any] = {"metadata": {"name": "wl"}, "status": {"conditions": []}}


def test_admitted_at_follows_the_workload_and_is_none_while_queued() -> None:
    trigger = KueueJobTrigger(job_name="j", namespace="ns", queue_name="lq")
    assert trigger.admitted_at is None
    trigger._observe(view_of(JOB, QUEUED), None)
    assert trigger.admitted_at is None
    trigger._observe(view_of(JOB, ADMITTED), None)
    assert trigger.admitted_at == datetime(2026, 12, 7, 1, 2, 3, tzinfo=UTC)
    trigger._observe(view_of(JOB, QUEUED), None)  # evicted and requeued: queued again
    assert trigger.admitted_at is None
