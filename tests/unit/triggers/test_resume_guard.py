"""The resume guard: a trigger's event waits until RESUME_GUARD_SECONDS after the trigger started, so
Airflow 3.3's scheduler has taken in the deferring worker's exit before the task resumes (#72716)."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from airflow_kueue_provider.triggers import resume_guard
from airflow_kueue_provider.triggers.kueue_job import KueueJobTrigger
from airflow_kueue_provider.triggers.kueue_jobset import KueueJobSetTrigger
from airflow_kueue_provider.triggers.resume_guard import RESUME_GUARD_SECONDS, ResumeGuard


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0
        self.slept: list[float] = []

    def time(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> _Clock:
    fake = _Clock()
    monkeypatch.setattr(resume_guard.time, "time", fake.time)
    monkeypatch.setattr(resume_guard.asyncio, "sleep", fake.sleep)
    return fake


def test_an_early_event_waits_out_the_guard_and_says_why(
    clock: _Clock, caplog: pytest.LogCaptureFixture
) -> None:
    guard = ResumeGuard()
    clock.now += 3
    assert guard.holds_for() == pytest.approx(RESUME_GUARD_SECONDS - 3)
    with caplog.at_level(logging.INFO):
        asyncio.run(guard.wait_open(logging.getLogger("t"), "ns/job: success"))
    assert clock.slept == [pytest.approx(RESUME_GUARD_SECONDS - 3)]
    assert "ns/job: success; resuming the task in 7.0 s" in caplog.text


def test_the_guard_counts_from_the_deferral_so_a_recreated_trigger_is_not_held(clock: _Clock) -> None:
    assert ResumeGuard(deferred_at=clock.now - 4).holds_for() == pytest.approx(RESUME_GUARD_SECONDS - 4)
    assert ResumeGuard(deferred_at=clock.now - 600).holds_for() == 0  # a triggerer restart, long after
    # a worker clock 5 minutes ahead of the triggerer's holds no longer than the guard itself
    assert ResumeGuard(deferred_at=clock.now + 300).holds_for() == RESUME_GUARD_SECONDS


def test_the_deferral_time_survives_serialization() -> None:
    for trigger in (
        KueueJobTrigger(job_name="j", namespace="n", queue_name="q", deferred_at=1234.5),
        KueueJobSetTrigger(jobset_name="js", namespace="n", queue_name="q", deferred_at=1234.5),
    ):
        _, kwargs = trigger.serialize()
        assert kwargs["deferred_at"] == 1234.5
        assert type(trigger)(**kwargs).deferred_at == 1234.5


def test_a_late_event_goes_out_at_once(clock: _Clock, caplog: pytest.LogCaptureFixture) -> None:
    guard = ResumeGuard()
    clock.now += RESUME_GUARD_SECONDS + 1
    with caplog.at_level(logging.INFO):
        asyncio.run(guard.wait_open(logging.getLogger("t"), "ns/job: success"))
    assert guard.holds_for() == 0 and clock.slept == [] and not caplog.text


@pytest.mark.parametrize(
    "trigger",
    [
        KueueJobTrigger(job_name="j", namespace="n", queue_name="q"),
        KueueJobSetTrigger(jobset_name="js", namespace="n", queue_name="q"),
    ],
    ids=["job", "jobset"],
)
def test_the_triggerers_run_holds_an_early_event(
    clock: _Clock, monkeypatch: pytest.MonkeyPatch, trigger: Any
) -> None:
    """The triggerer's ``run`` waits; ``first_event`` is the in-process wait (no deferral, no guard)."""
    trigger._resume_guard = ResumeGuard()  # made on the fake clock: deferred now

    async def finished_at_once() -> dict[str, Any]:
        return {"status": "success"}

    monkeypatch.setattr(trigger, "first_event", finished_at_once)

    async def events() -> list[dict[str, Any]]:
        return [dict(e.payload) async for e in trigger.run()]

    assert asyncio.run(events()) == [{"status": "success"}]
    assert clock.slept == [pytest.approx(RESUME_GUARD_SECONDS)]
