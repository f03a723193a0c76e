"""Preemption mid-run and failed indexes, through ``airflow dags test`` on the real cluster."""

from __future__ import annotations

import re
from typing import Any

from ..airflow_runner import AirflowHome
from ..cluster import indexed_job, is_true, wait_for
from .test_indexed_job_queueing import returned_result, write_operator_dag


def test_preempted_task_keeps_waiting_logs_eviction_and_requeue_and_succeeds(
    kueue_env_factory: Any, airflow_home: AirflowHome
) -> None:
    env = kueue_env_factory(cpu="4", memory="16Gi", preemption={"withinClusterQueue": "LowerPriority"})
    low, high = env.priority_class("low", 100), env.priority_class("high", 1000)
    write_operator_dag(
        airflow_home, "preempted", env, completions=2, cpu="2", hold=True, extra=f"priority_class={low!r},"
    )
    background = airflow_home.start_dag("preempted")
    try:
        wait_for("our pods running", env.running_pods, timeout=240)
        (ours,) = env.jobs()
        env.create_job(
            indexed_job(
                "urgent",
                env.local_queue,
                completions=2,
                cpu="2",
                labels={"kueue.x-k8s.io/priority-class": high},
                hold=True,
            )
        )
        # The urgent Job holds the quota until the task has logged its requeue; then both run to the end.
        wait_for("the requeue in the task log", lambda: "requeued in lq" in background.output(), timeout=120)
        env.release_until_finished("urgent")
        env.release_until_finished(ours.metadata.name)
        run = background.wait(timeout=300)
    finally:
        background.kill()

    assert run.succeeded, run.output[-6000:]
    # The trigger reads the newest state, so the evicted moment may be folded into the requeue line; that
    # line names the eviction and Kueue's preemption reason either way.
    assert "requeued in lq after eviction (Preempted: InClusterQueue" in run.output, run.output[-6000:]
    result = returned_result(run)
    assert result["evictions"] >= 1 and result["completed_indexes"] == "0,1"
    assert is_true(env.job("urgent"), "Complete")


def test_failed_indexes_against_max_failed_indexes(kueue_env: Any, airflow_home: AirflowHome) -> None:
    for limit in (1, 2):
        write_operator_dag(
            airflow_home,
            f"two_fail_limit_{limit}",
            kueue_env,
            completions=20,
            cpu="250m",
            annotations={
                "kwok.airflow-kueue.io/fail-indexes": "3,7",
                "kwok.airflow-kueue.io/fail-exit-code": "3",
            },
            extra=f"backoff_limit_per_index=0, max_failed_indexes={limit},",
        )
    strict = airflow_home.test_dag("two_fail_limit_1")
    assert not strict.succeeded
    assert re.search(r"failed indexes?.*3,7|\(3,7\)", strict.output), strict.output[-4000:]
    assert "--- index 3, last log lines ---" in strict.output

    tolerant = airflow_home.test_dag("two_fail_limit_2")
    assert tolerant.succeeded, tolerant.output[-4000:]
    result = returned_result(tolerant)
    assert result["failed_indexes"] == "3,7" and result["failed"] == 2
    assert result["succeeded"] == 18 and result["completions"] == 20
