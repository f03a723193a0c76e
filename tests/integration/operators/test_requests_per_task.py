"""What one task of a night costs the API server, request by request: a task as the night runs them (a
checkpointed Indexed Job with a priority class, deferred) on a first night (no shard history: no forecast)
and on a later one (learned lengths: the forecast is made; a deadline, which the create writes: no PATCH).
Each submits and completes in a bounded number
of requests. The trigger's reads are the shared watch's (``watch/``) and do not grow with the tasks.

The bounds are the night's apiserver line (docs/benchmarks.md): ours costs a few requests a task, where the
cncf way polls each deferred task for as long as its Job runs."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from types import SimpleNamespace
from typing import Any
from urllib.parse import urlsplit

import pytest
from airflow.exceptions import TaskDeferred
from kubernetes.client import rest

from airflow_kueue_provider.kueue.checkpoints.learned_lengths import LearnedLengths
from airflow_kueue_provider.operators.checkpointing import Checkpointing
from airflow_kueue_provider.operators.indexed_job import KueueIndexedJobOperator

from ..cluster import KueueEnv
from .conftest import CONN_ID
from .test_forecast import Ti

SUBMIT_MOST = {False: 4, True: 12}
"""Without a forecast: the LocalQueue check, the Job's create and its uid seal, its pods' Secret (a first
try lists no earlier objects: a retry adds that LIST). A forecast adds its priority class, its queue's room
(ClusterQueues, pending Workloads, a page of Workloads) and, once queued, the Job's Workload (one WATCH,
another after a quiet second before Kueue made it), the room again (no pending list once admitted)."""
COMPLETE_MOST = 1
"""The Job's pods, for the shard history (the Job's end comes with the trigger's result)."""


@contextmanager
def requests_made() -> Iterator[list[str]]:
    """Every request the synchronous Kubernetes client of this process sends, as ``VERB /path``."""
    made: list[str] = []
    original = rest.RESTClientObject.request

    def request(self: Any, method: str, url: str, *args: Any, **kwargs: Any) -> Any:
        made.append(f"{method} {urlsplit(url).path}")
        return original(self, method, url, *args, **kwargs)

    rest.RESTClientObject.request = request  # type: ignore[method-assign]
    try:
        yield made
    finally:
        rest.RESTClientObject.request = original  # type: ignore[method-assign]


@pytest.mark.parametrize("with_forecast", [False, True], ids=["first-night", "forecast"])
def test_a_night_task_submits_and_completes_in_a_few_requests(
    kueue_env_factory: Any, blob: SimpleNamespace, with_forecast: bool
) -> None:
    env: KueueEnv = kueue_env_factory(cpu="4", memory="16Gi")
    task = KueueIndexedJobOperator(
        task_id="shards",
        namespace=env.namespace,
        queue_name=env.local_queue,
        priority_class=env.priority_class("align", 100),
        image="example.invalid/shard:1",
        completions=4,
        parallelism=2,
        resources={"requests": {"cpu": "1", "memory": "1Gi"}},
        annotations={"kwok.airflow-kueue.io/run-duration": "2s"},
        checkpointing=Checkpointing(CONN_ID, blob.container),
        deadline=3600 if with_forecast else None,  # a night's last step: the create writes it, no PATCH
        inline_wait=None,  # the deferred task's count (test_inline_wait.py: a short Job waited for inline)
    )
    if with_forecast:  # a later night: the shard history has lengths
        history = LearnedLengths(4, dict.fromkeys(range(4), 2.0), ("night-1", "night-2"))
        task._learned_for_forecast = lambda shard_count: history  # type: ignore[method-assign]
    context: Any = {"ti": Ti()}
    with requests_made() as submit, pytest.raises(TaskDeferred) as deferred:
        task.execute(context)
    assert (task._forecast is not None) is with_forecast
    event = asyncio.run(asyncio.wait_for(deferred.value.trigger.first_event(), timeout=120))
    with requests_made() as complete:
        result = task.execute_complete(context, event)
    assert result["completed_indexes"] == "0-3"
    print(f"submit ({len(submit)}):", *submit, f"complete ({len(complete)}):", *complete, sep="\n  ")
    assert len(submit) <= SUBMIT_MOST[with_forecast], submit
    assert len(complete) <= COMPLETE_MOST, complete
    if with_forecast:
        assert result["forecast"]["actual_finish"] == result["finished_at"], result["forecast"]
        job = env.job(result["job_name"]) or {}
        assert "airflow-kueue.io/deadline" in (job["metadata"].get("annotations") or {}), job
        assert len([r for r in submit if r.startswith("PATCH")]) == 1, "the uid seal's PATCH alone"
