"""The trigger's deadline watch: the submit forecast counts, the verdict holds across an escalation and a
trigger of the previous version, and the final event records when the run ended."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from airflow_kueue_provider.kueue.progress.deadline import DeadlinePlan
from airflow_kueue_provider.kueue.progress.deadline_verdict import Verdict
from airflow_kueue_provider.kueue.progress.eta import Estimate
from airflow_kueue_provider.triggers import deadline_watch
from airflow_kueue_provider.triggers.deadline_watch import DeadlineWatch
from airflow_kueue_provider.triggers.kueue_job import KueueJobTrigger

DEADLINE = datetime(2026, 12, 2, 7, tzinfo=UTC)
MARGIN = timedelta(minutes=10)
NOW = datetime(2026, 12, 2, 5, tzinfo=UTC)


@dataclass
class View:
    suspended: bool = True
    active: int = 0


class Clock:
    at = NOW

    @classmethod
    def now(cls, tz: Any = None) -> datetime:
        return cls.at


@pytest.fixture(autouse=True)
def clock(monkeypatch: pytest.MonkeyPatch) -> type[Clock]:
    Clock.at = NOW
    monkeypatch.setattr(deadline_watch, "datetime", Clock)
    return Clock


def _check(watch: DeadlineWatch, estimate: Estimate | None, queued: bool = True) -> tuple[Any, Any]:
    return watch.check(queued, estimate, View(suspended=queued))  # type: ignore[arg-type]


def test_a_forecast_past_the_deadline_escalates_at_the_first_check() -> None:
    unreachable = Estimate(DEADLINE + timedelta(minutes=20), timedelta(minutes=5))
    watch = DeadlineWatch(DeadlinePlan(DEADLINE, MARGIN, escalate=True, forecast=unreachable))
    line, due = _check(watch, None)  # queued, no estimate of its own yet: the forecast is the estimate
    assert due == 0.0 and "AT RISK" in line and "submit forecast 07:20 UTC" in line
    reachable = Estimate(DEADLINE - timedelta(hours=1), timedelta(minutes=5))
    line, due = _check(DeadlineWatch(DeadlinePlan(DEADLINE, MARGIN, escalate=True, forecast=reachable)), None)
    assert due != 0.0 and "on track" in line
    # The run's own estimate, once it has one, replaces the forecast.
    watch = DeadlineWatch(DeadlinePlan(DEADLINE, MARGIN, escalate=True, forecast=unreachable))
    line, due = _check(watch, Estimate(NOW + timedelta(minutes=30), timedelta(minutes=2)), queued=False)
    assert due != 0.0 and line.endswith("on track")


def test_the_verdict_does_not_flap_when_estimates_come_and_go(clock: type[Clock]) -> None:
    watch = DeadlineWatch(DeadlinePlan(DEADLINE, MARGIN, escalate=False))
    late, fine = Estimate(DEADLINE, timedelta(minutes=1)), Estimate(NOW + timedelta(hours=1), timedelta(0))
    verdicts = []
    for step, estimate in enumerate([fine, late, None, fine, None, fine, late, None]):
        clock.at = NOW + timedelta(seconds=5 * step)  # within the minute: changes only
        line, _ = _check(watch, estimate, queued=False)
        verdicts.append(line.rsplit(": ", 1)[1])
    assert verdicts == ["on track"] + ["AT RISK"] * 7
    # The history records the hysteretic verdict's changes only: once on track, once AT RISK.
    assert [s["at_risk"] for s in watch.eta_history.samples] == [False, True]


def test_after_an_escalation_the_next_trigger_starts_at_risk() -> None:
    history = ({"at": "2026-12-02T05:00:00+00:00", "phase": "queued", "eta": None, "at_risk": True},)
    plan = DeadlinePlan(DEADLINE, MARGIN, escalate=False, eta_history=history)  # as the worker hands it on
    line, _ = _check(DeadlineWatch(plan), None)
    assert line.endswith("AT RISK")


def test_the_verdict_survives_the_triggers_serialization() -> None:
    verdict = Verdict(at_risk=True, clear_since=NOW, clear_readings=2)
    plan = DeadlinePlan(DEADLINE, MARGIN, escalate=False, verdict=verdict)
    trigger = KueueJobTrigger(job_name="j", namespace="n", queue_name="q", deadline=plan.to_dict())
    recreated = KueueJobTrigger(**trigger.serialize()[1])
    assert recreated.deadline == plan and recreated._deadline.verdict == verdict


def test_a_trigger_serialized_by_the_previous_version_resumes_with_its_verdict() -> None:
    """The previous version's kwargs: no ``verdict`` or ``forecast`` in the deadline."""
    old_deadline = {
        "deadline": DEADLINE.isoformat(),
        "margin_seconds": 600.0,
        "escalate": False,
        "escalations": [{"step": "notify", "at": "x", "detail": "sent", "why": "y"}],
        "eta_history": [{"at": "2026-12-02T04:59:00+00:00", "phase": "queued", "eta": None, "at_risk": True}],
        "spill_pending": False,
    }
    trigger = KueueJobTrigger(job_name="j", namespace="n", queue_name="q", deadline=old_deadline)
    assert trigger.deadline is not None and trigger.deadline.verdict is None
    line, _ = _check(trigger._deadline, None)
    assert line.endswith("AT RISK")
    fresh = dict(old_deadline, eta_history=[])
    line, _ = _check(
        KueueJobTrigger(job_name="j", namespace="n", queue_name="q", deadline=fresh)._deadline, None
    )
    assert line.endswith("on track")


def test_the_final_event_records_when_the_run_ended(clock: type[Clock]) -> None:
    watch = DeadlineWatch(DeadlinePlan(DEADLINE, MARGIN, escalate=False))
    _check(watch, None)
    clock.at = NOW + timedelta(minutes=7)
    report = watch.report("success")
    assert report is not None
    assert report.eta_history[-1] == {
        "at": "2026-12-02T05:07:00+00:00",
        "phase": "finished",
        "eta": None,
        "margin_seconds": None,
        "at_risk": False,
    }
    risk = DeadlineWatch(DeadlinePlan(DEADLINE, MARGIN, escalate=True)).report("deadline_risk")
    assert risk is not None and all(s["phase"] != "finished" for s in risk.eta_history)
