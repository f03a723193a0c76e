"""The tail of a sharded task: once fewer indexes are left than pods may run, Kueue hands the rest of the
quota back (reclaimable pods), a second team's Job in the cohort is admitted while the task still runs, the
task's log and result say so (with the quota released, measured), and every shard runs exactly once."""

from __future__ import annotations

import re
from typing import Any

from ..airflow_runner import AirflowHome
from ..cluster import HOLD_ANNOTATION, KueueEnv, indexed_job, is_true, wait_for
from .tail_quota_queues import add_second_team
from .test_indexed_job_queueing import returned_result, write_operator_dag

INDEX = "batch.kubernetes.io/job-completion-index"


def _release(env: KueueEnv, job_name: str, indexes: set[str]) -> None:
    for pod in env.running_pods(job_name):
        if pod["metadata"]["annotations"][INDEX] in indexes:
            env.cluster.core.patch_namespaced_pod(
                pod["metadata"]["name"],
                env.namespace,
                {"metadata": {"annotations": {HOLD_ANNOTATION: "released"}}},
            )


def _running_indexes(env: KueueEnv, job_name: str) -> set[str]:
    return {p["metadata"]["annotations"][INDEX] for p in env.running_pods(job_name)}


def test_a_second_teams_job_gets_the_tails_quota_while_the_task_still_runs(
    kueue_env_factory: Any, airflow_home: AirflowHome
) -> None:
    env = kueue_env_factory(cpu="4", memory="64Gi")
    add_second_team(env)
    write_operator_dag(airflow_home, "tail_quota", env, completions=8, parallelism=4, hold=True)
    background = airflow_home.start_dag("tail_quota")
    try:
        job = wait_for("the task's Job", lambda: next(iter(env.jobs()), None), timeout=240)
        name = job.metadata.name
        wait_for("4 pods running", lambda: _running_indexes(env, name) == {"0", "1", "2", "3"}, timeout=120)
        # Team B needs 2 CPUs; the task holds all 4 of the cohort.
        other = env.create_job(indexed_job("team-b", "team-b", completions=2, cpu="1", run_duration="1s"))
        _release(env, name, {"0", "1", "2", "3"})
        wait_for(
            "indexes 4-7 running", lambda: _running_indexes(env, name) == {"4", "5", "6", "7"}, timeout=120
        )
        assert not is_true(env.workload(other), "Admitted"), "no quota for team B while 4 indexes are left"
        _release(env, name, {"4", "5"})
        # 2 indexes left for 4 pods: Kueue reclaims 2 pods' quota; team B is admitted, the task still running.
        wait_for("team B admitted", lambda: is_true(env.workload(other), "Admitted"), timeout=120)
        assert _running_indexes(env, name) == {"6", "7"}
        wait_for(
            "the hand-back in the task log",
            lambda: re.search(r"running 6/8 done.*quota of 2 pod\(s\) handed back", background.output()),
            timeout=120,
        )
        env.release_until_finished(name)
        run = background.wait(timeout=300)
    finally:
        background.kill()
    assert run.succeeded, run.output[-6000:]
    result = returned_result(run)
    assert result["completed_indexes"] == "0-7"
    # 2 pods' quota was back from team B's admission until the end: a measured figure, at 1 CPU per pod.
    assert result["quota_released_pod_seconds"] > 0, result
    assert result["quota_released_cpu_seconds"] == result["quota_released_pod_seconds"], result
    assert re.search(r"Kueue released [0-9.]+ CPU-seconds, [0-9.]+ pod-seconds of quota", run.output)
    per_index = [p["metadata"]["annotations"][INDEX] for p in env.pods(name)]
    assert sorted(per_index) == [str(i) for i in range(8)], "every shard exactly once"
    wait_for("team B complete", lambda: is_true(env.job("team-b"), "Complete"), timeout=120)
