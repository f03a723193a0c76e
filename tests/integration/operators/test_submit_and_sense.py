"""``wait_for_completion=False`` and ``KueueJobSensor`` on the real cluster, through ``airflow dags test``
(the sensor defers: its trigger runs inline, on the same shared watch as the operator's)."""

from __future__ import annotations

import re
from typing import Any

from ..airflow_runner import AirflowHome, DagRun
from .test_indexed_job_queueing import returned_result

SUBMIT_AND_SENSE_DAG = """
from datetime import datetime
from airflow.sdk import DAG, task
from airflow_kueue_provider.operators.indexed_job import KueueIndexedJobOperator
from airflow_kueue_provider.operators.kueue_job_sensor import KueueJobSensor

with DAG({dag_id!r}, schedule=None, start_date=datetime(2026, 1, 1), catchup=False) as dag:
    submit = KueueIndexedJobOperator(
        task_id="submit", namespace={namespace!r}, queue_name={queue!r}, image="example.invalid/shard:1",
        completions={completions}, wait_for_completion=False,
        resources={{"requests": {{"cpu": "250m", "memory": "256Mi"}}}},
        annotations={annotations!r}, {extra}
    )
    sense = KueueJobSensor(task_id="sense", submit_task_id="submit")
{between}
"""

REPLACE_WITH_NAMESAKE = """
    @task
    def replace(ti=None):
        # What a tenant could do between the two tasks: delete the Job and make another of the same name.
        import os, time
        from kubernetes import client, config
        record = ti.xcom_pull(task_ids="submit")
        batch = client.BatchV1Api(config.new_client_from_config(config_file=os.environ["KUBECONFIG"]))
        ns, name = record["namespace"], record["name"]
        batch.delete_namespaced_job(name, ns, propagation_policy="Background")
        while any(j.metadata.name == name for j in batch.list_namespaced_job(ns).items):
            time.sleep(0.2)
        container = {"name": "main", "image": "example.invalid/other:1"}
        spec = {"restartPolicy": "Never", "containers": [container]}
        body = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "namespace": ns},
                 "spec": {"suspend": True, "template": {"spec": spec}}}
        batch.create_namespaced_job(ns, body)

    submit >> replace() >> sense
"""


def _write(airflow_home: AirflowHome, dag_id: str, env: Any, **kwargs: Any) -> None:
    between = kwargs.pop("between", "    submit >> sense")
    annotations = {"kwok.airflow-kueue.io/run-duration": "2s", **kwargs.pop("annotations", {})}
    airflow_home.write_dag(
        dag_id,
        SUBMIT_AND_SENSE_DAG.format(
            dag_id=dag_id,
            namespace=env.namespace,
            queue=env.local_queue,
            annotations=annotations,
            between=between,
            completions=kwargs.pop("completions", 3),
            extra=kwargs.pop("extra", ""),
        ),
    )


def _sensed_result(run: DagRun) -> dict[str, Any]:
    match = re.search(r"not waiting \(wait_for_completion=False\)", run.output)
    assert match, run.output[-6000:]
    return returned_result(run)


def test_submit_returns_at_once_and_the_sensor_waits_for_the_job(
    kueue_env: Any, airflow_home: AirflowHome
) -> None:
    _write(airflow_home, "submit_then_sense", kueue_env, completions=3)
    run = airflow_home.test_dag("submit_then_sense")
    assert run.succeeded, run.output[-6000:]
    # The submit task succeeded before the Job finished: its record names the Job by uid, and the sensor
    # logged the Job's progress and its success.
    (job,) = kueue_env.jobs()
    assert f"uid={job.metadata.uid!r}" in run.output or job.metadata.uid in run.output, run.output[-6000:]
    assert re.search(r"following Job \S+/\S+ \(uid [0-9a-f-]+\) submitted by submit", run.output)
    result = _sensed_result(run)
    assert result["completed_indexes"] == "0-2" and result["succeeded"] == 3, result
    assert run.output.index("not waiting") < run.output.index("completed all 3 indexes")


def test_the_sensor_fails_as_the_operator_would_by_max_failed_indexes(
    kueue_env: Any, airflow_home: AirflowHome
) -> None:
    fail = {"kwok.airflow-kueue.io/fail-indexes": "1,2", "kwok.airflow-kueue.io/fail-exit-code": "3"}
    extra = "backoff_limit_per_index=0, max_failed_indexes={},"
    _write(airflow_home, "sense_strict", kueue_env, annotations=fail, extra=extra.format(1))
    _write(airflow_home, "sense_tolerant", kueue_env, annotations=fail, extra=extra.format(2))
    strict = airflow_home.test_dag("sense_strict")
    assert not strict.succeeded
    assert re.search(r"KueueTaskFailed: failed: .*1,2|failed indexes?.*1,2", strict.output), strict.output[
        -6000:
    ]
    tolerant = airflow_home.test_dag("sense_tolerant")
    assert tolerant.succeeded, tolerant.output[-6000:]
    assert _sensed_result(tolerant)["failed_indexes"] == "1,2"


def test_the_sensor_binds_by_uid_and_refuses_a_namesake(kueue_env: Any, airflow_home: AirflowHome) -> None:
    _write(
        airflow_home,
        "sense_namesake",
        kueue_env,
        annotations={"kwok.airflow-kueue.io/run-duration": "120s"},
        between=REPLACE_WITH_NAMESAKE,
    )
    run = airflow_home.test_dag("sense_namesake")
    assert not run.succeeded
    assert re.search(
        r"submitted is now another object \(uid [0-9a-f-]+\); nothing to wait for", run.output
    ), run.output[-6000:]
    (job,) = kueue_env.jobs()
    assert job.spec.suspend, "the namesake is left alone"
