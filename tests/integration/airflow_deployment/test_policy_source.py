"""The platform's ``[kueue]`` options reach a task run by a real scheduler (LocalExecutor): Airflow's
executor worker, supervisor and task runner each set a process title, which overwrites
``/proc/self/environ`` unless ``SPT_NOENV`` is set before (hooks/kueue_config.py). Under ``airflow dags test``
no title is set, so only a deployment shows it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ..cluster import wait_for
from ..deployment import AirflowDeployment, Postgres
from .conftest import module_deployment

ALLOWED = "lq"

OTHER_QUEUE_DAG = """
from datetime import datetime
from airflow.sdk import DAG
from airflow_kueue_provider.operators.indexed_job import KueueIndexedJobOperator

with DAG({dag_id!r}, schedule=None, start_date=datetime(2026, 1, 1), catchup=False,
         params={{"queue": "team-b-queue"}}) as dag:
    KueueIndexedJobOperator(  # templated: checked when the task runs, in the task runner
        task_id="other_queue", namespace={namespace!r}, queue_name="{{{{ params.queue }}}}",
        image="example.invalid/shard:1", completions=1, retries=0,
    )
"""


@pytest.fixture(scope="module")
def deployment(
    request: pytest.FixtureRequest,
    postgres_server: Postgres,
    devcluster_env: dict[str, str],
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[AirflowDeployment]:
    """Every Airflow process is started with the platform's LocalQueue allowlist in its environment."""
    env = {"AIRFLOW__KUEUE__ALLOWED_LOCAL_QUEUES": f"*:{ALLOWED}"}
    yield from module_deployment(request, postgres_server, devcluster_env, tmp_path_factory, env)


def _task_log(home: Path, dag_id: str, run_id: str, task_id: str) -> str:
    return "".join(
        p.read_text() for p in (home / "logs" / f"dag_id={dag_id}").rglob(f"task_id={task_id}/*.log")
    )


def test_an_allowlist_in_the_environment_holds_for_a_task_the_scheduler_runs(
    deployment: AirflowDeployment, kueue_env_factory: Any
) -> None:
    env = kueue_env_factory()
    assert env.local_queue == ALLOWED
    dag_id = "policy_source"
    deployment.write_dag(dag_id, OTHER_QUEUE_DAG.format(dag_id=dag_id, namespace=env.namespace))
    deployment.rest.wait_for_dag(dag_id)
    run_id = deployment.rest.trigger(dag_id)

    run = wait_for(
        "the run to end",
        lambda: (r := deployment.rest.dag_run(dag_id, run_id))["state"] in ("success", "failed") and r,
        timeout=300,
    )
    said = _task_log(deployment.home, dag_id, run_id, "other_queue")
    assert run["state"] == "failed", said[-3000:]
    assert "queue_name (LocalQueue) 'team-b-queue' is not allowed in namespace" in said, said[-3000:]
    assert env.jobs() == [], "nothing was created"
