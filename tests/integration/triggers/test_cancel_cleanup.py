"""The Airflow 3.1/3.2 kill path on the real cluster: the trigger is cancelled without a message (as those
triggerers cancel for a user action and a shutdown alike), then ``cleanup()`` asks for the task instance's
state (here answered by the test: no triggerer supervisor runs in pytest) and deletes the held Job only when
the task left ``deferred``."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

from airflow_kueue_provider.triggers import cancel_cleanup

from ..cluster import KueueEnv, wait_for
from .test_kueue_job_trigger import _submit, _trigger


@pytest.mark.parametrize(("state", "deleted"), [("deferred", False), ("failed", True), (None, True)])
def test_a_cancelled_trigger_deletes_its_running_job_only_after_a_user_action(
    kueue_env: KueueEnv, monkeypatch: pytest.MonkeyPatch, state: str | None, deleted: bool
) -> None:
    asked: list[Any] = []

    async def read(ti: Any) -> tuple[bool, str | None]:
        asked.append(ti)
        return True, state

    monkeypatch.setattr(cancel_cleanup, "airflow_calls_on_kill", lambda: False)  # as on 3.1 and 3.2
    monkeypatch.setattr(cancel_cleanup, "task_instance_state", read)
    job = _submit(kueue_env, run_duration="1s", hold=True)
    name = job["metadata"]["name"]
    trigger = _trigger(kueue_env, job)
    trigger.task_instance = SimpleNamespace(dag_id="d", task_id="shards", run_id="r", map_index=-1)

    async def scenario() -> None:
        running = asyncio.create_task(anext(aiter(trigger.run())))
        await asyncio.to_thread(wait_for, "pods running", lambda: len(kueue_env.running_pods(name)) == 3)
        running.cancel()  # no message: Airflow 3.1/3.2
        with pytest.raises(asyncio.CancelledError):
            await running
        await trigger.cleanup()

    asyncio.run(scenario())
    assert asked == [trigger.task_instance]
    names = [j.metadata.name for j in kueue_env.jobs() if not j.metadata.deletion_timestamp]
    assert (name not in names) is deleted, names
