"""The control plane fails under a deferred task (real DAG run): the task still ends right, with one Job."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ..airflow_runner import AirflowHome
from ..cluster import KueueEnv, wait_for
from .test_indexed_job_queueing import returned_result, write_operator_dag

REPO = Path(__file__).resolve().parents[3]


def restart(component: str) -> None:
    """SIGKILL one component and bring it back (``python -m devcluster restart``)."""
    subprocess.run([sys.executable, "-m", "devcluster", "restart", component], cwd=REPO, check=True)


@pytest.mark.serial  # every test shares the apiserver
def test_apiserver_killed_and_restarted_while_deferred_the_task_succeeds_with_one_job(
    kueue_env: KueueEnv, airflow_home: AirflowHome
) -> None:
    write_operator_dag(airflow_home, "apiserver_crash", kueue_env, completions=3, cpu="250m", hold=True)
    background = airflow_home.start_dag("apiserver_crash")
    try:
        wait_for("3 pods running", lambda: len(kueue_env.running_pods()) == 3, timeout=240)
        wait_for("the task deferred", lambda: "running 0/3 done" in background.output(), timeout=120)
        (job,) = kueue_env.jobs()
        restart("kube-apiserver")
        kueue_env.release_until_finished(job.metadata.name)
        run = background.wait(timeout=300)
    finally:
        background.kill()

    assert run.succeeded, run.output[-6000:]
    assert "watch of namespace" in run.output and "listing again" in run.output, "the hub noticed the crash"
    assert [j.metadata.name for j in kueue_env.jobs()] == [job.metadata.name]
    assert returned_result(run)["completed_indexes"] == "0-2"
