"""``KueueJobSetOperator`` on the bed's JobSet controller and Kueue: a coordinator and 8 indexed workers wait
as one Workload, are admitted together and succeed, with per-replicated-job progress in the log and result;
a failing worker index fails the task and is named by its Job; a restarted try reattaches; pods that cannot
start fail the task after start_timeout; on_kill and a bad input behave as for the Indexed Job operator."""

from __future__ import annotations

import re
import threading
from types import SimpleNamespace
from typing import Any

import pytest

from airflow_kueue_provider.airflow_compat import AirflowFailException
from airflow_kueue_provider.hooks.identity_key import identity_seal
from airflow_kueue_provider.hooks.kind_client import KindClient
from airflow_kueue_provider.kueue.identity.airflow_identity import AirflowIdentity
from airflow_kueue_provider.kueue.jobset import JOBSET_GROUP, JOBSET_PLURAL, JOBSET_VERSION
from airflow_kueue_provider.kueue.kinds.jobset import JOBSET
from airflow_kueue_provider.operators.jobset import KueueJobSetOperator, KueueReplicatedJob

from ..airflow_runner import AirflowHome
from ..cluster import HOLD, KueueEnv, indexed_job, is_true, wait_for
from .test_indexed_job_queueing import returned_result

RUN_1S = {"kwok.airflow-kueue.io/run-duration": "1s"}
REQUESTS = {"requests": {"cpu": "1", "memory": "1Gi"}}

JOBSET_DAG = """
from datetime import datetime
from airflow.sdk import DAG
from airflow_kueue_provider.operators.jobset import KueueJobSetOperator, KueueReplicatedJob

with DAG({dag_id!r}, schedule=None, start_date=datetime(2026, 1, 1), catchup=False) as dag:
    KueueJobSetOperator(
        task_id="genomics",
        namespace={namespace!r},
        queue_name={queue!r},
        spot=True,
        replicated_jobs=[
            KueueReplicatedJob(
                name="coordinator", image="example.invalid/coordinator:1", resources={requests!r},
                annotations={run!r},
            ),
            KueueReplicatedJob(
                name="workers", image="example.invalid/shard:1", completions=8, parallelism=8,
                resources={requests!r}, backoff_limit_per_index=0, annotations={workers!r},
            ),
        ],
    )
"""


def _write_dag(airflow_home: AirflowHome, dag_id: str, env: KueueEnv, workers: dict[str, str]) -> None:
    airflow_home.write_dag(
        dag_id,
        JOBSET_DAG.format(
            dag_id=dag_id,
            namespace=env.namespace,
            queue=env.local_queue,
            requests=REQUESTS,
            run=RUN_1S,
            workers={**RUN_1S, **workers},
        ),
    )


def _jobsets(env: KueueEnv) -> list[dict[str, Any]]:
    listed = env.cluster.custom.list_namespaced_custom_object(
        JOBSET_GROUP, JOBSET_VERSION, env.namespace, JOBSET_PLURAL
    )
    return list(listed["items"])


def test_a_coordinator_and_8_workers_wait_as_one_are_admitted_together_and_succeed(
    kueue_env_factory: Any, airflow_home: AirflowHome
) -> None:
    env = kueue_env_factory(cpu="9", memory="64Gi")
    blocker = env.create_job(indexed_job("blocker", env.local_queue, completions=1, cpu="1", hold=True))
    wait_for("the blocker admitted", lambda: is_true(env.workload(blocker), "Admitted"))
    _write_dag(airflow_home, "jobset_ok", env, {})
    background = airflow_home.start_dag("jobset_ok")
    try:
        # 9 CPUs for 1 + 8 pods, 8 free: the whole JobSet waits; none of its pods runs meanwhile.
        wait_for(
            "the JobSet queued in the task log",
            lambda: re.search(r"genomics-\w+: queued in lq", background.output()),
            timeout=240,
        )
        (jobset,) = _jobsets(env)
        name = jobset["metadata"]["name"]
        assert jobset["spec"]["suspend"] is True
        assert [p["metadata"]["name"] for p in env.running_pods()] == [
            env.pods("blocker")[0]["metadata"]["name"]
        ]
        env.release("blocker")
        run = background.wait(timeout=300)
    finally:
        background.kill()
    assert run.succeeded, run.output[-6000:]
    result = returned_result(run)
    assert result["jobset_name"] == name and result["evictions"] == 0, result
    assert result["cluster_queue"] == env.cluster_queue and result["queued_seconds"] > 0, result
    assert [
        (rj["name"], rj["completions"], rj["succeeded"], rj["failed_indexes"])
        for rj in result["replicated_jobs"]
    ] == [
        ("coordinator", 1, 1, ""),
        ("workers", 8, 8, ""),
    ], result
    assert f"admitted to {env.cluster_queue}" in run.output, run.output[-6000:]
    assert "coordinator 1/1 done, 0 active; workers 8/8 done, 0 active" in run.output, run.output[-6000:]
    # Priced per replicated job, over the task instance's one JobSet.
    (figures,) = result["attempt_figures"]
    assert figures["job_name"] == name and figures["pods"] == 9, result
    assert result["cost_basis"].startswith("(1 coordinator pod of "), result
    assert result["estimated_cost_usd"] > 0 and result["running_seconds"] == figures["running_seconds"]


