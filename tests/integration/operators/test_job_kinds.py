"""The job kinds share one operator template and one trigger loop: what the Job kind does with a deadline and
a queue timeout, the JobSet kind does too (in-process, ``deferrable=False``: the same async trigger loop runs
inside the operator)."""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

import pytest
from kubernetes.client.rest import ApiException

from airflow_kueue_provider.kueue.jobset import JOBSET_GROUP, JOBSET_PLURAL, JOBSET_VERSION
from airflow_kueue_provider.kueue.names import ESCALATIONS_ANNOTATION
from airflow_kueue_provider.operators.indexed_job import KueueIndexedJobOperator, KueueJobFailed
from airflow_kueue_provider.operators.jobset import KueueJobSetFailed, KueueJobSetOperator, KueueReplicatedJob
from airflow_kueue_provider.operators.kueue_operator import KueueOperator

from ..cluster import (
    HOLD,
    Cluster,
    KueueEnv,
    create_kueue_env,
    delete_kueue_env,
    indexed_job,
    is_true,
    short_id,
    wait_for,
)

PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
RUN_1S = {"kwok.airflow-kueue.io/run-duration": "1s"}
IMAGE = "example.invalid/shard:1"


def _context(task_id: str) -> dict[str, Any]:
    """What the operator reads of an Airflow context: the task instance and the DAG run's start."""
    ti = SimpleNamespace(dag_id="kinds", task_id=task_id, run_id="r1", try_number=1, map_index=-1)
    return {"ti": ti, "dag_run": SimpleNamespace(start_date=datetime.now(UTC))}


def _jobset(env: KueueEnv, name: str) -> dict[str, Any] | None:
    try:
        return dict(
            env.cluster.custom.get_namespaced_custom_object(
                JOBSET_GROUP, JOBSET_VERSION, env.namespace, JOBSET_PLURAL, name
            )
        )
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise


def _jobsets(env: KueueEnv) -> list[dict[str, Any]]:
    listed = env.cluster.custom.list_namespaced_custom_object(
        JOBSET_GROUP, JOBSET_VERSION, env.namespace, JOBSET_PLURAL
    )
    return list(listed["items"])


def _admitted_at(workload: dict[str, Any] | None) -> str | None:
    for cond in (workload or {}).get("status", {}).get("conditions", []):
        if cond["type"] == "Admitted" and cond["status"] == "True":
            return str(cond["lastTransitionTime"])
    return None


class _InThread:
    """``op.execute(context)`` in a thread, so the test acts on the cluster while the task waits."""

    def __init__(self, op: KueueOperator, context: dict[str, Any]) -> None:
        self.outcome: dict[str, Any] = {}
        self.thread = threading.Thread(target=self._run, args=(op, context), daemon=True)
        self.thread.start()

    def _run(self, op: KueueOperator, context: dict[str, Any]) -> None:
        try:
            self.outcome["result"] = op.execute(context)  # type: ignore[arg-type]
        except BaseException as exc:  # the test reads it
            self.outcome["error"] = exc

    @property
    def done(self) -> bool:
        return not self.thread.is_alive()


