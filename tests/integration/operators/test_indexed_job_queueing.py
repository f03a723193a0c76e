"""Operator acceptance on the real cluster, through ``airflow dags test``: queue waits and results."""

from __future__ import annotations

import json
import re
from typing import Any

from ..airflow_runner import AirflowHome, DagRun
from ..cluster import HOLD, KueueEnv, indexed_job, is_true, wait_for

OPERATOR_DAG = """
from datetime import datetime, timedelta
from airflow.sdk import DAG
from airflow_kueue_provider.operators.indexed_job import KueueIndexedJobOperator

with DAG({dag_id!r}, schedule=None, start_date=datetime(2026, 1, 1), catchup=False) as dag:
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
    hold: bool = False,
    extra: str = "",
) -> None:
    """The operator DAG; with ``hold=True`` its pods stay Running until the test releases them."""
    annotations = {**(HOLD if hold else {}), **(annotations or {})}
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
            annotations={"kwok.airflow-kueue.io/run-duration": run_duration, **annotations},
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
    blocker = env.create_job(indexed_job("blocker", env.local_queue, completions=2, cpu="2", hold=True))
    wait_for("blocker admitted", lambda: is_true(env.workload(blocker), "Admitted"))
    write_operator_dag(airflow_home, "queue_full", env, completions=2, cpu="2")

    background = airflow_home.start_dag("queue_full")
    try:
        # The blocker holds the quota until the task has reported its place in the queue, however long
        # Airflow took to start.
        wait_for(
            "the queue position in the task log",
            lambda: re.search(r"queued in lq.*\(position 1, \d+ s\)", background.output()),
            timeout=240,
        )
        env.release("blocker")
        run = background.wait(timeout=300)
    finally:
        background.kill()

    assert run.succeeded, run.output[-6000:]
    assert f"admitted to {env.cluster_queue}" in run.output
    result = returned_result(run)
    assert result["completed_indexes"] == "0,1" and result["failed"] == 0
    assert result["cluster_queue"] == env.cluster_queue
    assert result["queued_seconds"] >= 10, "it waited for the blocker to finish"
    assert is_true(env.job("blocker"), "Complete")


ANCHOR_DAG = """
from datetime import datetime
from airflow.sdk import DAG
from kubernetes.client import models as k8s
from airflow.providers.cncf.kubernetes.operators.kueue import KubernetesStartKueueJobOperator

with DAG({dag_id!r}, schedule=None, start_date=datetime(2026, 1, 1), catchup=False) as dag:
    KubernetesStartKueueJobOperator(
        task_id="anchor", name="anchor", namespace={namespace!r}, queue_name={queue!r},
        image="example.invalid/shard:1", completion_mode="Indexed", completions=2, parallelism=2,
        container_resources=k8s.V1ResourceRequirements(requests={{"cpu": "2", "memory": "1Gi"}}),
        annotations={{"kwok.airflow-kueue.io/run-duration": "1s"}},
        wait_until_job_complete=True, deferrable=True,
    )
"""


def test_cncf_anchor_fails_in_the_same_full_queue_and_leaves_its_job(
    kueue_env_factory: Any, airflow_home: AirflowHome
) -> None:
    """The comparison: apache-airflow-providers-cncf-kubernetes' Kueue operator in the scenario above."""
    env = kueue_env_factory(cpu="4", memory="16Gi")
    blocker = env.create_job(indexed_job("blocker", env.local_queue, completions=2, cpu="2", hold=True))
    wait_for("blocker admitted", lambda: is_true(env.workload(blocker), "Admitted"))
    airflow_home.write_dag(
        "anchor_queue_full",
        ANCHOR_DAG.format(dag_id="anchor_queue_full", namespace=env.namespace, queue=env.local_queue),
    )

    run = airflow_home.test_dag("anchor_queue_full")  # the blocker holds the quota throughout

    assert not run.succeeded, run.output[-4000:]
    assert "No pods running with labels" in run.output, run.output[-4000:]
    left = [j for j in env.jobs() if j.metadata.name != "blocker"]
    assert len(left) == 1, "the anchor's Job is left behind, unmonitored"
    assert left[0].spec.suspend, "... and still waits in the queue"


def test_never_admissible_job_times_out_in_the_queue_and_is_deleted(
    kueue_env_factory: Any, airflow_home: AirflowHome
) -> None:
    env = kueue_env_factory(cpu="4", memory="16Gi")
    write_operator_dag(airflow_home, "never_admitted", env, completions=1, cpu="8", extra="queue_timeout=15,")

    run = airflow_home.test_dag("never_admitted")

    assert not run.succeeded
    match = re.search(r"timeout: waited (\d+)s in queue lq", run.output)
    assert match, run.output[-4000:]
    assert 15 <= int(match.group(1)) <= 45, "fails at the timeout, not before, and not much later"
    assert "more than queue_timeout=15s" in run.output
    assert env.cluster.batch.list_namespaced_job(env.namespace).items == [] or all(
        j.metadata.deletion_timestamp for j in env.cluster.batch.list_namespaced_job(env.namespace).items
    )
