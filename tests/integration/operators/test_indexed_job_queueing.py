"""Operator acceptance on the real cluster, through ``airflow dags test``: queue waits and results."""

from __future__ import annotations

import json
import re
from typing import Any

from ..airflow_runner import AirflowHome, DagRun
from ..cluster import KueueEnv, indexed_job, is_true, wait_for

OPERATOR_DAG = """
from datetime import datetime, timedelta
from airflow.sdk import DAG
from airflow_kueue_provider.operators.indexed_job import KueueIndexedJobOperator

with DAG({dag_id!r}, schedule=None, start_date=datetime(2026, 1, 1), catchup=False):
    KueueIndexedJobOperator(
        task_id="shards", namespace={namespace!r}, queue_name={queue!r}, image="example.invalid/shard:1",
        completions={completions}, parallelism={parallelism},
        resources={{"requests": {{"cpu": {cpu!r}, "memory": "1Gi"}}}},
        annotations={annotations!r}, {extra}
    )
"""


def write_operator_dag(
    airflow_home: AirflowHome,
    dag_id: str,
    env: KueueEnv,
    *,
    completions: int = 2,
    parallelism: int | None = None,
    cpu: str = "1",
    run_duration: str = "1s",
    annotations: dict[str, str] | None = None,
    extra: str = "",
) -> None:
    airflow_home.write_dag(
        dag_id,
        OPERATOR_DAG.format(
            dag_id=dag_id,
            namespace=env.namespace,
            queue=env.local_queue,
            completions=completions,
            parallelism=parallelism or completions,
            cpu=cpu,
            extra=extra,
            annotations={"kwok.airflow-kueue.io/run-duration": run_duration, **(annotations or {})},
        ),
    )


def returned_result(run: DagRun) -> dict[str, Any]:
    """The operator's return value, from the line it logs on success ("...; result: {json}")."""
    match = re.search(r"; result: (\{.*?\}) \[", run.output)
    assert match, run.output[-4000:]
    return dict(json.loads(match.group(1)))


def test_task_waits_in_a_full_queue_logs_its_position_and_succeeds(
    kueue_env_factory: Any, airflow_home: AirflowHome
) -> None:
    env = kueue_env_factory(cpu="4", memory="16Gi")
    blocker = env.create_job(
        indexed_job("blocker", env.local_queue, completions=2, cpu="2", run_duration="25s")
    )
    wait_for("blocker admitted", lambda: is_true(env.workload(blocker), "Admitted"))
    write_operator_dag(airflow_home, "queue_full", env, completions=2, cpu="2")

    run = airflow_home.test_dag("queue_full")

    assert run.succeeded, run.output[-6000:]
    assert re.search(r"queued in lq.*\(position 1, \d+ s\)", run.output), run.output[-6000:]
    assert f"admitted to {env.cluster_queue}" in run.output
    result = returned_result(run)
    assert result["completed_indexes"] == "0,1" and result["failed"] == 0
    assert result["cluster_queue"] == env.cluster_queue
    assert result["queued_seconds"] >= 10, "it waited for the blocker to finish"
    assert is_true(env.job("blocker"), "Complete")
