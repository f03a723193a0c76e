"""The only triggerer SIGKILLed while its tasks are deferred, restarted 10 s later: every task succeeds, with
one Job each, including the Jobs that finished while no triggerer was running."""

from __future__ import annotations

import time
from typing import Any

import pytest

from ..cluster import is_true, wait_for
from ..deployment import AirflowDeployment
from .scenarios import (
    FAST_TRIGGERER_FAILOVER,
    Stopwatch,
    assert_never_blocked,
    assert_one_job_per_task,
    assert_results,
    start_mapped_run,
    wait_deferred_on_triggerers,
    wait_for_success,
)

# After the parallel pass (quiet): Airflow's blocked-thread watchdog, asserted on, measures wall-clock time.
pytestmark = pytest.mark.quiet

TASKS = 24
DOWN_FOR = 10.0  # seconds between the kill and the restart
AIRFLOW_CONFIG = FAST_TRIGGERER_FAILOVER


def test_triggerer_killed_while_tasks_are_deferred_then_restarted(
    deployment: AirflowDeployment, kueue_env_factory: Any
) -> None:
    env = kueue_env_factory(cpu="64", memory="64Gi")
    dag_id, watch = "triggerer_restart", Stopwatch()
    run_id = start_mapped_run(deployment, dag_id, env, TASKS, cpu="250m", hold=True)
    wait_deferred_on_triggerers(deployment, dag_id, run_id, TASKS)
    wait_for(f"{TASKS} pods held running", lambda: len(env.running_pods()) == TASKS, timeout=180)
    watch.lap(f"{TASKS} tasks deferred, their pods running")

    deployment.kill("triggerer-1")
    killed_at = time.monotonic()
    # While no triggerer runs, half of the Jobs finish: their completions must not be missed.
    jobs = sorted(j.metadata.name for j in env.jobs())
    finished_while_down = jobs[: TASKS // 2]
    for name in finished_while_down:
        env.release_until_finished(name)
    assert all(is_true(env.job(name), "Complete") for name in finished_while_down)
    time.sleep(max(0.0, DOWN_FOR - (time.monotonic() - killed_at)))
    watch.lap("triggerer down; half the Jobs finished meanwhile")

    deployment.start_triggerer("triggerer-1")
    watch.lap("triggerer restarted")
    # The restarted triggerer picks the orphaned triggers up (once the dead one's heartbeat is stale); the
    # Jobs that finished meanwhile end their tasks at once, the others when released.
    wait_for_success(deployment, dag_id, run_id, timeout=600, release=env)
    watch.lap("every task succeeded")

    jobs_after = assert_one_job_per_task(env, dag_id, run_id, TASKS)
    assert_results(deployment, dag_id, run_id, jobs_after)
    assert_never_blocked(deployment, dag_id)
