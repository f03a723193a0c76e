"""``KueueIndexedJobOperator`` against a MultiKueue ClusterQueue, unchanged: the main cluster is the manager,
two worker clusters of the bed run the pods (``python -m devcluster multikueue up``). The task follows the
Job and Workload on the manager (Kueue copies the worker's Job status back, per index), and names the worker
cluster in its log and result."""

from __future__ import annotations

from typing import Any

import pytest
from airflow.exceptions import TaskDeferred

from airflow_kueue_provider.airflow_compat import AirflowFailException
from airflow_kueue_provider.operators.jobset import KueueJobSetOperator, KueueReplicatedJob

from ..airflow_runner import AirflowHome
from ..cluster import HOLD, KueueEnv, indexed_job, is_true, wait_for
from ..conftest import MultiKueueEnv
from .test_indexed_job_queueing import returned_result, write_operator_dag
from .test_jobset import _jobsets
from .test_shared_cluster_safety import _operator, _ti

PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
REQUESTS = {"requests": {"cpu": "1", "memory": "1Gi"}}


def _run_to_the_end(worker: KueueEnv, manager: KueueEnv, name: str) -> None:
    """Release the task's held pods on ``worker`` wave after wave until the manager's Job has finished
    (MultiKueue deletes the worker's copy as soon as it finishes, so the copy's own end is not waited for)."""

    def finished() -> bool:
        worker.release(name)
        return is_true(manager.job(name), "Complete") or is_true(manager.job(name), "Failed")

    wait_for(f"Job {name} finished on the manager", finished, timeout=180, interval=0.5)


def _the_tasks_job(mk: MultiKueueEnv) -> Any:
    return wait_for("the task's Job on the manager", lambda: next(iter(mk.manager.jobs()), None), timeout=240)


def _saturate(worker: KueueEnv, cpu: str) -> dict[str, Any]:
    blocker = worker.create_job(indexed_job("blocker", worker.local_queue, completions=1, cpu=cpu, hold=True))
    wait_for("the blocker admitted on its worker", lambda: is_true(worker.workload(blocker), "Admitted"))
    return blocker


def test_a_task_on_a_multikueue_queue_runs_on_the_free_worker_and_names_it(
    multikueue_env_factory: Any, airflow_home: AirflowHome
) -> None:
    mk: MultiKueueEnv = multikueue_env_factory(worker_cpu=["2", "8"])
    busy, free = mk.workers
    _saturate(busy, "2")
    write_operator_dag(airflow_home, "mk_free_worker", mk.manager, completions=6, parallelism=3, hold=True)
    background = airflow_home.start_dag("mk_free_worker")
    try:
        job = _the_tasks_job(mk)
        name = job.metadata.name
        # Kueue took it over on the manager (no pod of it runs there) and dispatched it to the free worker.
        assert job.spec.managed_by == "kueue.x-k8s.io/multikueue"
        wait_for("3 pods running on the free worker", lambda: len(free.running_pods(name)) == 3, timeout=120)
        assert mk.manager.pods(name) == [] and busy.job(name) is None
        _run_to_the_end(free, mk.manager, name)
        run = background.wait(timeout=300)
    finally:
        background.kill()
    assert run.succeeded, run.output[-6000:]
    result = returned_result(run)
    assert result["worker_cluster"] == "worker-2", result
    assert result["completed_indexes"] == "0-5" and result["failed"] == 0, result
    assert "on worker cluster worker-2" in run.output, run.output[-6000:]


def test_preempted_on_its_worker_the_task_is_dispatched_again_and_succeeds(
    multikueue_env_factory: Any, airflow_home: AirflowHome
) -> None:
    mk: MultiKueueEnv = multikueue_env_factory(
        worker_cpu=["4", "4"], preemption={"withinClusterQueue": "LowerPriority"}
    )
    first, second = mk.workers
    blocker = _saturate(first, "4")
    urgent = second.priority_class("urgent", 1000)
    write_operator_dag(
        airflow_home, "mk_preempted", mk.manager, completions=4, parallelism=2, cpu="2", hold=True
    )
    background = airflow_home.start_dag("mk_preempted")
    try:
        job = _the_tasks_job(mk)
        name = job.metadata.name
        wait_for("2 pods running on worker-2", lambda: len(second.running_pods(name)) == 2, timeout=120)
        # A more urgent Job on worker-2 takes all its quota (and keeps it): Kueue there preempts the task's
        # copy, so worker-1 is the only place the task can run again.
        second.create_job(
            indexed_job(
                "urgent",
                second.local_queue,
                completions=1,
                cpu="4",
                labels={PRIORITY_LABEL: urgent},
                hold=True,
            )
        )
        wait_for("the task's copy evicted on worker-2", lambda: not second.running_pods(name), timeout=120)
        # The manager puts the Workload back in its queue; once worker-1 has room, it runs there.
        first.release(blocker["metadata"]["name"])
        wait_for(
            "the task's pods on worker-1",
            lambda: len(first.running_pods(name)) == 2,
            timeout=180,
            explain=lambda: (mk.manager.workload(mk.manager.job(name) or {}) or {}).get("status"),
        )
        _run_to_the_end(first, mk.manager, name)
        run = background.wait(timeout=300)
    finally:
        background.kill()
    assert run.succeeded, run.output[-6000:]
    result = returned_result(run)
    assert result["worker_cluster"] == "worker-1" and result["completed_indexes"] == "0-3", result
    assert result["evictions"] >= 1, result
    assert "evicted" in run.output or "requeued" in run.output, run.output[-6000:]


