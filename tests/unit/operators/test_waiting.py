"""Where the task waits (operators/waiting.py): deferred, or first in the worker when the forecast says the
Job ends within ``inline_wait``, deferring after all when it has not."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from airflow_kueue_provider.airflow_compat import AirflowFailException
from airflow_kueue_provider.kueue.progress.eta import Estimate
from airflow_kueue_provider.kueue.progress.forecast import Forecast
from airflow_kueue_provider.operators import waiting
from airflow_kueue_provider.operators.indexed_job import KueueIndexedJobOperator
from airflow_kueue_provider.operators.waiting import (
    INLINE_EXTENSION_SLACK,
    RESUME_METHOD,
    inline_extension,
    inline_wait_seconds,
)
from airflow_kueue_provider.triggers.resume_guard import RESUME_GUARD_SECONDS


class Deferred(Exception):
    pass


class FakeTrigger:
    def __init__(self, takes: float, admitted_at: datetime | None = None) -> None:
        self.takes, self.logs, self.deferred_at, self.admitted_at = takes, None, 0.0, admitted_at

    async def first_event(self) -> dict[str, Any]:
        await asyncio.sleep(self.takes)
        return {"status": "success"}


def task(inline_wait: Any = timedelta(seconds=30), ends_in: float | None = 5.0) -> KueueIndexedJobOperator:
    op = KueueIndexedJobOperator(
        task_id="t", namespace="ns", queue_name="lq", image="example.invalid/x:1", completions=2,
        inline_wait=inline_wait,
    )  # fmt: skip
    if ends_in is not None:
        at = datetime.now(UTC) + timedelta(seconds=ends_in)
        op._forecast_made = Forecast(
            Estimate(at, timedelta()), Estimate(at, timedelta(seconds=1)), at, "test"
        )
    deferrals: list[float] = []

    def defer(*, trigger: FakeTrigger, method_name: str, **_: Any) -> None:
        assert method_name == RESUME_METHOD
        deferrals.append(trigger.deferred_at)
        raise Deferred

    op.defer = defer  # type: ignore[method-assign]
    op.resume_execution = lambda method, kwargs, context: kwargs["event"]  # type: ignore[method-assign]
    op.deferrals = deferrals  # type: ignore[attr-defined]
    return op


def test_a_job_forecast_to_end_soon_is_waited_for_in_the_worker() -> None:
    op = task()
    assert op._wait({}, FakeTrigger(0.01)) == {"status": "success"}  # type: ignore[arg-type]
    assert op.deferrals == []  # type: ignore[attr-defined]


def test_one_that_has_not_ended_by_the_inline_wait_defers_with_the_guard_counted_from_then() -> None:
    op = task(inline_wait=0.05, ends_in=0.0)
    trigger = FakeTrigger(5)
    with pytest.raises(Deferred):
        op._wait({}, trigger)  # type: ignore[arg-type]
    assert op.deferrals[0] > 0  # type: ignore[attr-defined]  # the deferral's own time, not the submit's


def test_an_admitted_job_forecast_to_end_within_the_guard_is_waited_for_past_the_inline_wait() -> None:
    """Queued longer than forecast, then running as forecast: a deferral now could not resume the task before
    the resume guard, so the worker waits the forecast's rest (call-2 of a small night lost 6.2 s here)."""
    op = task(inline_wait=0.1, ends_in=0.05)  # its late end 1 s after the start: admitted now, it ends by 1 s
    trigger = FakeTrigger(0.3, admitted_at=datetime.now(UTC))
    assert op._wait({}, trigger) == {"status": "success"}  # type: ignore[arg-type]
    assert op.deferrals == []  # type: ignore[attr-defined]


def test_an_extended_wait_that_still_does_not_see_the_end_defers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(waiting, "OVERRUN_EXTENSION_SECONDS", 0.05)
    op = task(inline_wait=0.05, ends_in=0.0)
    assert op._forecast_made is not None
    trigger = FakeTrigger(5, admitted_at=op._forecast_made.start.at)
    with pytest.raises(Deferred):
        op._wait({}, trigger)  # type: ignore[arg-type]
    assert op.deferrals[0] > 0  # type: ignore[attr-defined]


