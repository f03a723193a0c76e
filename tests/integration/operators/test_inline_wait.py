"""``inline_wait`` on the bed: a Job its forecast ends within the limit is waited for in the worker (the task
returns its result without deferring); one that has not ended by then is handed to the triggerer after all,
with the resume guard counted from that deferral."""

from __future__ import annotations

import asyncio
import time
from datetime import timedelta
from types import SimpleNamespace
from typing import Any

import pytest
from airflow.exceptions import TaskDeferred

from airflow_kueue_provider.kueue.checkpoints.learned_lengths import LearnedLengths
from airflow_kueue_provider.operators.checkpointing import Checkpointing
from airflow_kueue_provider.operators.indexed_job import KueueIndexedJobOperator

from ..cluster import KueueEnv
from .conftest import CONN_ID
from .test_forecast import Ti, _two_pods


def _task(env: KueueEnv, blob: SimpleNamespace, run: str, learned: float, inline_wait: float) -> Any:
    """Two shards of ``run`` at once, that earlier nights say take ``learned`` seconds each."""
    checkpoints = Checkpointing(CONN_ID, blob.container)
    task = _two_pods(KueueIndexedJobOperator, env, "short", run, checkpointing=checkpoints,
                     inline_wait=timedelta(seconds=inline_wait))  # fmt: skip

    def history(shard_count: int) -> LearnedLengths:
        return LearnedLengths(shard_count, dict.fromkeys(range(shard_count), learned), ("night-1",), 1.0)

    task._learned_for_forecast = history  # type: ignore[method-assign]
    return task


def test_a_job_forecast_to_end_soon_is_waited_for_in_the_worker(
    kueue_env_factory: Any, blob: SimpleNamespace, capfd: pytest.CaptureFixture[str]
) -> None:
    env: KueueEnv = kueue_env_factory(cpu="4", memory="16Gi")
    task = _task(env, blob, "2s", learned=2.0, inline_wait=60)
    result = task.execute({"ti": Ti()})  # no TaskDeferred: the worker waited
    assert result["completed_indexes"] == "0,1", result
    logged = "".join(capfd.readouterr())
    assert "waiting for it here (inline_wait 60 s)" in logged, logged[-3000:]
    assert result["forecast"]["actual_finish"] == result["finished_at"], result["forecast"]


def test_one_that_has_not_ended_by_the_limit_defers_after_all(
    kueue_env_factory: Any, blob: SimpleNamespace
) -> None:
    env: KueueEnv = kueue_env_factory(cpu="4", memory="16Gi")
    task = _task(env, blob, "40s", learned=1.0, inline_wait=8)  # the history says short; the Job is not
    began = time.time()
    with pytest.raises(TaskDeferred) as deferred:
        task.execute({"ti": Ti()})
    trigger = deferred.value.trigger
    assert time.time() - began >= 8
    assert trigger.deferred_at >= began + 8, "the guard counts from the deferral, not the submit"
    # the triggerer's copy follows the same Job on from where the worker left it
    _, kwargs = trigger.serialize()
    assert kwargs["job_name"] == task._name and kwargs["deferred_at"] == trigger.deferred_at
    event = asyncio.run(asyncio.wait_for(trigger.first_event(), timeout=120))
    assert task.execute_complete({"ti": Ti()}, event)["completed_indexes"] == "0,1"


def test_an_admitted_job_about_to_end_at_the_limit_is_waited_for_past_it(
    kueue_env_factory: Any, blob: SimpleNamespace, capfd: pytest.CaptureFixture[str]
) -> None:
    """The limit passes while the Job runs (a night's Job that queued longer than forecast): its forecast,
    re-anchored at the admission the trigger saw, ends it within the resume guard, so the worker waits on
    rather than defer and resume no sooner than the guard allows."""
    env: KueueEnv = kueue_env_factory(cpu="4", memory="16Gi")
    task = _task(env, blob, "4s", learned=4.0, inline_wait=60)
    task._inline_limit = lambda: 2.0  # type: ignore[method-assign]  # the limit passes mid-run
    result = task.execute({"ti": Ti()})  # no TaskDeferred
    assert result["completed_indexes"] == "0,1", result
    logged = "".join(capfd.readouterr())
    assert "sooner than a deferral could resume: waiting" in logged, logged[-3000:]
