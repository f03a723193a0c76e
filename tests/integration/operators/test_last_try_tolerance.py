"""``max_failed_indexes`` with ``retries``: a try with retries left whose indexes failed (within the limit)
fails, the retry runs only those shards again (checkpointing), and only the last try succeeds with up to the
limit failed. Through ``airflow dags test`` (retries included) on the real cluster and Azurite."""

from __future__ import annotations

from types import SimpleNamespace

from ..airflow_runner import AirflowHome
from ..cluster import KueueEnv
from .conftest import CONN_ID
from .test_indexed_job_queueing import returned_result

DAG_FILE = """
from datetime import datetime, timedelta
from airflow.sdk import DAG
from airflow_kueue_provider.operators.indexed_job import KueueIndexedJobOperator

with DAG({dag_id!r}, schedule=None, start_date=datetime(2026, 1, 1), catchup=False) as dag:
    KueueIndexedJobOperator(
        task_id="shards", namespace={namespace!r}, queue_name="lq", image="example.invalid/shard:1",
        completions=10, parallelism=10, backoff_limit_per_index=0, max_failed_indexes=2,
        retries=1, retry_delay=timedelta(seconds=1),
        resources={{"requests": {{"cpu": "250m", "memory": "256Mi"}}}},
        annotations={{
            "kwok.airflow-kueue.io/run-duration": "1s",
            "kwok.airflow-kueue.io/fail-indexes": "{{{{ {first!r} if ti.try_number == 1 else {retry!r} }}}}",
        }},
        checkpointing={{"conn_id": {conn_id!r}, "container": {container!r}}},
    )
"""


def _jobs(env: KueueEnv) -> list[int]:
    jobs = env.cluster.batch.list_namespaced_job(env.namespace).items
    return [j.spec.completions for j in sorted(jobs, key=lambda j: j.metadata.creation_timestamp)]


def test_the_retry_runs_the_failed_shards_again_and_they_succeed(
    kueue_env_factory: object, airflow_home: AirflowHome, blob: SimpleNamespace
) -> None:
    env: KueueEnv = kueue_env_factory(cpu="4", memory="8Gi")  # type: ignore[operator]
    source = DAG_FILE.format(
        dag_id="tolerate_last_ok",
        namespace=env.namespace,
        first="2,5",
        retry="",
        conn_id=CONN_ID,
        container=blob.container,
    )
    airflow_home.write_dag("tolerate_last_ok", source)

    run = airflow_home.test_dag("tolerate_last_ok", run_after="2026-12-05T02:00:00+00:00")

    assert run.succeeded, run.output[-6000:]
    assert "2 indexes failed (2,5), within max_failed_indexes=2, but try 1 has retries left" in run.output
    assert _jobs(env) == [10, 2], "the retry's Job runs the 2 failed shards only"
    result = returned_result(run)
    assert result["completed_indexes"] == "0-9" and result["failed"] == 0 and result["attempts"] == 2


def test_the_last_try_tolerates_up_to_the_limit(
    kueue_env_factory: object, airflow_home: AirflowHome, blob: SimpleNamespace
) -> None:
    env: KueueEnv = kueue_env_factory(cpu="4", memory="8Gi")  # type: ignore[operator]
    # the retry's Job runs shards 2 and 5 as its indexes 0 and 1: both fail again
    source = DAG_FILE.format(
        dag_id="tolerate_last_fail",
        namespace=env.namespace,
        first="2,5",
        retry="0,1",
        conn_id=CONN_ID,
        container=blob.container,
    )
    airflow_home.write_dag("tolerate_last_fail", source)

    run = airflow_home.test_dag("tolerate_last_fail", run_after="2026-12-05T02:00:00+00:00")

    assert run.succeeded, run.output[-6000:]
    assert "but try 1 has retries left" in run.output
    assert "but try 2 has retries left" not in run.output
    assert _jobs(env) == [10, 2]
    result = returned_result(run)
    assert result["failed"] == 2 and result["failed_indexes"] == "2,5", result
    assert result["completed_indexes"] == "0,1,3,4,6-9"