def test_a_failing_worker_index_fails_the_task_and_is_named_by_its_job(
    kueue_env_factory: Any, airflow_home: AirflowHome
) -> None:
    env = kueue_env_factory(cpu="9", memory="64Gi")
    _write_dag(airflow_home, "jobset_fail", env, {"kwok.airflow-kueue.io/fail-indexes": "3"})
    run = airflow_home.test_dag("jobset_fail", timeout=400)
    assert not run.succeeded, run.output[-6000:]
    (jobset,) = _jobsets(env)
    name = jobset["metadata"]["name"]
    assert f"failed indexes: {name}-workers-0: 3" in run.output, run.output[-6000:]
    assert f"--- {name}-workers-0 index 3, last log lines ---" in run.output, run.output[-6000:]
    assert is_true(jobset, "Failed")  # finished: kept as the run's record (ttlSecondsAfterFinished)


def _ti(try_number: int = 1) -> SimpleNamespace:
    return SimpleNamespace(dag_id="js", task_id="genomics", run_id="r1", try_number=try_number, map_index=-1)


def _operator(env: KueueEnv, queue_name: str | None = None) -> KueueJobSetOperator:
    return KueueJobSetOperator(
        task_id="genomics",
        namespace=env.namespace,
        queue_name=queue_name or env.local_queue,
        deferrable=False,
        replicated_jobs=[
            KueueReplicatedJob(
                "coordinator", image="example.invalid/c:1", resources=REQUESTS, annotations=HOLD
            ),
            {"name": "workers", "image": "example.invalid/w:1", "completions": 2, "resources": REQUESTS},
        ],
    )


def test_a_restarted_try_reattaches_and_on_kill_deletes_the_jobset_and_its_pods(kueue_env: KueueEnv) -> None:
    op = _operator(kueue_env)
    # The try's JobSet exists (a worker died after creating it); the coordinator's pod is held Running.
    identity = AirflowIdentity("js", "genomics", "r1", 1)
    manifest = op.build_manifest(identity)
    meta = manifest["metadata"]  # sealed, as the dead worker's create was (docs/tenancy.md)
    seal = identity_seal().annotations("JobSet", kueue_env.namespace, meta["name"], identity)
    KindClient(JOBSET, "kubernetes_default").seal_manifest(manifest, seal)
    created = kueue_env.cluster.custom.create_namespaced_custom_object(
        JOBSET_GROUP, JOBSET_VERSION, kueue_env.namespace, JOBSET_PLURAL, manifest
    )
    name = created["metadata"]["name"]
    wait_for("the coordinator running", lambda: kueue_env.running_pods(f"{name}-coordinator-0"), timeout=120)
    errors: list[BaseException] = []

    def run() -> None:
        try:
            op.execute({"ti": _ti()})  # type: ignore[arg-type]
        except BaseException as exc:  # the test reads it
            errors.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    wait_for("the operator reattached", lambda: op._name == name, timeout=60)
    assert len(_jobsets(kueue_env)) == 1
    op.on_kill()
    wait_for("the JobSet gone", lambda: not _jobsets(kueue_env), timeout=60)
    wait_for(
        "its pods gone",
        lambda: not kueue_env.cluster.core.list_namespaced_pod(kueue_env.namespace).items,
        timeout=120,
    )
    thread.join(timeout=60)
    assert errors and "deleted before it finished" in str(errors[0]), errors


