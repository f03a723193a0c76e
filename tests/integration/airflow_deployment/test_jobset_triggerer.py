"""JobSet tasks on a real deployment: the triggerer follows them through its shared namespace watch (which
starts watching JobSets when the first one defers), is SIGKILLed while they run, and a restarted one finds
the JobSets that finished meanwhile; every task succeeds with its own JobSet and a result per replicated
job."""

from __future__ import annotations

import time
from typing import Any

import pytest

from airflow_kueue_provider.kueue.jobset import JOBSET_GROUP, JOBSET_PLURAL, JOBSET_VERSION
from airflow_kueue_provider.kueue.names import MAP_INDEX_LABEL, REPLICATED_JOB_LABEL

from ..cluster import HOLD, is_true, wait_for
from ..deployment import AirflowDeployment
from .scenarios import FAST_TRIGGERER_FAILOVER, Stopwatch, wait_deferred_on_triggerers, wait_for_success

pytestmark = pytest.mark.quiet

TASKS = 4
AIRFLOW_CONFIG = FAST_TRIGGERER_FAILOVER
JOBSET_DAG = """
from datetime import datetime
from airflow.sdk import DAG
from airflow_kueue_provider.operators.jobset import KueueJobSetOperator, KueueReplicatedJob

requests = {{"requests": {{"cpu": "250m", "memory": "256Mi"}}}}
with DAG({dag_id!r}, schedule=None, start_date=datetime(2026, 1, 1), catchup=False):
    KueueJobSetOperator.partial(
        task_id="genomics", namespace={namespace!r}, queue_name={queue!r},
        replicated_jobs=[
            KueueReplicatedJob("coordinator", image="example.invalid/c:1", resources=requests,
                               annotations={held!r}),
            KueueReplicatedJob("workers", image="example.invalid/w:1", completions=4, resources=requests,
                               annotations={run!r}),
        ],
    ).expand(labels=[{{"part": str(i)}} for i in range({count})])
"""


def test_jobset_tasks_survive_a_triggerer_restart_and_report_each_replicated_job(
    deployment: AirflowDeployment, kueue_env_factory: Any
) -> None:
    env = kueue_env_factory(cpu="16", memory="64Gi")
    dag_id, watch = "jobset_triggerer", Stopwatch()
    run_1s = {"kwok.airflow-kueue.io/run-duration": "1s"}
    deployment.write_dag(
        dag_id,
        JOBSET_DAG.format(
            dag_id=dag_id,
            namespace=env.namespace,
            queue=env.local_queue,
            held={**run_1s, **HOLD},
            run=run_1s,
            count=TASKS,
        ),
    )
    deployment.rest.wait_for_dag(dag_id)
    run_id = deployment.rest.trigger(dag_id)
    wait_deferred_on_triggerers(deployment, dag_id, run_id, TASKS)

    def coordinators() -> list[dict[str, Any]]:  # the held ones; the workers run 1 s and may be counted too
        return [
            p
            for p in env.running_pods()
            if p["metadata"]["labels"].get(REPLICATED_JOB_LABEL) == "coordinator"
        ]

    wait_for(f"{TASKS} coordinators held running", lambda: len(coordinators()) >= TASKS, timeout=180)
    watch.lap(f"{TASKS} JobSet tasks deferred, their coordinators running")

    deployment.kill("triggerer-1")
    env.release()  # every coordinator finishes while no triggerer runs

    def jobsets() -> list[dict[str, Any]]:
        listed = env.cluster.custom.list_namespaced_custom_object(
            JOBSET_GROUP, JOBSET_VERSION, env.namespace, JOBSET_PLURAL
        )
        return list(listed["items"])

    def completed() -> bool:
        env.release()  # a pod made after the first release (a slow coordinator) is held too
        return all(is_true(js, "Completed") for js in jobsets())

    wait_for("every JobSet completed", completed, timeout=180)
    time.sleep(5)
    watch.lap("triggerer down; every JobSet completed meanwhile")
    deployment.start_triggerer("triggerer-1")
    wait_for_success(deployment, dag_id, run_id, timeout=600)
    watch.lap("every task succeeded")

    made = jobsets()
    by_index = {int(js["metadata"]["annotations"][MAP_INDEX_LABEL]): js for js in made}
    assert sorted(by_index) == list(range(TASKS)), "one JobSet per task"
    for map_index, jobset in by_index.items():
        result = deployment.rest.xcom(dag_id, run_id, "genomics", map_index)
        assert result["jobset_name"] == jobset["metadata"]["name"], result
        assert [(rj["name"], rj["succeeded"]) for rj in result["replicated_jobs"]] == [
            ("coordinator", 1),
            ("workers", 4),
        ], result