def test_a_jobset_near_its_deadline_is_raised_and_admitted_before_the_others(
    kueue_env_factory: Callable[..., KueueEnv],
) -> None:
    """As the Job kind's test (test_deadline.py): 2 CPUs of quota, held by a blocker; two other Jobs of a
    higher priority queued first. The JobSet's deadline less its margin comes while it still waits (the queue
    stands still: no estimate), so the task raises its WorkloadPriorityClass; once the blocker finishes the
    JobSet goes first."""
    env = kueue_env_factory(cpu="2", memory="16Gi")
    low, mid, urgent = (
        env.priority_class("low", 10),
        env.priority_class("mid", 100),
        env.priority_class("urgent", 1000),
    )
    blocker = env.create_job(indexed_job("blocker", env.local_queue, completions=1, cpu="2", hold=True))
    wait_for("the blocker admitted", lambda: is_true(env.workload(blocker), "Admitted"))
    others = [
        env.create_job(
            indexed_job(
                name, env.local_queue, completions=1, cpu="2", labels={PRIORITY_LABEL: mid}, hold=True
            )
        )
        for name in ("other-1", "other-2")
    ]
    # At risk once 24 s - 16 s = 8 s of the run have passed with the JobSet still queued.
    op = KueueJobSetOperator(
        task_id="genomics",
        namespace=env.namespace,
        queue_name=env.local_queue,
        priority_class=low,
        deadline=timedelta(seconds=24),
        deadline_margin=16,
        on_deadline_risk={"raise_priority": urgent},
        deferrable=False,
        replicated_jobs=[
            KueueReplicatedJob(
                "workers",
                image=IMAGE,
                completions=2,
                parallelism=2,
                resources={"requests": {"cpu": "1", "memory": "1Gi"}},
                annotations={**RUN_1S, **HOLD},  # held, so the others cannot be admitted before we look
            )
        ],
    )
    task = _InThread(op, _context("genomics"))
    try:
        jobset = wait_for("the JobSet", lambda: _jobsets(env), timeout=60)[0]
        name, uid = jobset["metadata"]["name"], jobset["metadata"]["uid"]
        assert jobset["metadata"]["labels"][PRIORITY_LABEL] == low

        def workload() -> dict[str, Any] | None:
            return env.cluster.workload_for_job(env.namespace, uid)

        wait_for(
            "the escalation to the urgent class",
            lambda: (
                ((_jobset(env, name) or {}).get("metadata", {}).get("labels", {}).get(PRIORITY_LABEL))
                == urgent
            ),
            timeout=90,
            explain=lambda: (task.outcome, _jobset(env, name)),
        )
        raised = wait_for(
            "the JobSet's Workload at the urgent priority",
            lambda: (w := workload()) and w["spec"].get("priority") == 1000 and w,
            timeout=60,
            explain=workload,
        )
        assert not is_true(raised, "Admitted")
        recorded = wait_for(
            "the escalation recorded on the JobSet",
            lambda: (
                (_jobset(env, name) or {})
                .get("metadata", {})
                .get("annotations", {})
                .get(ESCALATIONS_ANNOTATION)
            ),
            timeout=60,
        )
        assert [s["step"] for s in json.loads(recorded)] == ["raise_priority"]
        env.release("blocker")  # quota for one of them: the JobSet (1000) goes before the others (100)
        wait_for("the JobSet admitted", lambda: _admitted_at(workload()), timeout=120, explain=workload)
        assert [_admitted_at(env.workload(o)) for o in others] == [None, None]
        child = f"{name}-workers-0"
        wait_for(
            "the task done",
            lambda: (env.release(child), task.done)[1],
            timeout=120,
            interval=0.5,
            explain=lambda: env.pods(child),
        )
    finally:
        if not task.done:  # a failed wait: the JobSet goes, so the operator's loop ends too
            op.on_kill()
    assert "error" not in task.outcome, task.outcome["error"]
    result = task.outcome["result"]
    assert result["jobset_name"] == name, result
    (step,) = result["escalations"]
    assert step["step"] == "raise_priority" and step["detail"] == urgent, result["escalations"]
    assert result["deadline"] and result["eta_history"], result
    assert result["eta_history"][-1]["at_risk"] is True, result["eta_history"]
    assert [(rj["name"], rj["succeeded"]) for rj in result["replicated_jobs"]] == [("workers", 2)], result
    assert is_true(_jobset(env, name), "Completed")


def _never_admitted(kind: str, env: KueueEnv) -> KueueOperator:
    """2 CPUs asked of a ClusterQueue with 1: Kueue keeps it queued for ever."""
    common: dict[str, Any] = {
        "task_id": "never",
        "namespace": env.namespace,
        "queue_name": env.local_queue,
        "queue_timeout": 10,
        "deferrable": False,
    }
    requests = {"requests": {"cpu": "2", "memory": "1Gi"}}
    if kind == "job":
        return KueueIndexedJobOperator(
            image=IMAGE, completions=1, resources=requests, annotations=RUN_1S, **common
        )
    return KueueJobSetOperator(
        replicated_jobs=[KueueReplicatedJob("workers", image=IMAGE, resources=requests, annotations=RUN_1S)],
        **common,
    )


@pytest.mark.parametrize("kind", ["job", "jobset"])
def test_queue_timeout_deletes_a_never_admitted_object_of_either_kind(
    kind: str, kueue_env_factory: Callable[..., KueueEnv]
) -> None:
    env = kueue_env_factory(cpu="1", memory="4Gi")
    op = _never_admitted(kind, env)
    failure_type = KueueJobFailed if kind == "job" else KueueJobSetFailed
    started = time.monotonic()
    with pytest.raises(failure_type) as failure:
        op.execute(_context("never"))  # type: ignore[arg-type]
    took = time.monotonic() - started
    error = failure.value
    assert isinstance(error, (KueueJobFailed, KueueJobSetFailed))
    message = str(error)
    assert error.status == "timeout", message
    assert "more than queue_timeout=10s" in message, message
    match = re.search(r"waited (\d+)s in queue lq", message)
    assert match and 10 <= int(match.group(1)) <= 40, message
    assert took < 60, f"the task failed {took:.0f}s after it started: {message}"
    name = (error.job_name if isinstance(error, KueueJobFailed) else error.jobset_name) or ""
    assert name, message

    def gone() -> bool:
        return (env.job(name) if kind == "job" else _jobset(env, name)) is None

    wait_for(f"{kind} {name} gone", gone, timeout=60, explain=lambda: (env.jobs(), _jobsets(env)))


UNMANAGED_NAMESPACE = "kube-system"  # Kueue's defaults leave it out (managedJobsNamespaceSelector, webhooks)


