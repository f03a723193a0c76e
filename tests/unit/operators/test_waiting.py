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
from airflow_kueue_provider.operators.indexed_job import KueueIndexedJobOperator
from airflow_kueue_provider.operators.waiting import RESUME_METHOD, inline_wait_seconds


class Deferred(Exception):
    pass


class FakeTrigger:
    def __init__(self, takes: float) -> None:
        self.takes, self.logs, self.deferred_at = takes, None, 0.0

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
