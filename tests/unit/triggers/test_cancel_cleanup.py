"""Airflow 3.1/3.2 have no trigger ``on_kill``: after a cancel, ``cleanup()`` deletes the object only when the
task instance is no longer deferred (a user action), never on a triggerer stop or handover (still deferred),
never when the state cannot be read. On 3.3+ ``on_kill`` does it and ``cleanup()`` deletes nothing."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

from airflow_kueue_provider.triggers import cancel_cleanup
from airflow_kueue_provider.triggers.kueue_job import KueueJobTrigger

TI = SimpleNamespace(dag_id="d", task_id="t", run_id="r", map_index=-1)


class Log:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def info(self, fmt: str, *args: Any) -> None:
        self.lines.append(fmt % args)


def _states(result: Any) -> Any:
    async def read(ti: Any) -> Any:
        if isinstance(result, Exception):
            raise result
        return result

    return read


@pytest.mark.parametrize(
    ("state", "deletes"),
    [
        ((True, "deferred"), False),  # a triggerer stop, restart or handover: the next triggerer follows it
        ((True, "failed"), True),  # marked failed
        ((True, "success"), True),  # marked success
        ((True, None), True),  # cleared
        ((False, None), False),  # not found: no guess
        (RuntimeError("supervisor gone"), False),  # cannot tell: no guess
    ],
)
def test_before_3_3_only_a_task_instance_that_left_deferred_deletes(
    monkeypatch: pytest.MonkeyPatch, state: Any, deletes: bool
) -> None:
    monkeypatch.setattr(cancel_cleanup, "airflow_calls_on_kill", lambda: False)
    monkeypatch.setattr(cancel_cleanup, "task_instance_state", _states(state))
    trigger = SimpleNamespace(task_instance=TI)
    assert asyncio.run(cancel_cleanup.user_cancelled(trigger, Log())) is deletes


def test_on_an_airflow_with_on_kill_cleanup_leaves_it_to_on_kill(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cancel_cleanup, "airflow_calls_on_kill", lambda: True)
    monkeypatch.setattr(cancel_cleanup, "task_instance_state", _states((True, "failed")))
    assert asyncio.run(cancel_cleanup.user_cancelled(SimpleNamespace(task_instance=TI), Log())) is False


def test_a_mapped_task_instance_is_read_by_its_map_index() -> None:
    assert cancel_cleanup._state_key(SimpleNamespace(task_id="t", map_index=3)) == "t_3"
    assert cancel_cleanup._state_key(TI) == "t"


@pytest.mark.parametrize("user_action", [True, False])
def test_the_trigger_deletes_after_a_cancel_only_on_a_user_action(
    monkeypatch: pytest.MonkeyPatch, user_action: bool
) -> None:
    killed: list[str] = []

    async def forever(self: Any) -> dict[str, Any]:
        await asyncio.Event().wait()
        return {}

    async def on_kill(self: Any) -> None:
        killed.append(self.name)

    async def decided(trigger: Any, log: Any) -> bool:
        return user_action

    monkeypatch.setattr(KueueJobTrigger, "first_event", forever)
    monkeypatch.setattr(KueueJobTrigger, "on_kill", on_kill)
    monkeypatch.setattr("airflow_kueue_provider.triggers.kueue_follow.user_cancelled", decided)
    trigger = KueueJobTrigger(job_name="j", job_uid="u", namespace="ns", queue_name="lq")

    async def scenario() -> None:
        task = asyncio.create_task(anext(aiter(trigger.run())))
        await asyncio.sleep(0.01)
        task.cancel()  # as Airflow 3.1/3.2 do, for a user action and a shutdown alike
        with pytest.raises(asyncio.CancelledError):
            await task
        await trigger.cleanup()

    asyncio.run(scenario())
    assert killed == (["j"] if user_action else [])


def test_a_trigger_that_ended_normally_deletes_nothing_in_cleanup(monkeypatch: pytest.MonkeyPatch) -> None:
    async def never(trigger: Any, log: Any) -> bool:
        raise AssertionError("not asked: the trigger was not cancelled")

    monkeypatch.setattr("airflow_kueue_provider.triggers.kueue_follow.user_cancelled", never)
    asyncio.run(KueueJobTrigger(job_name="j", namespace="ns", queue_name="lq").cleanup())
