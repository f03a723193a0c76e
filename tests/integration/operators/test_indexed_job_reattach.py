"""No task try ever makes two Jobs: a dead worker's rerun and a cleared task reattach instead."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from airflow_kueue_provider.operators.indexed_job import KueueIndexedJobOperator

from ..airflow_runner import AirflowHome
from ..cluster import KueueEnv, is_true, wait_for
from .test_indexed_job_queueing import returned_result, write_operator_dag

RUN_AFTER = "2026-11-30T02:00:00+00:00"


def _jobs(env: KueueEnv) -> list[Any]:
    return env.cluster.batch.list_namespaced_job(env.namespace).items


def test_worker_killed_after_submit_then_rerun_reattaches_to_the_same_job(
    kueue_env: KueueEnv, airflow_home: AirflowHome
) -> None:
    write_operator_dag(airflow_home, "worker_dies", kueue_env, completions=3, hold=True)
    first = airflow_home.start_dag("worker_dies", RUN_AFTER)
    try:
        job = wait_for("the Job", lambda: _jobs(kueue_env), timeout=240)[0]
    finally:
        first.kill()  # the worker dies with the task deferred; the Job keeps running
    assert not is_true(kueue_env.job(job.metadata.name), "Complete")

    rerun = airflow_home.start_dag("worker_dies", RUN_AFTER)
    try:
        # The Job's pods are held until the rerun has found the Job while it still runs.
        wait_for("the reattach", lambda: "reattached to Job" in rerun.output(), timeout=240)
        kueue_env.release_until_finished(job.metadata.name)
        run = rerun.wait(timeout=300)
    finally:
        rerun.kill()

    assert run.succeeded, run.output[-4000:]
    assert f"reattached to Job {kueue_env.namespace}/{job.metadata.name}" in run.output
    assert [j.metadata.name for j in _jobs(kueue_env)] == [job.metadata.name]
    assert returned_result(run)["completed_indexes"] == "0-2"


def test_cleared_task_try_2_reattaches_to_the_completed_job_without_rerunning(kueue_env: KueueEnv) -> None:
    params: dict[str, Any] = {
        "namespace": kueue_env.namespace,
        "queue_name": kueue_env.local_queue,
        "image": "example.invalid/shard:1",
        "completions": 2,
        "deferrable": False,
    }

    def run(try_number: int) -> dict[str, Any]:
        ti = SimpleNamespace(
            dag_id="cleared",
            task_id="shards",
            run_id="scheduled__2026-11-30",
            try_number=try_number,
            map_index=-1,
        )
        return KueueIndexedJobOperator(task_id="shards", **params).execute({"ti": ti})  # type: ignore[arg-type]

    first = run(1)
    jobs_after_first = [j.metadata.name for j in _jobs(kueue_env)]
    second = run(2)

    assert [j.metadata.name for j in _jobs(kueue_env)] == jobs_after_first == [first["job_name"]]
    assert second == first
