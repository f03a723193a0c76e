"""30 mapped tasks through a ClusterQueue that fits 5 of their Jobs at once, on a real deployment."""

from __future__ import annotations

from typing import Any

import pytest

from ..deployment import AirflowDeployment
from .scenarios import (
    Stopwatch,
    assert_never_blocked,
    assert_one_job_per_task,
    assert_results,
    most_at_once,
    start_mapped_run,
    wait_for_success,
)

# After the parallel pass (quiet): Airflow's blocked-thread watchdog, asserted on, measures wall-clock time.
pytestmark = pytest.mark.quiet

TASKS = 30  # six rounds of the queue's 5 Jobs (50 until 2026-12-03: the same check, 35 s more of CI)
JOBS_AT_ONCE = 5


def test_mapped_tasks_share_a_queue_that_fits_five_jobs(
    deployment: AirflowDeployment, kueue_env_factory: Any
) -> None:
    # Each Job asks for 1 CPU; the ClusterQueue has 5.
    env = kueue_env_factory(cpu=str(JOBS_AT_ONCE), memory="64Gi")
    watch = Stopwatch()
    dag_id = "mapped_quota"
    run_id = start_mapped_run(deployment, dag_id, env, TASKS, cpu="1", run_duration="3s")
    watch.lap("DAG parsed and run triggered")

    wait_for_success(deployment, dag_id, run_id, timeout=900)
    watch.lap(f"{TASKS} mapped tasks succeeded")

    jobs = assert_one_job_per_task(env, dag_id, run_id, TASKS)
    results = assert_results(deployment, dag_id, run_id, jobs)
    # The quota made Jobs wait their turn, and never let more than it holds run at once.
    assert any(r["queued_seconds"] > 0 for r in results), [r["queued_seconds"] for r in results]
    assert most_at_once(jobs) <= JOBS_AT_ONCE
    assert {r["cluster_queue"] for r in results} == {env.cluster_queue}
    assert_never_blocked(deployment, dag_id)
