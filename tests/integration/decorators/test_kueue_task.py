"""@task.kueue on the local cluster: the decorated function really runs, once per shard, as processes of the
process nodes (packed 10 shards a pod), reading its Blob checkpoints through Azurite; two shards fail on the
first try, and the retry runs only those two; the task's result carries every shard's return value. The Kueue
tab's app shows both tries' Jobs, and a failed index's log tail is the pod's real output."""

from __future__ import annotations

import collections
from datetime import datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from airflow.sdk import DAG, task
from fastapi.testclient import TestClient

from airflow_kueue_provider.decorators.kueue_task import KueueDecoratedOperator
from airflow_kueue_provider.hooks.kueue_hook import KueueHook
from airflow_kueue_provider.operators.checkpointing import Checkpointing
from airflow_kueue_provider.operators.indexed_job import KueueJobFailed
from airflow_kueue_provider.plugins.dashboard_app import create_app

from ..cluster import Cluster, KueueEnv
from ..operators.test_shard_packing import (
    CONN_ID,
    _ti,
    blob,  # noqa: F401 - the fixture
)
from ..process_node import queues_on_process_nodes as queues  # noqa: F401 - the fixture

SHARDS = 100
FAILING = [7, 42]


def test_a_kueue_task_runs_its_function_per_shard_and_a_retry_runs_only_the_failed_ones(
    cluster: Cluster,
    queues: KueueEnv,  # noqa: F811
    blob: SimpleNamespace,  # noqa: F811
    tmp_path: Path,
) -> None:
    calls, marks = tmp_path / "calls", tmp_path / "failed-once"
    with DAG("kueue_task_on_the_bed", schedule=None, start_date=datetime(2026, 1, 1)):

        @task.kueue(
            task_id="square",
            namespace=queues.namespace,
            queue_name=queues.local_queue,
            image="example.invalid/shard:1",
            completions=SHARDS,
            parallelism=2,
            shards_per_pod=10,
            backoff_limit_per_index=0,
            spot=True,
            resources={"requests": {"cpu": "250m", "memory": "256Mi"}},
            deferrable=False,
            checkpointing=Checkpointing(conn_id=CONN_ID, container=blob.container),
        )
        def square(shard: Any, calls: str, failing: list[int], marks: str) -> int:
            import os

            fd = os.open(calls, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            os.write(fd, f"{shard.shard_id}\n".encode())
            os.close(fd)
            mark = f"{marks}-{shard.shard_id}"
            if shard.shard_id in failing and not os.path.exists(mark):
                open(mark, "w").close()
                raise RuntimeError(f"shard {shard.shard_id} fails on its first run")
            print(f"squared shard {shard.shard_id}", flush=True)
            return int(shard.shard_id) ** 2

        op = square(str(calls), FAILING, str(marks)).operator
    assert isinstance(op, KueueDecoratedOperator)

    with pytest.raises(KueueJobFailed) as first_try:
        op.execute({"ti": _ti(1)})  # type: ignore[arg-type]
    assert "fails on its first run" in str(first_try.value), "the failure quotes the pod's real log"
    result = op.execute({"ti": _ti(2)})  # type: ignore[arg-type]

    ran = collections.Counter(int(line) for line in calls.read_text().split())
    assert ran == {s: 2 if s in FAILING else 1 for s in range(SHARDS)}, "each shard once, a failed one twice"
    assert (result["completed_indexes"], result["attempts"], result["retried_shards"]) == ("0-99", 2, 2)
    assert result["results"] == {str(s): s * s for s in range(SHARDS)}

    _the_kueue_tab_shows_both_tries(queues.namespace)


def _the_kueue_tab_shows_both_tries(namespace: str) -> None:
    app = TestClient(
        create_app(
            lambda: KueueHook("kubernetes_default"),
            lambda: [namespace],
            dependencies=[],
            task_access=[],
            log_access=[],
            queues_access=[],
            task_instances=lambda *key: None,
            task_runs=lambda *key: [],
        )
    )
    ti = _ti(1)
    key = {"dag_id": ti.dag_id, "task_id": ti.task_id, "run_id": ti.run_id}
    first, retry = app.get("/api/task", params=key).json()["jobs"]
    assert retry["grid"]["counts"]["done"] == retry["grid"]["completions"], retry["grid"]
    assert retry["grid"]["shards"] == ",".join(map(str, FAILING)), "the retry's grid names its shards"
    grid = first["grid"]  # per shard: 100 shards, 10 per pod; a failed pod index's 10 shards drawn failed
    assert (grid["unit"], grid["completions"], grid["per_pod"]) == ("shard", SHARDS, 10), grid
    assert grid["counts"]["failed"] == 10 * len({s // 10 for s in FAILING}), grid["counts"]
    failed = [run["first"] // grid["per_pod"] for run in grid["runs"] if run["state"] == "failed"]
    assert failed == sorted({s // 10 for s in FAILING}), grid["runs"]
    tail = app.get("/api/task/log", params={**key, "job": first["name"], "index": failed[0]}).json()
    assert "fails on its first run" in tail["log"], tail
    done = app.get("/api/task/log", params={**key, "job": retry["name"], "index": 0}).json()
    assert "squared shard" in done["log"], done
    page = app.get("/task", params=key)
    assert page.status_code == 200
    assert all(f'data-job="{job["name"]}"' in page.text for job in (first, retry)), page.text[:3000]
    assert f'title="shard {FAILING[1]}, pod index 0: done"' in page.text, "the retry's cells name shard ids"
