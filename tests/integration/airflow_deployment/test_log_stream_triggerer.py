"""``get_logs=True`` with a real triggerer (a deployment, not ``airflow dags test``): the lines the trigger
streams from a running shard's pod are written to the deferred task's own log in Airflow 3 (the triggerer's
per-trigger log file next to the task's), each once."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from ..cluster import Cluster, delete_kueue_env, wait_for
from ..deployment import AirflowDeployment
from ..process_node import process_queues

pytestmark = pytest.mark.quiet

LOGS_DAG = """
from datetime import datetime
from airflow.sdk import DAG
from airflow_kueue_provider.operators.indexed_job import KueueIndexedJobOperator

SHARD = (
    "import os, time\\n"
    "for n in range(5):\\n"
    "    print('shard ' + os.environ['JOB_COMPLETION_INDEX'] + f' line {{n}}', flush=True)\\n"
    "    time.sleep(1)\\n"
)
with DAG({dag_id!r}, schedule=None, start_date=datetime(2026, 1, 1), catchup=False) as dag:
    KueueIndexedJobOperator(
        task_id="shards", namespace={namespace!r}, queue_name="lq", image="example.invalid/shard:1",
        cmds=["python", "-c", SHARD], completions=2, retries=0,
        resources={{"requests": {{"cpu": "250m", "memory": "256Mi"}}}}, get_logs=True, log_indexes="1",
    )
"""


def _task_logs(home: Path, dag_id: str, task_id: str) -> dict[str, str]:
    found = (home / "logs" / f"dag_id={dag_id}").rglob(f"task_id={task_id}/*")
    return {p.name: p.read_text(errors="replace") for p in found if p.is_file()}


def test_streamed_pod_lines_reach_the_task_log_from_the_real_triggerer(
    deployment: AirflowDeployment, cluster: Cluster, request: pytest.FixtureRequest
) -> None:
    env = process_queues(cluster, request.node.name, cpu="2")
    try:
        dag_id = "log_stream_triggerer"
        deployment.write_dag(dag_id, LOGS_DAG.format(dag_id=dag_id, namespace=env.namespace))
        deployment.rest.wait_for_dag(dag_id)
        run_id = deployment.rest.trigger(dag_id)
        run: Any = wait_for(
            "the run to end",
            lambda: (r := deployment.rest.dag_run(dag_id, run_id))["state"] in ("success", "failed") and r,
            timeout=300,
        )
        logs = _task_logs(deployment.home, dag_id, "shards")
        every = "\n".join(logs.values())
        assert run["state"] == "success", every[-4000:]
        lines = re.findall(r"\[index 1 \S+\] shard 1 line (\d)", every)
        assert lines == [str(n) for n in range(5)], (sorted(logs), every[-4000:])
        assert "shard 0 line" not in every
        # Written by the triggerer: the trigger's own log file of the task instance holds them.
        by_trigger = [name for name, text in logs.items() if "trigger" in name and "shard 1 line 0" in text]
        assert by_trigger, sorted(logs)
    finally:
        delete_kueue_env(env)
