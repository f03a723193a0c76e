"""``get_logs=True`` on the bed: real shard programs on the process nodes write their logs while they run,
and the chosen index's lines reach the task log before the Job ends, masked, in both modes (deferred: the
trigger, run inline by ``airflow dags test``; blocking: the same trigger in the worker)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest

from ..airflow_runner import AirflowHome
from ..cluster import Cluster, KueueEnv, delete_kueue_env, wait_for
from ..process_node import PROCESS_NODE_LABEL, PROCESS_TOLERATIONS, process_queues

SECRET = "hunter2-log-stream"
FORGED = "import time\nfor n in range(8):\n    print('forged line', n, flush=True)\n    time.sleep(1)\n"

LOGS_DAG = """
from datetime import datetime
from airflow.sdk import DAG
try:
    from airflow.sdk.log import mask_secret
except ImportError:
    from airflow.sdk.execution_time.secrets_masker import mask_secret
from airflow_kueue_provider.operators.indexed_job import KueueIndexedJobOperator

mask_secret({secret!r})  # what Airflow knows as a secret (a connection's password, a sensitive Variable)
SHARD = (
    "import os, time\\n"
    "i = os.environ['JOB_COMPLETION_INDEX']\\n"
    "for n in range(6):\\n"
    "    print(f'shard {{i}} line {{n}} token=' + os.environ['SHARD_TOKEN'], flush=True)\\n"
    "    time.sleep(1)\\n"
)

with DAG({dag_id!r}, schedule=None, start_date=datetime(2026, 1, 1), catchup=False) as dag:
    KueueIndexedJobOperator(
        task_id="shards", namespace={namespace!r}, queue_name="lq", image="example.invalid/shard:1",
        cmds=["python", "-c", SHARD], env={{"SHARD_TOKEN": {secret!r}}}, completions=2,
        resources={{"requests": {{"cpu": "250m", "memory": "256Mi"}}}},
        get_logs=True, log_indexes="0", deferrable={deferrable},
    )
"""


@pytest.fixture
def process_env(cluster: Cluster, request: pytest.FixtureRequest) -> Iterator[KueueEnv]:
    env = process_queues(cluster, request.node.name, cpu="2")
    yield env
    delete_kueue_env(env)


@pytest.mark.parametrize("deferrable", [True, False], ids=["deferred", "blocking"])
def test_the_chosen_index_streams_into_the_task_log_while_the_job_runs_masked(
    process_env: Any, airflow_home: AirflowHome, deferrable: bool
) -> None:
    dag_id = f"log_stream_{'deferred' if deferrable else 'blocking'}"
    airflow_home.write_dag(
        dag_id,
        LOGS_DAG.format(dag_id=dag_id, namespace=process_env.namespace, secret=SECRET, deferrable=deferrable),
    )
    run = airflow_home.test_dag(dag_id)
    assert run.succeeded, run.output[-6000:]
    streamed = re.findall(r"\[index 0 \S+\] shard 0 line (\d) token=(\S+)", run.output)
    assert [n for n, _ in streamed] == [str(n) for n in range(6)], run.output[-6000:]  # each line once
    assert {token for _, token in streamed} == {"***"}, streamed  # through Airflow's masker
    assert "shard 1 line" not in run.output  # index 1 was not chosen
    # While the Job ran: the first line is in the log before the trigger saw the Job finish.
    assert run.output.index("shard 0 line 0") < run.output.index("completed all 2 indexes"), run.output[
        -6000:
    ]


def test_a_pod_that_only_carries_the_job_s_labels_is_never_streamed(
    process_env: Any, airflow_home: AirflowHome
) -> None:
    """A tenant's pod with the Job's name label and index 0 (no ownerReference to the Job) runs beside it:
    its lines never reach the task log (pods are chosen by their controller, not by a label)."""
    dag_id = "log_stream_forged"
    airflow_home.write_dag(
        dag_id,
        LOGS_DAG.format(dag_id=dag_id, namespace=process_env.namespace, secret=SECRET, deferrable=True),
    )
    background = airflow_home.start_dag(dag_id)
    try:
        (job,) = wait_for("the task's Job", process_env.jobs, timeout=240)
        forged = {
            "metadata": {
                "name": "forged-0",
                "labels": {"batch.kubernetes.io/job-name": job.metadata.name, "job-name": job.metadata.name},
                "annotations": {"batch.kubernetes.io/job-completion-index": "0"},
            },
            "spec": {
                "restartPolicy": "Never",
                "nodeSelector": dict(PROCESS_NODE_LABEL),
                "tolerations": [dict(t) for t in PROCESS_TOLERATIONS],
                "containers": [
                    {
                        "name": "main",
                        "image": "example.invalid/forged:1",
                        "command": [
                            "python",
                            "-c",
                            FORGED,
                        ],
                    }
                ],
            },
        }
        process_env.cluster.core.create_namespaced_pod(process_env.namespace, forged)
        run = background.wait(timeout=300)
    finally:
        background.kill()
    assert run.succeeded, run.output[-6000:]
    assert re.search(r"\[index 0 \S+\] shard 0 line 5", run.output), run.output[-6000:]
    assert "forged line" not in run.output
