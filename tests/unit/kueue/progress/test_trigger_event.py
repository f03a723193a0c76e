"""The event between trigger and operator: one type, and the dicts of earlier versions still read."""

from __future__ import annotations

from airflow_kueue_provider.kueue.progress.trigger_event import (
    EVENT_SCHEMA_VERSION,
    DeadlineReport,
    KueueEvent,
)

# What a Job trigger of the previous version sent (no "schema" key): a deadline hand-back ...
PREVIOUS_JOB_RISK = {
    "status": "deadline_risk",
    "message": "ns/j: deadline 07:00 UTC: AT RISK",
    "job_name": "j",
    "namespace": "ns",
    "job_uid": "u-1",
    "completions": 4,
    "completed_indexes": "0-1",
    "quota_released_pod_seconds": 3.0,
    "deadline": "2026-12-02T07:00:00+00:00",
    "eta_history": [{"eta": "2026-12-02T07:20:00+00:00"}],
    "escalations": [],
    "deadline_margin_seconds": 300.0,
}
# ... and a JobSet's failure.
PREVIOUS_JOBSET_FAILURE = {
    "status": "failed",
    "message": "JobSet ns/js failed",
    "jobset_name": "js",
    "namespace": "ns",
    "jobset_uid": "u-2",
    "replicated_jobs": [{"name": "workers", "failed_indexes": "js-workers-0: 3"}],
    "failed_jobs": {"js-workers-0": "3"},
}


def test_an_event_of_the_previous_version_reads_as_the_type() -> None:
    risk = KueueEvent.from_dict(PREVIOUS_JOB_RISK)
    assert (risk.kind, risk.name, risk.uid, risk.status) == ("Job", "j", "u-1", "deadline_risk")
    assert risk.deadline == DeadlineReport(
        "2026-12-02T07:00:00+00:00", ({"eta": "2026-12-02T07:20:00+00:00"},), (), 300.0, False
    )
    assert risk.result["quota_released_pod_seconds"] == 3.0 and "job_name" not in risk.result
    failure = KueueEvent.from_dict(PREVIOUS_JOBSET_FAILURE)
    assert (failure.kind, failure.name, failure.uid) == ("JobSet", "js", "u-2")
    assert failure.failed_jobs == {"js-workers-0": "3"} and failure.deadline is None


def test_the_dict_round_trips_and_keeps_the_previous_keys() -> None:
    for previous in (PREVIOUS_JOB_RISK, PREVIOUS_JOBSET_FAILURE):
        event = KueueEvent.from_dict(previous)
        written = event.to_dict()
        assert written == {**previous, "schema": EVENT_SCHEMA_VERSION}
        assert KueueEvent.from_dict(written) == event


def test_the_result_keys_leave_out_the_envelope() -> None:
    keys = KueueEvent.from_dict(PREVIOUS_JOBSET_FAILURE).result_keys()
    assert keys["jobset_name"] == "js" and keys["jobset_uid"] == "u-2"
    assert not {"status", "message", "failed_jobs", "schema"} & set(keys)
    risk = KueueEvent.from_dict(PREVIOUS_JOB_RISK).result_keys()
    assert risk["deadline"] == PREVIOUS_JOB_RISK["deadline"] and "deadline_margin_seconds" not in risk
