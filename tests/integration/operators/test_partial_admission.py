"""``min_parallelism``: Kueue's partial admission starts a Job that does not fit whole with what fits."""

from __future__ import annotations

from typing import Any

from ..airflow_runner import AirflowHome
from ..cluster import indexed_job, is_true, wait_for
from .test_indexed_job_queueing import returned_result, write_operator_dag


def test_a_job_too_big_for_the_free_quota_starts_with_what_fits_and_finishes(
    kueue_env_factory: Any, airflow_home: AirflowHome
) -> None:
    env = kueue_env_factory(cpu="4", memory="16Gi")
    other = env.create_job(indexed_job("other", env.local_queue, completions=1, cpu="1", hold=True))
    wait_for("the other Job admitted", lambda: is_true(env.workload(other), "Admitted"))
    # 6 pods of 1 CPU do not fit the 3 CPUs left; 2 or more may start.
    write_operator_dag(
        airflow_home, "partial", env, completions=6, parallelism=6, cpu="1", extra="min_parallelism=2,"
    )
    run = airflow_home.test_dag("partial", timeout=300)

    assert run.succeeded, run.output[-6000:]
    assert "3 of 6 pods: partial admission" in run.output, run.output[-6000:]
    result = returned_result(run)
    assert result["admitted_parallelism"] == 3 and result["completed_indexes"] == "0-5", result
    (ours,) = [j for j in env.jobs() if j.metadata.name != "other"]
    assert ours.metadata.annotations["kueue.x-k8s.io/job-min-parallelism"] == "2"


def test_without_min_parallelism_the_same_job_waits_for_its_whole_quota(
    kueue_env_factory: Any, airflow_home: AirflowHome
) -> None:
    env = kueue_env_factory(cpu="6", memory="16Gi")  # 5 CPUs free while the other Job runs
    other = env.create_job(indexed_job("other", env.local_queue, completions=1, cpu="1", hold=True))
    wait_for("the other Job admitted", lambda: is_true(env.workload(other), "Admitted"))
    write_operator_dag(airflow_home, "whole", env, completions=6, parallelism=6, cpu="1")
    background = airflow_home.start_dag("whole")
    try:

        def no_room() -> bool:
            for job in env.jobs():
                workload = env.workload(env.job(job.metadata.name)) if job.metadata.name != "other" else None
                for cond in (workload or {}).get("status", {}).get("conditions", []):
                    if cond["type"] == "QuotaReserved" and cond["status"] == "False":
                        return True
            return False

        wait_for("our Workload found no room (Kueue tried and left it pending)", no_room, timeout=240)
        env.release("other")
        run = background.wait(timeout=300)
    finally:
        background.kill()
    assert run.succeeded, run.output[-6000:]
    assert returned_result(run)["admitted_parallelism"] == 6