@pytest.fixture
def unmanaged(cluster: Cluster, request: pytest.FixtureRequest) -> Iterator[tuple[KueueEnv, str]]:
    """As test_never_outside_quota.py's: a ClusterQueue and LocalQueue serving kube-system, and a DAG id of
    this test's own (kube-system is shared). Afterwards only objects with that DAG id are removed, should
    the operator have left one."""
    env = create_kueue_env(
        cluster, request.node.name, namespace=UNMANAGED_NAMESPACE, local_queue=f"lq-{short_id()}"
    )
    dag_id = f"unmanaged-{short_id()}"
    yield env, dag_id
    selector = f"airflow-kueue.io/dag-id={dag_id}"
    for job in cluster.batch.list_namespaced_job(UNMANAGED_NAMESPACE, label_selector=selector).items:
        cluster.batch.delete_namespaced_job(
            job.metadata.name, UNMANAGED_NAMESPACE, propagation_policy="Background"
        )
    listed = cluster.custom.list_namespaced_custom_object(
        JOBSET_GROUP, JOBSET_VERSION, UNMANAGED_NAMESPACE, JOBSET_PLURAL, label_selector=selector
    )
    for jobset in listed["items"]:
        cluster.custom.delete_namespaced_custom_object(
            JOBSET_GROUP,
            JOBSET_VERSION,
            UNMANAGED_NAMESPACE,
            JOBSET_PLURAL,
            jobset["metadata"]["name"],
            propagation_policy="Background",
        )
    delete_kueue_env(env)


def _unmanaged(kind: str, env: KueueEnv) -> KueueOperator:
    """A small object in a LocalQueue of a namespace Kueue does not manage; Kueue gets 5 s to make its
    Workload."""
    common: dict[str, Any] = {
        "task_id": "unmanaged",
        "namespace": env.namespace,
        "queue_name": env.local_queue,
        "workload_timeout": 5,
        "deferrable": False,
    }
    requests = {"requests": {"cpu": "250m", "memory": "256Mi"}}
    if kind == "job":
        return KueueIndexedJobOperator(
            image=IMAGE, completions=2, resources=requests, annotations=RUN_1S, **common
        )
    return KueueJobSetOperator(
        replicated_jobs=[
            KueueReplicatedJob("workers", image=IMAGE, completions=2, resources=requests, annotations=RUN_1S)
        ],
        **common,
    )


@pytest.mark.parametrize("kind", ["job", "jobset"])
def test_an_object_kueue_does_not_manage_is_deleted_and_fails_naming_kueue(
    kind: str, unmanaged: tuple[KueueEnv, str]
) -> None:
    """As test_never_outside_quota.py's Job test, for either kind, in-process: the object is created
    suspended in kube-system, Kueue makes no Workload for it, no pod of it ever runs, and once
    ``workload_timeout`` is over it is deleted and the task fails naming Kueue."""
    env, dag_id = unmanaged
    context = _context("unmanaged")
    context["ti"].dag_id = dag_id
    op = _unmanaged(kind, env)
    noun = "Job" if kind == "job" else "JobSet"

    def our_pods() -> list[str]:
        pods = env.cluster.core.list_namespaced_pod(
            env.namespace, label_selector=f"airflow-kueue.io/dag-id={dag_id}"
        )
        return [p.metadata.name for p in pods.items]

    pods_seen: list[str] = []
    started = time.monotonic()
    task = _InThread(op, context)
    try:
        while not task.done and time.monotonic() - started < 90:
            pods_seen += our_pods()
            time.sleep(0.5)
    finally:
        if not task.done:  # it did not end: the object goes, so the operator's loop ends too
            op.on_kill()
            task.thread.join(30)
    took = time.monotonic() - started
    pods_seen += our_pods()

    error = task.outcome.get("error")
    failure_type = KueueJobFailed if kind == "job" else KueueJobSetFailed
    assert isinstance(error, failure_type), task.outcome
    assert isinstance(error, (KueueJobFailed, KueueJobSetFailed))
    message = str(error)
    assert error.status == "failed", message
    name = (error.job_name if isinstance(error, KueueJobFailed) else error.jobset_name) or ""
    assert name, message
    assert (
        f"Kueue did not create a Workload for {noun} {env.namespace}/{name} within workload_timeout=5s"
    ) in message, message
    assert "no pod ran" in message and "it was deleted" in message, message
    assert "Likely:" in message and "the namespace is not managed by Kueue" in message, message
    assert pods_seen == [], f"no pod of the {noun} ever started: {sorted(set(pods_seen))}"
    assert took < 60, f"the task failed {took:.0f}s after it started: {message}"

    def gone() -> bool:
        if kind == "job":
            return env.job(name) is None
        return _jobset(env, name) is None

    wait_for(f"{noun} {name} gone (404)", gone, timeout=30, explain=lambda: (env.jobs(), _jobsets(env)))
