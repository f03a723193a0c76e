"""Two triggerers share the deferred tasks; one is SIGKILLed mid-run and the other takes its triggers over."""

from __future__ import annotations

from typing import Any

import pytest

from ..cluster import wait_for
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

TASKS = 20
TRIGGERERS = 2
# Few triggers per claim, so that both triggerers get some of them as the tasks defer.
AIRFLOW_CONFIG = {**FAST_TRIGGERER_FAILOVER, "triggerer.max_trigger_to_select_per_loop": "4"}


def test_surviving_triggerer_takes_over_the_killed_ones_triggers(
    deployment: AirflowDeployment, kueue_env_factory: Any
) -> None:
    env = kueue_env_factory(cpu="64", memory="64Gi")
    dag_id, watch = "triggerer_takeover", Stopwatch()
    run_id = start_mapped_run(deployment, dag_id, env, TASKS, cpu="250m", hold=True)
    where = wait_deferred_on_triggerers(deployment, dag_id, run_id, TASKS)
    watch.lap(f"{TASKS} tasks deferred on triggerer jobs {where}")

    # Kill the triggerer running the most of our triggers (possibly all of them).
    jobs = deployment.triggerer_jobs
    victim = max(jobs, key=lambda name: where.get(jobs[name], 0))
    survivor = next(name for name in jobs if name != victim)
    orphaned = where[jobs[victim]]
    deployment.kill(victim)
    # Half of the pods finish while the victim's triggers have no triggerer yet.
    for job in sorted(j.metadata.name for j in env.jobs())[: TASKS // 2]:
        env.release_until_finished(job)

    def taken_over() -> bool:
        deployment.check_alive()
        now = deployment.trigger_assignment(dag_id)
        return set(now) <= {jobs[survivor]}  # every trigger still deferred runs on the survivor

    wait_for(f"{survivor} takes over the {orphaned} triggers of {victim}", taken_over, timeout=180)
    watch.lap(f"{survivor} took over {orphaned} triggers")

    wait_for_success(deployment, dag_id, run_id, timeout=600, release=env)
    watch.lap("every task succeeded")
    jobs_after = assert_one_job_per_task(env, dag_id, run_id, TASKS)
    assert_results(deployment, dag_id, run_id, jobs_after)
    assert_never_blocked(deployment, dag_id)