def test_a_restarted_try_reattaches_and_on_kill_deletes_the_job_and_its_copy_on_the_worker(
    multikueue_env_factory: Any,
) -> None:
    mk: MultiKueueEnv = multikueue_env_factory(worker_cpu=["8", "8"])
    running = _operator(mk.manager, annotations=HOLD, deferrable=True, resources=REQUESTS)
    with pytest.raises(TaskDeferred):
        running.execute({"ti": _ti("mk-kill")})  # type: ignore[arg-type]
    name = running._name
    assert name
    worker = wait_for(
        "the task's pods running on a worker",
        lambda: next((w for w in mk.workers if len(w.running_pods(name)) == 2), None),
        timeout=120,
        explain=lambda: (
            (mk.manager.workload(mk.manager.job(name) or {}) or {}).get("status"),
            [(w.job(name) or {}).get("status") for w in mk.workers],
        ),
    )
    # A second start of the same try (a worker that lost the task) reattaches to the same Job.
    again = _operator(mk.manager, annotations=HOLD, deferrable=True, resources=REQUESTS)
    with pytest.raises(TaskDeferred):
        again.execute({"ti": _ti("mk-kill")})  # type: ignore[arg-type]
    assert again._name == name and [j.metadata.name for j in mk.manager.jobs()] == [name]
    running.on_kill()
    wait_for("the manager's Job deleted", lambda: mk.manager.job(name) is None, timeout=60)
    wait_for("the worker's copy and its pods deleted", lambda: worker.job(name) is None, timeout=120)
    wait_for("no pod left on the worker", lambda: worker.pods(name) == [], timeout=120)


def test_a_job_that_requests_nothing_fails_naming_the_fix_instead_of_waiting_forever(
    multikueue_env_factory: Any,
) -> None:
    """Kueue admits it on the manager with no flavor, so MultiKueue's check does not apply and no worker
    ever runs it: the task fails at once and says to set resource requests."""
    mk: MultiKueueEnv = multikueue_env_factory()
    with pytest.raises(Exception, match="without being dispatched to a worker cluster") as failure:
        _operator(mk.manager).execute({"ti": _ti("mk-no-requests")})  # type: ignore[arg-type]
    assert "resources={'requests'" in str(failure.value)
    wait_for("the undispatched Job deleted", lambda: mk.manager.jobs() == [], timeout=60)


def test_a_jobset_task_on_a_multikueue_queue_is_refused_before_anything_is_created(
    multikueue_env_factory: Any,
) -> None:
    """Kueue would dispatch the JobSet to a worker cluster, where its child Jobs run, while the task follows
    the child Jobs on the manager: the operator says so and creates nothing (a dry run shows Kueue's
    ``spec.managedBy``)."""
    mk: MultiKueueEnv = multikueue_env_factory()
    op = KueueJobSetOperator(
        task_id="gang",
        namespace=mk.manager.namespace,
        queue_name=mk.manager.local_queue,
        replicated_jobs=[
            KueueReplicatedJob("workers", image="example.invalid/w:1", completions=2, resources=REQUESTS)
        ],
        deferrable=False,
    )
    with pytest.raises(AirflowFailException, match="dispatches through MultiKueue") as refused:
        op.execute({"ti": _ti("mk-jobset")})  # type: ignore[arg-type]
    assert "Nothing was created" in str(refused.value) and "KueueIndexedJobOperator" in str(refused.value)
    assert _jobsets(mk.manager) == [] and mk.manager.jobs() == []