def test_workers_whose_image_never_pulls_fail_the_task_within_start_timeout_and_the_jobset_is_deleted(
    kueue_env: KueueEnv,
) -> None:
    """Admitted, the coordinator runs but the workers' image never pulls: without start_timeout the JobSet
    would hold its quota for ever."""
    op = KueueJobSetOperator(
        task_id="genomics",
        namespace=kueue_env.namespace,
        queue_name=kueue_env.local_queue,
        deferrable=False,
        start_timeout=15,
        replicated_jobs=[
            KueueReplicatedJob(
                "coordinator", image="example.invalid/c:1", resources=REQUESTS, annotations=HOLD
            ),
            KueueReplicatedJob(
                "workers",
                image="example.invalid/w:1",
                completions=2,
                resources=REQUESTS,
                annotations={"kwok.airflow-kueue.io/image-pull": "fail"},
            ),
        ],
    )
    with pytest.raises(Exception) as failure:
        op.execute({"ti": _ti()})  # type: ignore[arg-type]
    message = str(failure.value)
    match = re.search(
        r"was admitted (\d+)s ago but its pods cannot start \(Job (\S+), pod \S+: (\w+)", message
    )
    assert match, message
    assert 15 <= int(match.group(1)) <= 75, message
    assert match.group(2).endswith("-workers-0") and match.group(3) in ("ImagePullBackOff", "ErrImagePull")
    assert "deleted to release its quota (start_timeout=15s)" in message
    wait_for("the JobSet gone", lambda: not _jobsets(kueue_env), timeout=60)


def test_bad_input_fails_early_and_creates_nothing(kueue_env: KueueEnv) -> None:
    with pytest.raises(AirflowFailException, match="replicated job name 'workers' is used twice"):
        KueueJobSetOperator(
            task_id="t",
            namespace=kueue_env.namespace,
            queue_name=kueue_env.local_queue,
            replicated_jobs=[
                KueueReplicatedJob("workers", image="x:1"),
                KueueReplicatedJob("workers", image="x:1"),
            ],
        )
    with pytest.raises(AirflowFailException, match="start_timeout must be a positive number of seconds"):
        KueueJobSetOperator(
            task_id="t",
            namespace=kueue_env.namespace,
            queue_name=kueue_env.local_queue,
            start_timeout=0,
            replicated_jobs=[KueueReplicatedJob("workers", image="x:1")],
        )
    with pytest.raises(AirflowFailException, match="LocalQueue 'nope' does not exist"):
        _operator(kueue_env, queue_name="nope").execute({"ti": _ti()})  # type: ignore[arg-type]
    assert _jobsets(kueue_env) == []


def test_a_finished_coordinator_hands_its_quota_back_and_the_result_measures_it(
    kueue_env_factory: Any,
) -> None:
    """Kueue reclaims a replicated job's finished replicas (ReclaimablePods) while the rest of the JobSet
    runs: the trigger meters it as it does for a Job's tail, and the result says how much."""
    from .test_job_kinds import _context, _InThread

    env = kueue_env_factory(cpu="3", memory="16Gi")
    op = KueueJobSetOperator(
        task_id="tail",
        namespace=env.namespace,
        queue_name=env.local_queue,
        deferrable=False,
        replicated_jobs=[
            KueueReplicatedJob(
                "coordinator", image="example.invalid/c:1", resources=REQUESTS, annotations=RUN_1S
            ),
            KueueReplicatedJob(
                "workers", image="example.invalid/w:1", completions=2, resources=REQUESTS, annotations=HOLD
            ),
        ],
    )
    run = _InThread(op, _context("tail"))
    try:
        (jobset,) = wait_for("the JobSet", lambda: _jobsets(env) or None, timeout=120)

        def reclaimable() -> int:
            status = (env.workload(jobset) or {}).get("status", {})
            return sum(int(p.get("count") or 0) for p in status.get("reclaimablePods") or [])

        wait_for("the coordinator's pod reclaimed by Kueue", lambda: reclaimable() >= 1, timeout=120)
        wait_for("the task done", lambda: env.release() >= 0 and run.done, timeout=120, interval=1)
    finally:
        op.on_kill()
    assert "error" not in run.outcome, run.outcome
    result = run.outcome["result"]
    assert result["quota_released_pod_seconds"] > 0, result
    assert result["quota_released_cpu_seconds"] == result["quota_released_pod_seconds"], result  # 1 CPU a pod