def test_an_admitted_job_running_past_its_forecast_is_waited_for_a_little_longer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The small night: align-4, slowed by an eviction, ended 2 s after its extension ran out; its deferral
    then held the event for the whole guard, 10 s on the sample's critical path."""
    monkeypatch.setattr(waiting, "OVERRUN_EXTENSION_SECONDS", 0.3)
    op = task(inline_wait=0.05, ends_in=-1.5)  # its late end already passed: the first extension is 1 s
    assert op._forecast_made is not None
    trigger = FakeTrigger(1.3, admitted_at=datetime.now(UTC) - timedelta(seconds=1.5))
    assert op._wait({}, trigger) == {"status": "success"}  # type: ignore[arg-type]
    assert op.deferrals == []  # type: ignore[attr-defined]


def test_the_overrun_extensions_are_few_and_only_follow_a_first_one() -> None:
    made, now = _forecast(5.0), datetime(2026, 12, 7, 2, 0, tzinfo=UTC)
    for taken in range(1, waiting.OVERRUN_EXTENSIONS + 1):
        assert inline_extension(made, now, now, taken) == waiting.OVERRUN_EXTENSION_SECONDS
    assert inline_extension(made, now, now, waiting.OVERRUN_EXTENSIONS + 1) is None
    assert inline_extension(made, None, now, 1) is None  # evicted meanwhile (no admission): defer


def _forecast(runs: float, margin: float = 0.0) -> Forecast:
    start = datetime(2026, 12, 7, 1, 0, tzinfo=UTC)
    end = start + timedelta(seconds=runs)
    return Forecast(Estimate(start, timedelta()), Estimate(end, timedelta(seconds=margin)), end, "test")


@pytest.mark.parametrize(
    ("runs", "margin", "admitted_ago", "expected"),
    [
        (20.0, 2.0, 15.0, 7.0 + INLINE_EXTENSION_SLACK),  # its late end is 7 s away
        (20.0, 0.0, 30.0, INLINE_EXTENSION_SLACK),  # overdue: a little more, never the whole guard
        (20.0, 0.0, 5.0, None),  # 15 s to go: past the guard, a deferral loses nothing
        (60.0, 0.0, 55.0, 5.0 + INLINE_EXTENSION_SLACK),
        (20.0, 0.0, 10.0 + INLINE_EXTENSION_SLACK / 2, RESUME_GUARD_SECONDS),  # bounded by the guard
    ],
)
def test_the_extension_is_the_forecast_rest_of_an_admitted_run_bounded_by_the_guard(
    runs: float, margin: float, admitted_ago: float, expected: float | None
) -> None:
    made = _forecast(runs, margin)
    now = made.start.at + timedelta(minutes=5)
    got = inline_extension(made, now - timedelta(seconds=admitted_ago), now)
    assert got == (pytest.approx(expected) if expected is not None else None)


def test_no_extension_for_a_queued_job_or_without_a_forecast() -> None:
    now = datetime(2026, 12, 7, 1, 0, tzinfo=UTC)
    assert inline_extension(_forecast(5.0), None, now) is None
    assert inline_extension(None, now, now) is None


@pytest.mark.parametrize(
    ("inline_wait", "ends_in"),
    [(30, 120.0), (30, None), (None, 5.0)],
    ids=["forecast-beyond-it", "no-forecast-(a-reattached-job's-too)", "turned-off"],
)
def test_otherwise_the_task_defers_at_once(inline_wait: Any, ends_in: float | None) -> None:
    op = task(inline_wait, ends_in)
    with pytest.raises(Deferred):
        op._wait({}, FakeTrigger(0.01))  # type: ignore[arg-type]


@pytest.mark.parametrize("value", [-1, 601, "30", True])
def test_a_bad_inline_wait_fails_the_parse_saying_what_to_give(value: Any) -> None:
    with pytest.raises(
        AirflowFailException, match="inline_wait must be a timedelta or seconds from 0 to 600"
    ):
        inline_wait_seconds("t", value)


def test_zero_or_none_means_always_defer() -> None:
    assert inline_wait_seconds("t", 0) is None and inline_wait_seconds("t", None) is None
    assert inline_wait_seconds("t", timedelta(seconds=45)) == 45.0
