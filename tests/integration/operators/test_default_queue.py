"""[kueue] default_queue_name / default_namespace on the bed: a task that names neither runs through the
configured LocalQueue in the configured namespace (a real ``airflow dags test`` worker, the options in its
environment at exec; the DAG file's own os.environ line changes nothing), and the queue policy checks the
defaulted queue before anything is created."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from airflow_kueue_provider.airflow_compat import AirflowFailException
from airflow_kueue_provider.kueue.names import QUEUE_NAME_LABEL
from airflow_kueue_provider.operators.indexed_job import KueueIndexedJobOperator

from ..airflow_runner import AirflowHome
from ..cluster import KueueEnv
from ..kueue_policy import set_kueue_options
from .test_indexed_job_queueing import returned_result

DEFAULTED_DAG = """
import os
os.environ["AIRFLOW__KUEUE__DEFAULT_QUEUE_NAME"] = "not-the-platforms-queue"  # read at exec: no effect
from datetime import datetime
from airflow.sdk import DAG
from airflow_kueue_provider.operators.indexed_job import KueueIndexedJobOperator

with DAG({dag_id!r}, schedule=None, start_date=datetime(2026, 1, 1), catchup=False) as dag:
    KueueIndexedJobOperator(
        task_id="shards", image="example.invalid/shard:1", completions=2,
        resources={{"requests": {{"cpu": "1", "memory": "1Gi"}}}},
        annotations={{"kwok.airflow-kueue.io/run-duration": "1s"}},
    )
"""


def test_a_task_without_queue_name_runs_through_the_configured_default_queue(
    kueue_env: KueueEnv, airflow_home: AirflowHome, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(airflow_home.env, "AIRFLOW__KUEUE__DEFAULT_QUEUE_NAME", kueue_env.local_queue)
    monkeypatch.setitem(airflow_home.env, "AIRFLOW__KUEUE__DEFAULT_NAMESPACE", kueue_env.namespace)
    airflow_home.write_dag("defaulted", DEFAULTED_DAG.format(dag_id="defaulted"))
    run = airflow_home.test_dag("defaulted")
    assert run.succeeded, run.output[-4000:]
    result = returned_result(run)
    job = kueue_env.job(result["job_name"])
    assert job is not None, f"no Job {result['job_name']} in {kueue_env.namespace}"
    assert job["metadata"]["labels"][QUEUE_NAME_LABEL] == kueue_env.local_queue
    assert f"in LocalQueue {kueue_env.local_queue}" in run.output
    workload = kueue_env.workload(job)
    assert workload is not None
    assert workload["status"]["admission"]["clusterQueue"] == kueue_env.cluster_queue


def test_the_queue_policy_refuses_a_defaulted_queue_before_anything_is_created(
    kueue_env: KueueEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    set_kueue_options(
        monkeypatch,
        default_queue_name=kueue_env.local_queue,
        default_namespace=kueue_env.namespace,
        allowed_local_queues=f"{kueue_env.namespace}:another-queue",
    )
    task = KueueIndexedJobOperator(
        task_id="shards", image="example.invalid/shard:1", completions=1, deferrable=False
    )
    ti: Any = SimpleNamespace(dag_id="dq", task_id="shards", run_id="r1", try_number=1, map_index=-1)
    with pytest.raises(AirflowFailException, match=rf"'{kueue_env.local_queue}' is not allowed in namespace"):
        task.execute({"ti": ti})
    assert kueue_env.jobs() == []
