"""The deadline verdict's hysteresis, and how a run's end reads against its deadline."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from airflow_kueue_provider.kueue.progress.deadline import DeadlinePlan, at_risk
from airflow_kueue_provider.kueue.progress.deadline_verdict import (
    Verdict,
    deadline_outcome,
    last_verdict,
    outcome_line,
)
from airflow_kueue_provider.kueue.progress.eta import Estimate

DEADLINE = datetime(2026, 12, 2, 7, tzinfo=UTC)
MARGIN = timedelta(minutes=10)  # at risk once the late end passes 06:50; back on track only before 06:45
T0 = datetime(2026, 12, 2, 5, tzinfo=UTC)


def _read(verdict: Verdict, finish: datetime | None, at: datetime) -> Verdict:
    estimate = Estimate(finish, timedelta(minutes=1)) if finish is not None else None
    return verdict.next(at_risk(estimate, at, DEADLINE, MARGIN), estimate, at, DEADLINE, MARGIN)


def test_at_risk_at_once_and_back_on_track_only_with_a_clear_gap_held_for_three_readings_and_a_minute() -> (
    None
):
    verdict = _read(Verdict(), DEADLINE - timedelta(minutes=5), T0)
    assert verdict.at_risk  # the first reading past the line turns it AT RISK
    # Back just before the line (06:49 + 1 min late end = 06:50): still AT RISK, no gap.
    verdict = _read(verdict, DEADLINE - timedelta(minutes=11), T0 + timedelta(seconds=10))
    assert verdict.at_risk and verdict.clear_readings == 0
    # A clear gap (late end 06:40, before 06:45): three readings over at least 60 s are needed.
    clear = DEADLINE - timedelta(minutes=21)
    for second in (20, 40, 60):
        verdict = _read(verdict, clear, T0 + timedelta(seconds=second))
        assert verdict.at_risk, second  # 3 readings by 60 s, but only 40 s since the first clear one
    verdict = _read(verdict, clear, T0 + timedelta(seconds=80))
    assert not verdict.at_risk and verdict.clear_since is None


def test_a_reading_inside_the_gap_starts_the_count_over() -> None:
    verdict = _read(Verdict(), DEADLINE, T0)
    clear, grazing = DEADLINE - timedelta(minutes=21), DEADLINE - timedelta(minutes=14)  # 06:47 late end
    verdict = _read(verdict, clear, T0 + timedelta(seconds=10))
    verdict = _read(verdict, clear, T0 + timedelta(seconds=40))
    verdict = _read(verdict, grazing, T0 + timedelta(seconds=70))  # on track by the line, not by the gap
    assert verdict.at_risk and verdict.clear_readings == 0
    for second in (80, 110, 140):
        verdict = _read(verdict, clear, T0 + timedelta(seconds=second))
    assert not verdict.at_risk


def test_no_estimate_keeps_the_verdict_instead_of_falling_back_to_on_track() -> None:
    verdict = _read(Verdict(), DEADLINE, T0)
    for second in range(10, 600, 30):  # a new trigger after an escalation, a Job not started: no estimate
        verdict = _read(verdict, None, T0 + timedelta(seconds=second))
        assert verdict.at_risk
    # On track stays on track without an estimate until the deadline less the margin has come.
    assert not _read(Verdict(), None, T0).at_risk
    assert _read(Verdict(), None, DEADLINE - MARGIN).at_risk


def test_the_verdict_survives_the_plans_serialization_and_an_older_plan_reads_its_history() -> None:
    verdict = Verdict(at_risk=True, clear_since=T0, clear_readings=2)
    plan = DeadlinePlan(DEADLINE, MARGIN, escalate=False, verdict=verdict)
    assert DeadlinePlan.from_dict(plan.to_dict()).verdict == verdict
    older = DeadlinePlan(DEADLINE, MARGIN, escalate=True).to_dict()
    assert "verdict" not in older and DeadlinePlan.from_dict(older).verdict is None
    assert last_verdict([{"at_risk": False}, {"at_risk": True}]) == Verdict(at_risk=True)
    assert last_verdict([]) == Verdict()


def test_met_or_missed_and_by_how_much() -> None:
    met = deadline_outcome(DEADLINE, DEADLINE - timedelta(minutes=4, seconds=10))
    assert met == {
        "deadline": "2026-12-02T07:00:00+00:00",
        "finished_at": "2026-12-02T06:55:50+00:00",
        "met": True,
        "seconds": 250.0,
    }
    assert outcome_line(met) == "deadline 07:00 UTC met with 4 min 10 s to spare"
    missed = deadline_outcome(DEADLINE, DEADLINE + timedelta(seconds=20))
    assert missed["met"] is False and missed["seconds"] == 20.0
    assert outcome_line(missed) == "deadline 07:00 UTC MISSED by 20 s"
    long = deadline_outcome(DEADLINE, DEADLINE - timedelta(hours=2, minutes=5))
    assert outcome_line(long) == "deadline 07:00 UTC met with 2 h 5 min to spare"
    on_the_second = deadline_outcome(DEADLINE, DEADLINE)
    assert on_the_second["met"] is True and on_the_second["seconds"] == 0.0
