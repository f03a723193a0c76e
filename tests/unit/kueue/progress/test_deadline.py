"""Reading ``deadline=`` and comparing it with the ETA."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from airflow_kueue_provider.kueue.progress.deadline import InvalidDeadline, at_risk, resolve_deadline
from airflow_kueue_provider.kueue.progress.eta import Estimate

START = datetime(2026, 12, 1, 23, 30, tzinfo=UTC)  # a nightly run that starts before midnight


def test_a_time_of_day_is_the_next_one_after_the_run_started() -> None:
    assert resolve_deadline("07:00", START) == datetime(2026, 12, 2, 7, 0, tzinfo=UTC)
    assert resolve_deadline("23:45", START) == datetime(2026, 12, 1, 23, 45, tzinfo=UTC)
    # New York is UTC-5 in December: 07:00 there is 12:00 UTC, on the run's local date (18:30 there) + 1.
    assert resolve_deadline("07:00 America/New_York", START) == datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
    assert resolve_deadline(" 06:59:30 UTC ", START) == datetime(2026, 12, 2, 6, 59, 30, tzinfo=UTC)


def test_datetimes_and_durations() -> None:
    assert resolve_deadline(timedelta(hours=2), START) == START + timedelta(hours=2)
    assert resolve_deadline(3600, START) == START + timedelta(hours=1)
    assert resolve_deadline("2026-12-02T08:00:00+01:00", START) == datetime(2026, 12, 2, 7, tzinfo=UTC)
    aware = datetime(2026, 12, 2, 7, tzinfo=timezone(timedelta(hours=2)))
    assert resolve_deadline(aware, START) == datetime(2026, 12, 2, 5, tzinfo=UTC)


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("7am", "time of day"),
        ("25:00", "not a time of day"),
        ("07:00 Mars/Olympus", "unknown time zone"),
        (datetime(2026, 12, 2, 7), "no time zone"),
        ("2026-12-02T07:00:00", "no time zone"),
        (timedelta(0), "must be positive"),
        (-5, "must be positive"),
        (True, "time of day"),
        (None, "time of day"),
    ],
)
def test_what_cannot_be_read_is_refused_with_the_forms_it_takes(value: object, says: str) -> None:
    with pytest.raises(InvalidDeadline, match=says):
        resolve_deadline(value, START)  # type: ignore[arg-type]


def test_at_risk_when_the_late_end_of_the_eta_passes_the_deadline_minus_the_margin() -> None:
    deadline = datetime(2026, 12, 2, 7, tzinfo=UTC)
    margin = timedelta(minutes=10)
    early = deadline - timedelta(hours=2)

    def risk(eta_minutes_before: float | None, eta_margin_minutes: float = 5, now: datetime = early) -> bool:
        eta = None
        if eta_minutes_before is not None:
            eta = Estimate(
                deadline - timedelta(minutes=eta_minutes_before), timedelta(minutes=eta_margin_minutes)
            )
        return at_risk(eta, now, deadline, margin)

    assert not risk(30)
    assert risk(12), "06:48 +5 min is past 06:50"
    assert risk(-5, 1)
    assert not risk(None), "no estimate yet, hours to go: no escalation on a guess"
    assert risk(None, now=deadline - timedelta(minutes=9)), (
        "no estimate, and the deadline less the margin has come"
    )


def test_the_job_records_its_deadline_and_escalations_for_the_ui() -> None:
    import json

    from airflow_kueue_provider.kueue.names import DEADLINE_ANNOTATION, ESCALATIONS_ANNOTATION
    from airflow_kueue_provider.kueue.progress.deadline import deadline_of

    steps = [{"step": "raise_priority", "at": "2026-12-02T06:41:07+00:00", "detail": "urgent", "why": "x"}]
    job = {
        "metadata": {
            "annotations": {
                DEADLINE_ANNOTATION: "2026-12-02T07:00:00+00:00",
                ESCALATIONS_ANNOTATION: json.dumps(steps),
            }
        }
    }
    assert deadline_of(job) == (datetime(2026, 12, 2, 7, tzinfo=UTC), steps)
    assert deadline_of({"metadata": {}}) == (None, [])
    broken = {"metadata": {"annotations": {DEADLINE_ANNOTATION: "soon", ESCALATIONS_ANNOTATION: "{"}}}
    assert deadline_of(broken) == (None, [])
